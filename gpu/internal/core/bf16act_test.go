//go:build cgo

package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/gpu/internal/devcheck"
	"github.com/voxtrain/voxtrain/nn"
)

// bf16ActOptions are the emulated device's options in bf16 mode with bf16
// activation storage.
func bf16ActOptions(ws int) core.Options {
	return core.Options{Chunk: 37, ConvWorkspace: ws, BF16: true, BF16Activations: true,
		Name: fmt.Sprintf("emulated CUDA device (bf16, bf16 activations, workspace %d)", ws)}
}

// TestBF16ActivationsUnderEmulation runs every op nn applies to
// activations with bf16 operands against the CPU's float32 ops on the
// same values, with many-tile and one-tile convolutions.
func TestBF16ActivationsUnderEmulation(t *testing.T) {
	for _, ws := range []int{4 << 10, 0} {
		dev := newEmuDevice(bf16ActOptions(ws))
		devcheck.Ops(t, dev, devcheck.Options{Seed: 6, Tol: devcheck.BF16, Only: []string{"BF16Activations"}})
	}
}

// TestActivationBytes: bf16 activations only with both options; without
// them AllocActivation is Alloc.
func TestActivationBytes(t *testing.T) {
	for _, tc := range []struct {
		o    core.Options
		want int
	}{
		{core.Options{}, 4},
		{core.Options{BF16Activations: true}, 4},
		{core.Options{BF16: true}, 4},
		{core.Options{BF16: true, BF16Activations: true}, 2},
	} {
		dev := newEmuDevice(tc.o)
		if got := dev.ActivationBytes(); got != tc.want {
			t.Errorf("%+v: ActivationBytes %d, want %d", tc.o, got, tc.want)
		}
		x := dev.AllocActivation(nn.Shape{3, 5})
		if got := dev.Tensor(x).BF16(); got != (tc.want == 2) {
			t.Errorf("%+v: AllocActivation gave a bf16 tensor: %v", tc.o, got)
		}
		if cur, _ := dev.MemoryInUse(); cur != int64(15*tc.want) {
			t.Errorf("%+v: MemoryInUse %d for 15 elements, want %d", tc.o, cur, 15*tc.want)
		}
		dev.Free(x)
		if cur, _ := dev.MemoryInUse(); cur != 0 {
			t.Errorf("%+v: MemoryInUse %d after Free", tc.o, cur)
		}
	}
}

// TestBF16OperandMisuse: an op given a bf16 tensor where it takes float32
// panics naming the op.
func TestBF16OperandMisuse(t *testing.T) {
	dev := newEmuDevice(bf16ActOptions(0))
	a := dev.AllocActivation(nn.Shape{1, 2, 2, 2, 3})
	f := dev.Alloc(nn.Shape{1, 2, 2, 2, 3})
	lab := dev.Alloc(nn.Shape{1, 2, 2, 2})
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"Add", "gpu.Add: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.Add(f, a) }},
		{"Softmax", "gpu.Softmax: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.Softmax(a, f) }},
		{"SoftmaxLoss", "gpu.SoftmaxLoss: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.SoftmaxLoss(a, lab, f) }},
		{"ActBackward dy", "gpu.ActBackward: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.ActBackward(f, a, f, 0.01) }},
		{"SplitChannels", "gpu.SplitChannels: tensor", func() {
			dev.SplitChannels(a, dev.Alloc(nn.Shape{1, 2, 2, 2, 1}), dev.Alloc(nn.Shape{1, 2, 2, 2, 2}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				s, _ := r.(string)
				if r == nil || !strings.Contains(s, tc.want) {
					t.Errorf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

// TestUNetStepBF16ActivationsUnderEmulation is TestUNetStepBF16UnderEmulation
// with bf16 activation storage: the step against the CPU's float32 one
// within bf16 tolerances.
func TestUNetStepBF16ActivationsUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(bf16ActOptions(64 << 10))
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
}

// TestBF16ActivationsHalveStepMemory: the peak tensor memory of a
// training step (MemoryInUse: weights, workspace, batch, loss buffers)
// falls with bf16 activations against bf16 mode with float32 ones, by
// at least what the workspace saves (WorkspaceBytes): nothing else
// allocates more. (This small U-Net's weights and optimiser state are a
// large share of its peak; at nnU-Net's sizes the workspace dominates.)
func TestBF16ActivationsHalveStepMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	sc := emuStepCase("sgd")
	peak := func(o core.Options) (peak, workspace int64) {
		dev := newEmuDevice(o)
		m, err := nn.NewUNet(dev, sc.Model, sc.Seed)
		if err != nil {
			t.Fatal(err)
		}
		l, err := nn.NewLearner(m, sc.Batch, sc.Patch, sc.Loss, sc.Optim)
		if err != nil {
			t.Fatal(err)
		}
		cfg := m.Config()
		xs, ys := devcheck.Batch(sc.Seed, sc.Batch, cfg.InChannels, cfg.NumClasses, sc.Patch)
		x, y := dev.Alloc(l.WS.InputShape()), dev.Alloc(l.WS.LabelShape())
		if err := dev.Upload(dev.ComputeStream(), x, xs); err != nil {
			t.Fatal(err)
		}
		if err := dev.Upload(dev.ComputeStream(), y, ys); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Step(x, y, 0.01); err != nil {
			t.Fatal(err)
		}
		if err := dev.Err(); err != nil {
			t.Fatal(err)
		}
		ws, err := m.WorkspaceBytes(sc.Batch, sc.Patch, true)
		if err != nil {
			t.Fatal(err)
		}
		_, p := dev.MemoryInUse()
		return p, ws
	}
	wide, wsWide := peak(core.Options{Chunk: 37, ConvWorkspace: 64 << 10, BF16: true})
	narrow, wsNarrow := peak(bf16ActOptions(64 << 10))
	t.Logf("peak tensor memory of a step: %d bytes with float32 activations, %d with bf16 (%.0f %%); workspace %d → %d bytes",
		wide, narrow, 100*float64(narrow)/float64(wide), wsWide, wsNarrow)
	if !(wsNarrow < wsWide) || wide-narrow < wsWide-wsNarrow {
		t.Errorf("peak tensor memory %d bytes with bf16 activations, %d without: want a saving of at least the workspace's %d − %d bytes", narrow, wide, wsWide, wsNarrow)
	}
}
