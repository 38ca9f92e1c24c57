package nn_test

import (
	"math"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nn"
)

func TestNewUNetRejectsBadPatch(t *testing.T) {
	m, err := nn.NewUNet(newDev(), model([]int{2, 4, 8}, nil), 0)
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
	m, err := nn.NewUNet(newDev(), config.Default().Model, 0)
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
	sched := func(name string) config.Schedule {
		s := config.Default().Optim.Schedule
		s.Name = name
		return s
	}
	poly := sched("poly")
	for _, c := range []struct{ step, total int }{{0, 1000}, {500, 1000}, {999, 1000}, {1000, 1000}} {
		want := 0.01 * math.Pow(1-float64(c.step)/float64(c.total), 0.9)
		if got := nn.LearningRate(poly, 0.01, c.step, c.total); !near(got, want) {
			t.Errorf("poly step %d: %v, want %v", c.step, got, want)
		}
	}
	// torch.optim.lr_scheduler.OneCycleLR(max_lr=0.1, total_steps=20, cycle_momentum=False).
	torchOneCycle := []float64{0.004, 0.01316718427, 0.03716718427, 0.06683281573, 0.09083281573, 0.1, 0.098746400624,
		0.095048463201, 0.089091617757, 0.081174565395, 0.071694300179, 0.061126202194, 0.0500002, 0.038874197806,
		0.028306099821, 0.018825834605, 0.010908782243, 0.004951936799, 0.001253999376, 4e-07}
	oc := sched("onecycle")
	for i, want := range torchOneCycle {
		if got := nn.LearningRate(oc, 0.1, i, 20); math.Abs(got-want) > 1e-11 {
			t.Errorf("onecycle step %d: %v, PyTorch %v", i, got, want)
		}
	}
	cos := sched("cosine")
	cos.WarmupSteps, cos.MinLR = 10, 1e-4
	for _, c := range []struct {
		step int
		want float64
	}{{0, 0}, {5, 0.005}, {10, 0.01}, {55, 1e-4 + (0.01-1e-4)*0.5}, {100, 1e-4}} {
		if got := nn.LearningRate(cos, 0.01, c.step, 100); !near(got, c.want) {
			t.Errorf("cosine step %d: %v, want %v", c.step, got, c.want)
		}
	}
	if got := nn.LearningRate(sched("constant"), 0.3, 50, 100); got != 0.3 {
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
