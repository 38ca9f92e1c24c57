//go:build cgo

package core_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/gpu/internal/devcheck"
	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels/emu"
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
		{"Add into a bf16 dst", "gpu.Add: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.Add(a, f) }},
		{"Scale", "gpu.Scale: tensor (1, 2, 2, 2, 3) is bfloat16", func() { dev.Scale(a, 2) }},
		{"NDHWCToNCDHW", "gpu.NDHWCToNCDHW: tensor", func() { dev.NDHWCToNCDHW(a, dev.Alloc(nn.Shape{1, 3, 2, 2, 2})) }},
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
	castsOnlyInConvs(t, dev.be)
}

// castsOnlyInConvs fails t when any op but the convolutions launched a
// float32 ↔ bf16 conversion: in a bf16-activation U-Net step, the norm,
// activation, bias and concat ops read and write the bf16 activations
// directly. (The convolutions still convert the weights and the float32
// gradients where their GEMMs or cuDNN take bf16, and widen bf16 results
// into float32 gradients.)
func castsOnlyInConvs(t *testing.T, be *emuBackend) {
	t.Helper()
	var names []string
	for k := range be.casts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("%5d launches: %s", be.casts[k], k)
		if !strings.HasPrefix(k, "Conv3D") {
			t.Errorf("%s launched %d times: the op widens or rounds activations outside the convolutions", k, be.casts[k])
		}
	}
	if len(names) == 0 {
		t.Error("no conversions counted at all: the bf16 step converted no weights, so the count is broken")
	}
}

