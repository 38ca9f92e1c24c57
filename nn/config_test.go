package nn_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

func TestDecodeSection(t *testing.T) {
	doc := `
data:
  anything: [1, 2]
model:
  in_channels: 2
  num_classes: 3
  base_features: 32
  max_features: 320
  levels: 6
  kernel_sizes: [[1, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3]]
  deep_supervision: true
loss:
  name: dice_ce
  batch_dice: true
optim:
  name: sgd
  schedule: {name: poly}
`
	var m nn.UNetConfig
	if err := nn.DecodeSection(strings.NewReader(doc), "run.yaml", "model", &m); err != nil {
		t.Fatal(err)
	}
	m = m.WithDefaults()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []int{32, 64, 128, 256, 320, 320}
	for i := range want {
		if m.Features[i] != want[i] {
			t.Fatalf("features %v, want nnU-Net's %v", m.Features, want)
		}
	}
	if m.KernelSizes[0] != [3]int{1, 3, 3} || m.Strides[1] != [3]int{2, 2, 2} || m.OutChannels != 3 || !m.DeepSupervision {
		t.Errorf("decoded %+v", m)
	}
	var l nn.LossConfig
	if err := nn.DecodeSection(strings.NewReader(doc), "run.yaml", "loss", &l); err != nil || !l.BatchDice {
		t.Fatalf("loss: %+v, %v", l, err)
	}
	var o nn.OptimConfig
	if err := nn.DecodeSection(strings.NewReader(doc), "run.yaml", "optim", &o); err != nil || o.Schedule.Name != "poly" {
		t.Fatalf("optim: %+v, %v", o, err)
	}

	bad := "model:\n  in_channels: 1\n  featurs: [8, 16]\n"
	err := nn.DecodeSection(strings.NewReader(bad), "bad.yaml", "model", &m)
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "featurs") || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("unknown key: error %v, want file, line 3 and the key", err)
	}
}

func TestLoadModelConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"model:\n  norm: batch\n", "model.norm"},
		{"model:\n  features: [8, 0]\n", "model.features[1]"},
		{"model:\n  features: [8, 16]\n  strides: [[2, 2, 2], [2, 2, 2]]\n", "model.strides[0]"},
		{"model:\n  kernel_sizes: [[3, 3, 3], [2, 2, 2], [3, 3, 3], [3, 3, 3]]\n", "model.kernel_sizes[1]"},
		{"model:\n  num_classes: 2\n  out_channels: 3\n", "disagree"},
		{"model:\n  features: [8, 16]\n  deep_supervision: true\n", "deep_supervision"},
		{"model: [1, 2]\n", "cannot unmarshal"},
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := nn.LoadModelConfig(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.yaml, err, c.want)
		}
	}
	if _, err := nn.LoadModelConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestNewUNetRejectsBadPatch(t *testing.T) {
	m, err := nn.NewUNet(newDev(), nn.UNetConfig{Features: []int{2, 4, 8}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewWorkspace(1, [3]int{16, 16, 10}, true); err == nil || !strings.Contains(err.Error(), "divisible") {
		t.Errorf("patch 16x16x10 with two stride-2 levels: %v, want a divisibility error", err)
	}
	if _, err := m.NewWorkspace(1, [3]int{16, 16, 12}, true); err != nil {
		t.Error(err)
	}
}

func TestParamNamesMatchReferenceNet(t *testing.T) {
	// bench/torch_unet_step.py's UNet3D has 1,401,986 parameters.
	m, err := nn.NewUNet(newDev(), nn.UNetConfig{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumParams() != 1401986 {
		t.Errorf("default U-Net has %d parameters, the reference 1,401,986", m.NumParams())
	}
	ps := m.Params()
	first, last := ps[0], ps[len(ps)-1]
	if first.Name != "enc.0.0.0.weight" || !first.TorchShape.Equal(nn.Shape{16, 1, 3, 3, 3}) {
		t.Errorf("first parameter %s %v", first.Name, first.TorchShape)
	}
	if last.Name != "head.bias" || !last.TorchShape.Equal(nn.Shape{2}) {
		t.Errorf("last parameter %s %v", last.Name, last.TorchShape)
	}
	for _, p := range ps {
		if p.Name == "up.0.weight" && !p.TorchShape.Equal(nn.Shape{128, 64, 2, 2, 2}) {
			t.Errorf("up.0.weight shape %v, PyTorch (128, 64, 2, 2, 2)", p.TorchShape)
		}
	}
}

func TestSchedules(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
	poly := nn.ScheduleConfig{Name: "poly"}.WithDefaults()
	for _, c := range []struct{ step, total int }{{0, 1000}, {500, 1000}, {999, 1000}, {1000, 1000}} {
		want := 0.01 * math.Pow(1-float64(c.step)/float64(c.total), 0.9)
		if got := poly.LR(0.01, c.step, c.total); !near(got, want) {
			t.Errorf("poly step %d: %v, want %v", c.step, got, want)
		}
	}
	// torch.optim.lr_scheduler.OneCycleLR(max_lr=0.1, total_steps=20, cycle_momentum=False).
	torchOneCycle := []float64{0.004, 0.01316718427, 0.03716718427, 0.06683281573, 0.09083281573, 0.1, 0.098746400624,
		0.095048463201, 0.089091617757, 0.081174565395, 0.071694300179, 0.061126202194, 0.0500002, 0.038874197806,
		0.028306099821, 0.018825834605, 0.010908782243, 0.004951936799, 0.001253999376, 4e-07}
	oc := nn.ScheduleConfig{Name: "onecycle"}.WithDefaults()
	for i, want := range torchOneCycle {
		if got := oc.LR(0.1, i, 20); math.Abs(got-want) > 1e-11 {
			t.Errorf("onecycle step %d: %v, PyTorch %v", i, got, want)
		}
	}
	cos := nn.ScheduleConfig{Name: "cosine", WarmupSteps: 10, MinLR: 1e-4}.WithDefaults()
	for _, c := range []struct {
		step int
		want float64
	}{{0, 0}, {5, 0.005}, {10, 0.01}, {55, 1e-4 + (0.01-1e-4)*0.5}, {100, 1e-4}} {
		if got := cos.LR(0.01, c.step, 100); !near(got, c.want) {
			t.Errorf("cosine step %d: %v, want %v", c.step, got, c.want)
		}
	}
	if got := (nn.ScheduleConfig{Name: "constant"}).LR(0.3, 50, 100); got != 0.3 {
		t.Errorf("constant: %v", got)
	}
}

func TestDeepSupervisionWeights(t *testing.T) {
	w := nn.DeepSupervisionWeights(4)
	want := []float64{1 / 1.75, 0.5 / 1.75, 0.25 / 1.75, 0}
	for i := range want {
		if math.Abs(w[i]-want[i]) > 1e-15 {
			t.Fatalf("weights %v, want %v", w, want)
		}
	}
	if w := nn.DeepSupervisionWeights(1); w[0] != 1 {
		t.Errorf("one output: %v", w)
	}
}
