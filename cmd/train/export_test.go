package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/onnx"
)

// TestExportTrainedCheckpoint trains a tiny U-Net (three demo cases, two
// steps, deep supervision) with the root command, exports its last
// checkpoint with `train export`, and reads the file back with package
// onnx's reader: it decodes, passes Check, re-encodes to the same bytes,
// declares the dynamic input and output, and its initializers are the
// checkpoint's weights bit for bit, all of them but the deep supervision
// heads.
func TestExportTrainedCheckpoint(t *testing.T) {
	demo := testutil.DemoDir(t)
	dir := t.TempDir()
	var cases strings.Builder
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"} {
		cases.WriteString("    - {image: " + filepath.Join(demo, "imagesTr", id+".nii.gz") +
			", label: " + filepath.Join(demo, "labelsTr", id+".nii.gz") + "}\n")
	}
	cfgPath := filepath.Join(dir, "tiny.yaml")
	err := os.WriteFile(cfgPath, []byte("experiment: tiny\nseed: 5\ndata:\n  fold: -1\n  store: store\n  workers: 1\n  cases:\n"+cases.String()+
		"model:\n  num_classes: 3\n  features: [4, 8, 8]\n  deep_supervision: true\n"+
		"train:\n  epochs: 1\n  iterations_per_epoch: 2\n  patch_size: [16, 16, 16]\n  batch_size: 1\n"+
		"validation:\n  every: -1\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	if out, errb, err := runCmd(t, "--config", cfgPath, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("training: %v\n%s\n%s", err, out, errb)
	}
	ckpt := filepath.Join(runs, "tiny", "fold_all", "run_0", "checkpoints", "last")
	file := filepath.Join(dir, "tiny.onnx")
	out, errb, err := runCmd(t, "export", "--checkpoint", ckpt, "--onnx", file)
	if err != nil {
		t.Fatalf("export: %v\n%s", err, errb)
	}
	if !strings.Contains(out.String(), "wrote "+file) || !strings.Contains(out.String(), "opset 17") {
		t.Errorf("export printed %q", out)
	}

	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Unmarshal(raw)
	if err != nil {
		t.Fatalf("reading back %s: %v", file, err)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !bytes.Equal(m.Marshal(), raw) {
		t.Error("re-encoding the exported file changes its bytes")
	}
	g := m.Graph
	if m.ProducerName != "voxtrain" || m.ProducerVersion != "test" || len(g.Inputs) != 1 || len(g.Outputs) != 1 ||
		g.Inputs[0].Name != "input" || g.Inputs[0].Shape[1].Value != 1 || g.Inputs[0].Shape[2].Param != "D" ||
		g.Outputs[0].Name != "logits" || g.Outputs[0].Shape[1].Value != 3 || g.Outputs[0].Shape[0].Param != "N" {
		t.Errorf("model %q %q, inputs %+v, outputs %+v", m.ProducerName, m.ProducerVersion, g.Inputs, g.Outputs)
	}
	meta := map[string]string{}
	for _, p := range m.Metadata {
		meta[p.Key] = p.Value
	}
	if meta["voxtrain.patch_size"] != "16,16,16" || meta["voxtrain.spatial_multiple"] != "4,4,4" || meta["voxtrain.normalization"] != "zscore" {
		t.Errorf("metadata %v", meta)
	}

	// The checkpoint's weights, read as inference reads them.
	cfg := config.Default().Model
	cfg.NumClasses, cfg.Features, cfg.DeepSupervision = 3, []int{4, 8, 8}, true
	dev := cpu.New(cpu.Options{Threads: 1})
	net, err := nn.NewUNet(dev, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Free()
	want, err := nn.ExportParams(dev, net.Params())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Load(ckpt, want, nil); err != nil {
		t.Fatal(err)
	}
	inits := map[string]*onnx.Tensor{}
	for i := range g.Initializers {
		inits[g.Initializers[i].Name] = &g.Initializers[i]
	}
	for _, p := range want {
		init, ok := inits[p.Name]
		delete(inits, p.Name)
		if strings.HasPrefix(p.Name, "ds.") {
			if ok {
				t.Errorf("deep supervision head %s exported", p.Name)
			}
			continue
		}
		if !ok {
			t.Errorf("parameter %s not exported", p.Name)
			continue
		}
		data, err := init.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		testutil.SameBits(t, p.Name, []nn.HostTensor{{Name: p.Name, Shape: p.Shape, Data: data}}, []nn.HostTensor{p})
	}
	for name := range inits {
		t.Errorf("initializer %s is no parameter of the checkpoint", name)
	}

	// Errors name what is wrong.
	_, _, err = runCmd(t, "export", "--checkpoint", filepath.Join(dir, "nowhere"), "--onnx", file)
	wantErr(t, err, "nowhere")
	_, _, err = runCmd(t, "export", "--checkpoint", ckpt, "--onnx", filepath.Join(dir, "no", "such", "dir", "m.onnx"))
	wantErr(t, err, "--onnx "+filepath.Join(dir, "no", "such", "dir", "m.onnx"))
}

// TestExportChecksOutputFirst: an --onnx that is a folder, or in a folder
// that does not exist, is refused naming it before the checkpoint is read
// (the checkpoint here does not exist either).
func TestExportChecksOutputFirst(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ out, want string }{
		{dir, "--onnx " + dir + ": is a directory"},
		{filepath.Join(dir, "nope", "m.onnx"), "--onnx " + filepath.Join(dir, "nope", "m.onnx") + ": its folder"},
	} {
		_, _, err := runCmd(t, "export", "--checkpoint", filepath.Join(dir, "missing"), "--onnx", tc.out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--onnx %s: %v, want %q", tc.out, err, tc.want)
		}
	}
}

// TestExportSpacingUnit: a checkpoint whose target spacing states its
// unit exports both as metadata; one without a target exports neither.
func TestExportSpacingUnit(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	for fold, tc := range []struct {
		target       []float64
		unit         string
		spacing, out string
	}{
		{[]float64{1.5, 1.5, 3}, "mm", "1.5 1.5 3", "millimeter"},
		{[]float64{1.5, 1.5, 3}, "", "1.5 1.5 3", ""},
		{nil, "um", "", ""},
	} {
		ck := tinyCheckpoint(t, runs, fold, 1, func(c *config.Config) { c.Data.TargetSpacing, c.Data.SpacingUnit = tc.target, tc.unit })
		file := filepath.Join(t.TempDir(), "m.onnx")
		if _, errb, err := runCmd(t, "export", "--checkpoint", ck, "--onnx", file); err != nil {
			t.Fatalf("export: %v\n%s", err, errb)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := onnx.Unmarshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{}
		for _, p := range m.Metadata {
			meta[p.Key] = p.Value
		}
		if meta["voxtrain.target_spacing"] != tc.spacing || meta["voxtrain.spacing_unit"] != tc.out {
			t.Errorf("target %v %q: metadata target_spacing %q spacing_unit %q, want %q %q", tc.target, tc.unit, meta["voxtrain.target_spacing"], meta["voxtrain.spacing_unit"], tc.spacing, tc.out)
		}
	}
}