// TestBF16ActivationsDirectKernels: the activation ops with every
// activation operand bf16, as nn passes them, run the _bf16 kernels and
// convert nothing; a float32 operand among bf16 ones still goes through
// float32 copies.
func TestBF16ActivationsDirectKernels(t *testing.T) {
	dev := newEmuDevice(bf16ActOptions(0))
	shape := nn.Shape{1, 2, 3, 4, 5}
	act := func(c int) nn.Tensor { return dev.AllocActivation(nn.Shape{1, 2, 3, 4, c}) }
	x, y := act(5), act(5)
	f, dy := dev.Alloc(shape), dev.Alloc(shape)
	gamma, beta, bias := dev.Alloc(nn.Shape{5}), dev.Alloc(nn.Shape{5}), dev.Alloc(nn.Shape{5})
	dg, db := dev.Alloc(nn.Shape{5}), dev.Alloc(nn.Shape{5})
	stats := dev.Alloc(nn.Shape{1, 5, 2})
	for i, p := range []nn.Tensor{x, y, f, dy, gamma, beta, bias, stats} {
		v := make([]float32, p.Shape().Len())
		for j := range v {
			v[j] = float32((i+j)%7) - 2.5
		}
		if err := dev.Upload(dev.ComputeStream(), p, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		run     func()
		kernels []string // launched at least once
		casts   int      // f32_to_bf16 + bf16_to_f32 launches
	}{
		{"InstanceNormActForward bf16 → bf16", func() { dev.InstanceNormActForward(x, gamma, beta, y, stats, 1e-5, 0.01) },
			[]string{"instnorm_fwd_partial_bf16", "instnorm_fwd_apply_bf16"}, 0},
		{"InstanceNormActForward in place", func() { dev.InstanceNormActForward(y, gamma, beta, y, stats, 1e-5, 0.01) },
			[]string{"instnorm_fwd_partial_bf16", "instnorm_fwd_apply_bf16"}, 0},
		{"InstanceNormActBackward bf16 x", func() { dev.InstanceNormActBackward(x, gamma, beta, stats, dy, dy, dg, db, 0.01) },
			[]string{"instnorm_bwd_partial_bf16", "instnorm_bwd_apply_bf16"}, 0},
		{"ConcatChannels bf16", func() { dev.ConcatChannels(act(2), act(3), act(5)) }, []string{"concat_channels_bf16"}, 0},
		{"AddChannelBias bf16", func() { dev.AddChannelBias(x, bias) }, []string{"add_channel_bias_bf16"}, 0},
		{"ActForward bf16 in place", func() { dev.ActForward(x, x, 0.01) }, []string{"act_forward_bf16"}, 0},
		{"ActBackward bf16 y", func() { dev.ActBackward(x, dy, dy, 0.01) }, []string{"act_backward_bf16"}, 0},
		// Mixes keep the widen path.
		{"InstanceNormActForward bf16 → float32", func() { dev.InstanceNormActForward(x, gamma, beta, f, stats, 1e-5, 0.01) },
			[]string{"instnorm_fwd_partial", "instnorm_fwd_apply"}, 1},
		{"ConcatChannels bf16 + float32 → bf16", func() { dev.ConcatChannels(act(2), dev.Alloc(nn.Shape{1, 2, 3, 4, 3}), act(5)) },
			[]string{"concat_channels"}, 2},
		{"ActForward float32 → bf16", func() { dev.ActForward(f, y, 0.01) }, []string{"act_forward"}, 1},
	} {
		before := dev.be.l.Launched()
		tc.run()
		after := dev.be.l.Launched()
		if got := after["f32_to_bf16"] + after["bf16_to_f32"] - before["f32_to_bf16"] - before["bf16_to_f32"]; got != tc.casts {
			t.Errorf("%s: %d conversion launches, want %d", tc.name, got, tc.casts)
		}
		for _, k := range tc.kernels {
			if after[k] == before[k] {
				t.Errorf("%s: %s not launched", tc.name, k)
			}
		}
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
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
	// Two levels (so no deep supervision, which needs three) have every
	// kind of activation — block, conv and transposed-conv outputs, a
	// concat — in two thirds of the emulated time of three.
	sc.Model = devcheck.Model([]int{4, 8}, 3, false)
	w, n := stepMemory(t, sc, core.Options{Chunk: 37, ConvWorkspace: 64 << 10, BF16: true}), stepMemory(t, sc, bf16ActOptions(64<<10))
	wide, wsWide, narrow, wsNarrow := w.tensors, w.workspace, n.tensors, n.workspace
	t.Logf("peak tensor memory of a step: %d bytes with float32 activations, %d with bf16 (%.0f %%); workspace %d → %d bytes",
		wide, narrow, 100*float64(narrow)/float64(wide), wsWide, wsNarrow)
	if !(wsNarrow < wsWide) || wide-narrow < wsWide-wsNarrow {
		t.Errorf("peak tensor memory %d bytes with bf16 activations, %d without: want a saving of at least the workspace's %d − %d bytes", narrow, wide, wsWide, wsNarrow)
	}
}

// stepMemory is what one training step of sc takes on an emulated device
// with options o: the peak of its tensors (MemoryInUse), of everything it
// allocated (PeakAllocated), and the workspace's bytes.
type stepMem struct{ tensors, all, workspace int64 }

func stepMemory(t *testing.T, sc devcheck.StepCase, o core.Options) stepMem {
	t.Helper()
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
	return stepMem{p, dev.PeakAllocated(), ws}
}

// bf16ActDNNDevice is dnnDevice in bf16 with bf16 activations.
func bf16ActDNNDevice() (*emuDevice, *fakeDNN) {
	dev := newEmuDevice(core.Options{BF16: true, BF16Activations: true, ConvWorkspace: 4 << 10,
		Name: "emulated CUDA device, fake cuDNN, bf16, bf16 activations"})
	f := newFakeDNN()
	dev.UseDNN(dnn.New[*emu.Buffer](f, dnn.Options{}), dnn.BF16)
	return dev, f
}

// TestBF16ActivationsDNNUnderEmulation: through the fake cuDNN, the
// activation ops with bf16 operands match the CPU, cuDNN computed every
// convolution, and it read and wrote bf16 activations as they are: a
// forward from one bf16 activation into another converts only the
// weights.
func TestBF16ActivationsDNNUnderEmulation(t *testing.T) {
	dev, f := bf16ActDNNDevice()
	devcheck.Ops(t, dev, devcheck.Options{Seed: 8, Tol: devcheck.BF16, Only: []string{"BF16Activations"}})
	if dev.be.gemms != 0 {
		t.Errorf("%d GEMMs issued: some convolution did not go to cuDNN", dev.be.gemms)
	}
	g := geom.Conv{N: 1, InD: 4, InH: 5, InW: 6, InC: 3, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	x, y := dev.AllocActivation(g.InShape()), dev.AllocActivation(g.OutShape())
	w := dev.Alloc(g.WeightShape())
	before := dev.be.l.Launched()
	runs := f.runs[4]
	dev.Conv3DForward(g, x, w, nil, y)
	after := dev.be.l.Launched()
	if got := after["f32_to_bf16"] - before["f32_to_bf16"]; got != 1 {
		t.Errorf("%d f32_to_bf16 launches for a bf16 → bf16 forward, want 1 (the weights)", got)
	}
	if got := after["bf16_to_f32"] - before["bf16_to_f32"]; got != 0 {
		t.Errorf("%d bf16_to_f32 launches for a bf16 → bf16 forward, want none", got)
	}
	if f.runs[4] != runs+1 {
		t.Errorf("cuDNN runs %d → %d, want one more", runs, f.runs[4])
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestUNetStepBF16ActivationsDNNUnderEmulation is
// TestUNetStepBF16ActivationsUnderEmulation with every convolution
// through the fake cuDNN.
func TestUNetStepBF16ActivationsDNNUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev, f := bf16ActDNNDevice()
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
	if dev.be.gemms != 0 || f.runs[4] == 0 {
		t.Errorf("%d GEMMs, cuDNN runs %v: the step's convolutions did not all go to cuDNN", dev.be.gemms, f.runs)
	}
	castsOnlyInConvs(t, dev.be)
}

// TestBF16ActivationsOwnConvReadsBF16: the own bf16 convolutions use a
// bf16 activation as a GEMM operand as it is where the matrix is the
// tensor itself — a 1×1×1 convolution's input, the transposed
// convolution's input (backward-data's dy) — and round a bf16 output
// once per tile: nothing is widened.
func TestBF16ActivationsOwnConvReadsBF16(t *testing.T) {
	dev := newEmuDevice(bf16ActOptions(0)) // one tile
	head := geom.Conv{N: 1, InD: 4, InH: 5, InW: 6, InC: 8, OutC: 3, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}
	up := geom.Conv{N: 1, InD: 4, InH: 6, InW: 6, InC: 4, OutC: 8, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}
	for _, tc := range []struct {
		name string
		run  func()
		f2h  int // f32_to_bf16 launches: the weights, then each output tile
	}{
		{"1x1x1 forward bf16 → bf16", func() {
			dev.Conv3DForward(head, dev.AllocActivation(head.InShape()), dev.Alloc(head.WeightShape()), dev.Alloc(nn.Shape{3}), dev.AllocActivation(head.OutShape()))
		}, 2},
		{"1x1x1 forward bf16 → float32", func() {
			dev.Conv3DForward(head, dev.AllocActivation(head.InShape()), dev.Alloc(head.WeightShape()), nil, dev.Alloc(head.OutShape()))
		}, 1},
		{"1x1x1 backward-weight bf16 x", func() {
			dev.Conv3DBackwardWeight(head, dev.AllocActivation(head.InShape()), dev.Alloc(head.OutShape()), dev.Alloc(head.WeightShape()), nil)
		}, 1}, // dy's tile
		{"transposed conv's forward bf16 dy", func() {
			dev.Conv3DBackwardData(up, dev.AllocActivation(up.OutShape()), dev.Alloc(up.WeightShape()), dev.Alloc(up.InShape()))
		}, 1},
	} {
		before := dev.be.l.Launched()
		tc.run()
		after := dev.be.l.Launched()
		if got := after["f32_to_bf16"] - before["f32_to_bf16"]; got != tc.f2h {
			t.Errorf("%s: %d f32_to_bf16 launches, want %d", tc.name, got, tc.f2h)
		}
		if got := after["bf16_to_f32"] - before["bf16_to_f32"]; got != 0 {
			t.Errorf("%s: %d bf16_to_f32 launches, want none", tc.name, got)
		}
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
}
