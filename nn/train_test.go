package nn_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// syntheticBatch returns an image whose intensity marks a box and labels
// with the box as class 1.
func syntheticBatch(rng *rand.Rand, n int, size [3]int) (x, y []float32) {
	v := size[0] * size[1] * size[2]
	x, y = make([]float32, n*v), make([]float32, n*v)
	for b := 0; b < n; b++ {
		lo := [3]int{rng.IntN(size[0] / 2), rng.IntN(size[1] / 2), rng.IntN(size[2] / 2)}
		for i := 0; i < v; i++ {
			d, h, w := i/(size[1]*size[2]), i/size[2]%size[1], i%size[2]
			in := d >= lo[0] && d < lo[0]+size[0]/3 && h >= lo[1] && h < lo[1]+size[1]/3 && w >= lo[2] && w < lo[2]+size[2]/3
			x[b*v+i] = float32(rng.NormFloat64())
			if in {
				x[b*v+i] += 1.5
				y[b*v+i] = 1
			}
		}
	}
	return x, y
}

// smallPatch is the patch the small U-Net of newSmallLearner trains on.
var smallPatch = [3]int{8, 12, 16}

// newSmallLearner builds the small deep-supervised U-Net (weights from seed)
// that the determinism and resume tests train, with a learner for batches of
// 2 × smallPatch.
func newSmallLearner(t *testing.T, dev nn.Device, optim config.Optim, seed uint64) (*nn.UNet, *nn.Learner) {
	t.Helper()
	m, err := nn.NewUNet(dev, model([]int{4, 8, 8}, func(m *config.Model) { m.DeepSupervision = true }), seed)
	if err != nil {
		t.Fatal(err)
	}
	l, err := nn.NewLearner(m, 2, smallPatch, config.Default().Loss, optim)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

// trainSteps trains newSmallLearner's U-Net for steps steps on fixed
// synthetic batches and returns its final weights and optimiser state.
func trainSteps(t *testing.T, dev nn.Device, optim config.Optim, steps int) (w, state []nn.HostTensor) {
	t.Helper()
	m, l := newSmallLearner(t, dev, optim, 42)
	size := smallPatch
	rng := rand.New(rand.NewPCG(7, 7))
	for s := 0; s < steps; s++ {
		xs, ys := syntheticBatch(rng, 2, size)
		x, y := upload(t, dev, l.WS.InputShape(), xs), upload(t, dev, l.WS.LabelShape(), ys)
		if _, err := l.Step(x, y, 0.01); err != nil {
			t.Fatal(err)
		}
		dev.Free(x)
		dev.Free(y)
	}
	w, err := nn.ExportParams(dev, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	state, err = l.Opt.State()
	if err != nil {
		t.Fatal(err)
	}
	return w, state
}

// TestTrainingIsDeterministicAcrossThreads: the same seed and data give
// bit-identical weights whatever the thread count and GOMAXPROCS.
func TestTrainingIsDeterministicAcrossThreads(t *testing.T) {
	sgd := config.Default().Optim
	ref, refState := trainSteps(t, cpu.New(cpu.Options{Threads: 1}), sgd, 3)
	for _, threads := range []int{2, 5} {
		w, st := trainSteps(t, cpu.New(cpu.Options{Threads: threads}), sgd, 3)
		testutil.SameBits(t, "weights", ref, w)
		testutil.SameBits(t, "momentum", refState, st)
	}
	old := runtime.GOMAXPROCS(1)
	w, _ := trainSteps(t, cpu.New(cpu.Options{}), sgd, 3)
	runtime.GOMAXPROCS(old)
	testutil.SameBits(t, "weights (GOMAXPROCS 1 vs Threads 1)", ref, w)
}

// TestExactResume: training 4 steps equals training 2, exporting weights
// and optimiser state, importing them into a fresh model, and training 2
// more.
func TestExactResume(t *testing.T) {
	for _, optim := range []config.Optim{optim("sgd", nil), optim("adamw", nil)} {
		dev := cpu.New(cpu.Options{})
		full, fullState := trainSteps(t, dev, optim, 4)

		m, l := newSmallLearner(t, dev, optim, 42)
		size := smallPatch
		rng := rand.New(rand.NewPCG(7, 7))
		batches := make([][2][]float32, 4)
		for s := range batches {
			batches[s][0], batches[s][1] = syntheticBatch(rng, 2, size)
		}
		for s := 0; s < 2; s++ {
			if _, err := l.Step(upload(t, dev, l.WS.InputShape(), batches[s][0]), upload(t, dev, l.WS.LabelShape(), batches[s][1]), 0.01); err != nil {
				t.Fatal(err)
			}
		}
		w, _ := nn.ExportParams(dev, m.Params())
		st, _ := l.Opt.State()
		steps := l.Opt.Steps()

		// Other initial weights, which the import must overwrite.
		m2, l2 := newSmallLearner(t, dev, optim, 999)
		if err := nn.ImportParams(dev, m2.Params(), w); err != nil {
			t.Fatal(err)
		}
		if err := l2.Opt.LoadState(st); err != nil {
			t.Fatal(err)
		}
		l2.Opt.SetSteps(steps)
		for s := 2; s < 4; s++ {
			if _, err := l2.Step(upload(t, dev, l.WS.InputShape(), batches[s][0]), upload(t, dev, l.WS.LabelShape(), batches[s][1]), 0.01); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := nn.ExportParams(dev, m2.Params())
		gotState, _ := l2.Opt.State()
		testutil.SameBits(t, optim.Name+" weights after resume", full, got)
		testutil.SameBits(t, optim.Name+" state after resume", fullState, gotState)

		if err := l2.Opt.LoadState(st[:len(st)-1]); err == nil {
			t.Errorf("%s: LoadState with a missing tensor did not fail", optim.Name)
		}
	}
}

// TestStepAllocatesNoDeviceMemory: after the learner is built, steps
// allocate no tensors, and the fast device matches the reference device.
func TestStepAllocatesNoDeviceMemory(t *testing.T) {
	dev := cpu.New(cpu.Options{})
	m, err := nn.NewUNet(dev, model([]int{4, 8}, nil), 1)
	if err != nil {
		t.Fatal(err)
	}
	size := [3]int{8, 8, 8}
	l, err := nn.NewLearner(m, 2, size, loss("cldice", func(l *config.Loss) { l.CEWeight = ptr(1.0) }), optim("adamw", nil))
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := syntheticBatch(rand.New(rand.NewPCG(1, 1)), 2, size)
	x, y := upload(t, dev, l.WS.InputShape(), xs), upload(t, dev, l.WS.LabelShape(), ys)
	if _, err := l.Step(x, y, 1e-3); err != nil {
		t.Fatal(err)
	}
	before, _ := dev.MemoryInUse()
	for i := 0; i < 3; i++ {
		if _, err := l.Step(x, y, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := dev.MemoryInUse(); after != before {
		t.Errorf("device memory grew from %d to %d bytes over 3 steps", before, after)
	}
	l.Free()
	m.Free()
	dev.Free(x)
	dev.Free(y)
	if cur, _ := dev.MemoryInUse(); cur != 0 {
		t.Errorf("%d bytes still allocated after freeing everything", cur)
	}
}

// TestFastMatchesReferenceDevice: one training step on the fast CPU kernels
// against the reference convolutions (float64 accumulation).
func TestFastMatchesReferenceDevice(t *testing.T) {
	run := func(dev nn.Device) ([]float32, []nn.HostTensor) {
		m, err := nn.NewUNet(dev, model([]int{8, 16, 16}, func(m *config.Model) { m.DeepSupervision = true }), 3)
		if err != nil {
			t.Fatal(err)
		}
		size := [3]int{12, 16, 16}
		l, err := nn.NewLearner(m, 2, size, config.Default().Loss, config.Default().Optim)
		if err != nil {
			t.Fatal(err)
		}
		xs, ys := syntheticBatch(rand.New(rand.NewPCG(1, 1)), 2, size)
		if _, err := l.Step(upload(t, dev, l.WS.InputShape(), xs), upload(t, dev, l.WS.LabelShape(), ys), 0.01); err != nil {
			t.Fatal(err)
		}
		g, _ := nn.ExportGrads(dev, m.Params())
		return download(t, dev, l.WS.Outputs()[0]), g
	}
	out, grads := run(cpu.New(cpu.Options{}))
	refOut, refGrads := run(cpu.New(cpu.Options{ReferenceConv: true}))
	if e := relErr(out, refOut); e > 1e-4 {
		t.Errorf("logits: relative error %.2e", e)
	}
	for i := range grads {
		// Pre-norm conv biases have rounding-noise gradients; skip them.
		if n := grads[i].Name; len(n) > 7 && n[len(n)-7:] == ".0.bias" && n[:2] != "up" && n[:2] != "ds" {
			continue
		}
		if e := relErr(grads[i].Data, refGrads[i].Data); e > 1e-3 {
			t.Errorf("gradient %s: relative error %.2e", grads[i].Name, e)
		}
	}
}
