package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/trainer"
)

// torchInit is a state_dict of python/voxtrain_torch.py's UNet3D (3
// classes, features 4-8-16, deep supervision) written by PyTorch
// (python/testdata/make_init_fixture.py).
func torchInit() string {
	return filepath.Join(testutil.RepoRoot(), "python", "testdata", "torch_init.safetensors")
}

// initConfig writes, into dir, a one-step training config for torchInit's
// network with classes classes on dataset (the demo data when ""), with
// extra appended to its train: section; it returns the config's path.
func initConfig(t *testing.T, dir string, classes int, dataset, extra string) string {
	t.Helper()
	if dataset == "" {
		dataset = testutil.DemoDir(t)
	}
	doc := `experiment: ft
seed: 3
output_dir: runs
data:
  dataset: ` + dataset + `
  splits_file: splits.json
  num_folds: 2
  workers: 1
model:
  in_channels: 1
  num_classes: ` + string(rune('0'+classes)) + `
  features: [4, 8, 16]
  deep_supervision: true
validation:
  every: -1
train:
  epochs: 1
  iterations_per_epoch: 1
  batch_size: 2
  patch_size: [16, 16, 16]
` + extra
	p := filepath.Join(dir, "ft.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fineTune runs the train command in process with args and returns, with
// its result and error, the model's weights before its first step (nil
// when it took none) and its output.
func fineTune(t *testing.T, args ...string) (first []nn.HostTensor, res *trainer.Result, out string, err error) {
	t.Helper()
	f, stdout, errb := testFactory()
	f.Args = append([]string{"train"}, args...)
	cmd := NewCmdTrain(f, func(ctx context.Context, o *TrainOptions) error {
		o.beforeStep = func(step int64, m *nn.UNet) {
			if step != 0 {
				return
			}
			var err error
			if first, err = nn.ExportParams(m.Device(), m.Params()); err != nil {
				t.Error(err)
			}
		}
		var err error
		res, err = trainRun(ctx, o)
		return err
	})
	cmd.SetArgs(append(args, "--threads", "2"))
	err = cmd.ExecuteContext(context.Background())
	return first, res, stdout.String() + errb.String(), err
}

// freshWeights is the initialisation voxtrain draws for cfg's model.
func freshWeights(t *testing.T, cfgPath string) map[string]nn.HostTensor {
	t.Helper()
	c, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New(cpu.Options{Threads: 1})
	m, err := nn.NewUNet(dev, c.Model, c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	ws, err := nn.ExportParams(dev, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]nn.HostTensor{}
	for _, w := range ws {
		out[w.Name] = w
	}
	return out
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantAll(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

// TestInitWeightsFromPyTorch: a state_dict written by PyTorch fine-tunes
// through the command line: the weights the first step starts from are
// the file's, bit for bit (not voxtrain's initialisation), the run starts
// at epoch 0 and step 0, and the run records the file (absolute, though
// given relative) and its SHA-256 in config.yaml, train.log and every
// checkpoint's state.json.
func TestInitWeightsFromPyTorch(t *testing.T) {
	dir := t.TempDir()
	cfg := initConfig(t, dir, 3, "", "")
	file := torchInit()
	t.Chdir(filepath.Dir(file))
	first, res, out, err := fineTune(t, "--config", cfg, "--init-weights", filepath.Base(file))
	if err != nil {
		t.Fatalf("fine-tuning: %v\n%s", err, out)
	}
	if res.Epochs != 1 || res.Steps != 1 {
		t.Errorf("ran %d epochs, %d steps: want a fresh schedule's 1 and 1", res.Epochs, res.Steps)
	}
	want := testutil.ReadSafetensors(t, file)
	fresh := freshWeights(t, cfg)
	if len(first) != len(want) {
		t.Fatalf("the model has %d tensors, the file %d", len(first), len(want))
	}
	for _, w := range first {
		if !slices.Equal(w.Data, want[w.Name].Data) || !slices.Equal([]int(w.Shape), []int(want[w.Name].Shape)) {
			t.Errorf("%s before the first step differs from the file's", w.Name)
		}
		if slices.Equal(w.Data, fresh[w.Name].Data) && !strings.HasSuffix(w.Name, "bias") {
			t.Errorf("%s is voxtrain's own initialisation", w.Name)
		}
	}
	sum := sha256File(t, file)
	wantAll(t, "config.yaml", readFile(t, filepath.Join(res.RunDir, "config.yaml")), "init_weights: "+file+"\n", "init_mismatch: error\n")
	wantAll(t, "train.log", readFile(t, filepath.Join(res.RunDir, "train.log")),
		"init weights: fine-tuning from "+file, "sha256="+sum, "loaded=48 of=48 reinitialised=0 unused=0")
	var st trainer.State
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(res.RunDir, "checkpoints", "last", "state.json"))), &st); err != nil {
		t.Fatal(err)
	}
	if st.InitWeights != file || st.InitSHA256 != sum || st.Epoch != 1 || st.Step != 1 {
		t.Errorf("state.json: %+v", st)
	}
}

// binaryDemo is a few demo cases with their labels merged into one
// foreground class (a 2-class task).
func binaryDemo(t *testing.T) string {
	t.Helper()
	dir := testutil.DemoSubset(t, []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019"})
	labels, _ := filepath.Glob(filepath.Join(dir, "labelsTr", "*.nii.gz"))
	for _, p := range labels {
		h, v, err := nifti.ReadFloat32(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v {
			v[i] = min(v[i], 1)
		}
		if err := nifti.WriteFloat32(p, h, v); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// threeClassCheckpoint saves torchInit's weights as a voxtrain checkpoint
// of a 3-class run under dir and returns the checkpoint's directory.
func threeClassCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	var model []nn.HostTensor
	for _, w := range testutil.ReadSafetensors(t, torchInit()) {
		model = append(model, w)
	}
	s := checkpoint.Saver{Dir: filepath.Join(dir, "pre", "checkpoints"), Policy: config.Default().Checkpoint}
	saved, err := s.Save(&checkpoint.Checkpoint{Epoch: 4, Step: 40, Model: model, Optimizer: []nn.HostTensor{},
		State: trainer.State{Epoch: 4, Step: 40}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return saved.Dir
}

// TestInitWeightsClassCountChange: a 3-class checkpoint into a 2-class
// model. Under the default policy (error) the start is refused naming the
// file and each head tensor with both shapes, and nothing is written into
// the run directory; under skip (the flag, or the config's keys with a
// path relative to the config) the run starts, the heads keep voxtrain's
// fresh initialisation, every other tensor is the checkpoint's, and the
// log lists the re-initialised heads and why. The checkpoint directory
// and its model.safetensors give the same weights.
func TestInitWeightsClassCountChange(t *testing.T) {
	dir := t.TempDir()
	ckpt := threeClassCheckpoint(t, dir)
	file := filepath.Join(ckpt, "model.safetensors")
	data := binaryDemo(t)
	cfg := initConfig(t, dir, 2, data, "")
	heads := []string{
		"head.weight: shape [3 4 1 1 1] in the file, [2 4 1 1 1] expected",
		"head.bias: shape [3] in the file, [2] expected",
		"ds.0.weight: shape [3 8 1 1 1] in the file, [2 8 1 1 1] expected",
		"ds.0.bias: shape [3] in the file, [2] expected",
	}

	_, _, out, err := fineTune(t, "--config", cfg, "--init-weights", ckpt)
	if err == nil {
		t.Fatalf("a 3-class checkpoint loaded into a 2-class model under init_mismatch error\n%s", out)
	}
	var lines []string
	for _, h := range heads {
		lines = append(lines, "\n  "+h+"\n")
	}
	wantAll(t, "the error", err.Error()+"\n", append(lines, "--init-weights: "+file+" does not fit the model: 4 tensors mismatched, 0 missing from the file, 0 in the file but not in the model:",
		"use --init-mismatch skip")...)
	if _, serr := os.Stat(filepath.Join(dir, "runs", "ft", "fold_0", "run_0", "config.yaml")); serr == nil {
		t.Error("the refused start wrote the run's config.yaml")
	}

	first, res, out, err := fineTune(t, "--config", cfg, "--init-weights", ckpt, "--init-mismatch", "skip", "--run-id", "1")
	if err != nil {
		t.Fatalf("skip: %v\n%s", err, out)
	}
	log := readFile(t, filepath.Join(res.RunDir, "train.log"))
	wantAll(t, "train.log", log, "init weights: fine-tuning from "+file, "loaded=44 of=48 reinitialised=4 unused=0", "mismatch=skip",
		"checkpoint_epoch=4 checkpoint_step=40")
	for _, h := range heads {
		name, why, _ := strings.Cut(h, ": ")
		wantAll(t, "train.log", log, `msg="init weights: kept the fresh initialisation" tensor=`+name+` reason="`+why+`"`)
	}
	src, fresh := testutil.ReadSafetensors(t, file), freshWeights(t, cfg)
	for _, w := range first {
		want := src[w.Name]
		if strings.HasPrefix(w.Name, "head.") || strings.HasPrefix(w.Name, "ds.") {
			want = fresh[w.Name]
		}
		if !slices.Equal(w.Data, want.Data) {
			t.Errorf("%s before the first step: not the expected weights", w.Name)
		}
	}

	// The config's keys, init_weights relative to the config, name the
	// checkpoint's model.safetensors.
	rel, _ := filepath.Rel(dir, file)
	keys := initConfig(t, dir, 2, data, "  init_weights: "+rel+"\n  init_mismatch: skip\n")
	again, _, out, err := fineTune(t, "--config", keys, "--run-id", "2")
	if err != nil {
		t.Fatalf("the config's keys: %v\n%s", err, out)
	}
	for i := range first {
		if first[i].Name != again[i].Name || !slices.Equal(first[i].Data, again[i].Data) {
			t.Errorf("%s: the checkpoint directory and its model.safetensors gave different weights", first[i].Name)
		}
	}
}

// TestInitWeightsBadFiles: every file that cannot start a fine-tuning is
// refused naming the file and the problem: a state_dict whose names are
// not the model's (nn.DataParallel's "module." prefix) under either
// policy, a file that is not safetensors (torch.save's zip), one that is
// not there; and a bare file given to --resume says to use --init-weights.
func TestInitWeightsBadFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := initConfig(t, dir, 3, "", "")
	var renamed []safetensors.Tensor
	for name, w := range testutil.ReadSafetensors(t, torchInit()) {
		renamed = append(renamed, safetensors.Float32("module."+name, w.Shape, w.Data))
	}
	wrong := filepath.Join(dir, "dataparallel.safetensors")
	var buf bytes.Buffer
	if _, err := safetensors.Write(&buf, renamed, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"error", "skip"} {
		_, _, _, err := fineTune(t, "--config", cfg, "--init-weights", wrong, "--init-mismatch", policy)
		wantErr(t, err, "--init-weights: none of the model's 48 tensors is in "+wrong+" with its name and shape")
		wantErr(t, err, `the file's are named like "module.dec.0.0.0.bias", the model's like "enc.0.0.0.weight"`)
	}
	// Some names right, some not: the error lists them.
	renamed = renamed[:0]
	for name, w := range testutil.ReadSafetensors(t, torchInit()) {
		if strings.HasPrefix(name, "dec.") {
			name = "decoder." + strings.TrimPrefix(name, "dec.")
		}
		renamed = append(renamed, safetensors.Float32(name, w.Shape, w.Data))
	}
	buf.Reset()
	if _, err := safetensors.Write(&buf, renamed, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := fineTune(t, "--config", cfg, "--init-weights", wrong)
	wantErr(t, err, "--init-weights: "+wrong+" does not fit the model: 0 tensors mismatched, 16 missing from the file, 16 in the file but not in the model:")
	wantErr(t, err, "\n  dec.0.0.0.weight: missing from the file\n")
	wantErr(t, err, "\n  decoder.0.0.0.weight: in the file, not in the model\n")

	zip := filepath.Join(dir, "model.safetensors")
	os.WriteFile(zip, []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00 torch.save's archive"), 0o644)
	_, _, _, err = fineTune(t, "--config", cfg, "--init-weights", zip)
	wantErr(t, err, zip)
	wantErr(t, err, "not a safetensors file")

	missing := filepath.Join(dir, "nope.safetensors")
	_, _, _, err = fineTune(t, "--config", cfg, "--init-weights", missing)
	wantErr(t, err, "--init-weights: stat "+missing+": no such file")

	_, _, _, err = fineTune(t, "--config", cfg, "--resume", torchInit())
	wantErr(t, err, "--resume "+torchInit()+": a bare weights file holds the weights only")
	wantErr(t, err, "use --init-weights "+torchInit())
}

// TestInitWeightsRefusedWithResume: --init-weights begins a run, so on a
// run that has checkpoints it is refused with --resume auto, with a
// checkpoint path and without --resume, each time saying which flag to
// drop, and the run is left as it was. The printed resume command leaves
// --init-weights out, and that resume continues from the checkpoint
// without calling the missing flag a change of config; a resume with
// train.init_weights in the config continues from the checkpoint too. The
// record of the init file stays in state.json.
func TestInitWeightsRefusedWithResume(t *testing.T) {
	dir := t.TempDir()
	file := torchInit()
	cfg := initConfig(t, dir, 3, "", "")
	_, res, out, err := fineTune(t, "--config", cfg, "--init-weights", file)
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	log := readFile(t, filepath.Join(res.RunDir, "train.log"))
	last := filepath.Join(res.RunDir, "checkpoints", "last")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--resume", "auto"}, []string{"--init-weights starts a new run from " + file, "--resume auto continues the run in " + res.RunDir, "drop --init-weights to continue that run", "drop --resume auto"}},
		{[]string{"--resume", last}, []string{"--init-weights " + file + " and --resume " + last, "drop --init-weights", "drop --resume"}},
		{nil, []string{"--init-weights starts a new run from " + file, "already holds checkpoints", "choose another --run-id or --output-dir", "drop --init-weights"}},
	} {
		args := append([]string{"--config", cfg, "--epochs", "2", "--init-weights", file}, c.args...)
		first, _, _, err := fineTune(t, args...)
		if err == nil || first != nil {
			t.Errorf("%q: started (%v)", args, err)
			continue
		}
		wantAll(t, "the error", err.Error(), c.want...)
	}
	if got := readFile(t, filepath.Join(res.RunDir, "train.log")); got != log {
		t.Errorf("a refused start changed train.log")
	}
	if got := resumeCommand([]string{"train", "--config", "c.yaml", "--init-weights", "w.safetensors", "--init-weights=x", "--init-mismatch", "skip"}); got != "train --config c.yaml --init-mismatch skip --resume auto" {
		t.Errorf("resume command %q", got)
	}

	resumed := func(args ...string) string {
		t.Helper()
		first, res, out, err := fineTune(t, args...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		ckpt := testutil.ReadSafetensors(t, filepath.Join(last, "model.safetensors"))
		for _, w := range first {
			if !slices.Equal(w.Data, ckpt[w.Name].Data) {
				t.Fatalf("%q: %s: the resumed run did not start from its checkpoint", args, w.Name)
			}
		}
		var st trainer.State
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(last, "state.json"))), &st); err != nil {
			t.Fatal(err)
		}
		if st.InitWeights != file || st.InitSHA256 != sha256File(t, file) || st.Step != res.Steps {
			t.Errorf("%q: the resumed run's state.json: %+v", args, st)
		}
		return out
	}
	out = resumed("--config", cfg, "--epochs", "2", "--resume", "auto")
	wantAll(t, "the output", out, `changed="train.epochs: 1 → 2"`)
	if strings.Contains(out, "init_weights") {
		t.Errorf("the resume without --init-weights called it a change:\n%s", out)
	}
	keys := initConfig(t, dir, 3, "", "  init_weights: "+file+"\n")
	out = resumed("--config", keys, "--epochs", "3", "--resume", "auto")
	wantAll(t, "the output", out, "init weights not loaded: the run continues from its checkpoint")
}

// TestInitWeightsFromTorchSave: the same weights saved with torch.save
// (torch.save(state_dict, "torch_init.pt"), checkpoint/torchpt's fixture)
// fine-tune as the safetensors file does, bit for bit; the log records
// the .pt file and its own SHA-256.
func TestInitWeightsFromTorchSave(t *testing.T) {
	dir := t.TempDir()
	cfg := initConfig(t, dir, 3, "", "")
	pt := filepath.Join(testutil.RepoRoot(), "checkpoint", "torchpt", "testdata", "torch_init.pt")
	first, res, out, err := fineTune(t, "--config", cfg, "--init-weights", pt)
	if err != nil {
		t.Fatalf("fine-tuning from %s: %v\n%s", pt, err, out)
	}
	want := testutil.ReadSafetensors(t, torchInit())
	if len(first) != len(want) {
		t.Fatalf("the model has %d tensors, the file %d", len(first), len(want))
	}
	for _, w := range first {
		if !slices.Equal(w.Data, want[w.Name].Data) {
			t.Errorf("%s differs from the safetensors file's", w.Name)
		}
	}
	wantAll(t, "train.log", readFile(t, filepath.Join(res.RunDir, "train.log")),
		"init weights: fine-tuning from "+pt, "sha256="+sha256File(t, pt), "loaded=48 of=48 reinitialised=0 unused=0")
}
