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

// bf16GradOptions are bf16ActOptions with bf16 activation gradients too.
func bf16GradOptions(ws int) core.Options {
	o := bf16ActOptions(ws)
	o.BF16Gradients = true
	o.Name = fmt.Sprintf("emulated CUDA device (bf16, bf16 activations and gradients, workspace %d)", ws)
	return o
}

// TestBF16GradientsUnderEmulation runs every op nn applies to activations
// and to their gradients with bf16 operands against the CPU's float32 ops
// on the same values, with many-tile and one-tile convolutions.
func TestBF16GradientsUnderEmulation(t *testing.T) {
	for _, ws := range []int{4 << 10, 0} {
		dev := newEmuDevice(bf16GradOptions(ws))
		devcheck.Ops(t, dev, devcheck.Options{Seed: 7, Tol: devcheck.BF16, Only: []string{"BF16Activations", "BF16Gradients"}})
	}
}

// TestActivationGradientBytes: bf16 activation gradients only with all
// three options; otherwise AllocActivationGradient is Alloc.
func TestActivationGradientBytes(t *testing.T) {
	for _, tc := range []struct {
		o    core.Options
		want int
	}{
		{core.Options{BF16Gradients: true}, 4},
		{core.Options{BF16: true, BF16Gradients: true}, 4},
		{core.Options{BF16: true, BF16Activations: true}, 4},
		{core.Options{BF16Activations: true, BF16Gradients: true}, 4},
		{core.Options{BF16: true, BF16Activations: true, BF16Gradients: true}, 2},
	} {
		dev := newEmuDevice(tc.o)
		if got := dev.ActivationGradientBytes(); got != tc.want {
			t.Errorf("%+v: ActivationGradientBytes %d, want %d", tc.o, got, tc.want)
		}
		g := dev.AllocActivationGradient(nn.Shape{3, 5})
		if got := dev.Tensor(g).BF16(); got != (tc.want == 2) {
			t.Errorf("%+v: AllocActivationGradient gave a bf16 tensor: %v", tc.o, got)
		}
		if cur, _ := dev.MemoryInUse(); cur != int64(15*tc.want) {
			t.Errorf("%+v: MemoryInUse %d for 15 elements, want %d", tc.o, cur, 15*tc.want)
		}
		dev.Free(g)
	}
}

// TestBF16GradientsDirectKernels: each op nn applies to bf16 activation
// gradients, with its operands as nn passes them, runs bf16 kernels and
// converts nothing but a convolution's weights (and its bf16 output, a
// float32 tile at a time); the own convolutions with larger kernels too
// (vol2col_bf16x, col2vol_bf16). A float32 operand among bf16 ones still
// goes through float32 copies.
func TestBF16GradientsDirectKernels(t *testing.T) {
	dev := newEmuDevice(bf16GradOptions(0)) // one-tile convolutions …
	tiles := newEmuDevice(bf16GradOptions(4 << 10))
	shape := nn.Shape{1, 2, 3, 4, 5}
	act := func(d *emuDevice, s nn.Shape) nn.Tensor { return d.AllocActivation(s) }
	grad := func(d *emuDevice, s nn.Shape) nn.Tensor { return d.AllocActivationGradient(s) }
	x, dy := act(dev, shape), grad(dev, shape)
	f := dev.Alloc(shape)
	gamma, beta := dev.Alloc(nn.Shape{5}), dev.Alloc(nn.Shape{5})
	dg, db := dev.Alloc(nn.Shape{5}), dev.Alloc(nn.Shape{5})
	stats := dev.Alloc(nn.Shape{1, 5, 2})
	for i, p := range []nn.Tensor{x, dy, f, gamma, beta, stats} {
		v := make([]float32, p.Shape().Len())
		for j := range v {
			v[j] = float32((i+j)%7) - 2.5
		}
		if err := dev.Upload(dev.ComputeStream(), p, v); err != nil {
			t.Fatal(err)
		}
	}
	conv := geom.Conv{N: 1, InD: 4, InH: 5, InW: 6, InC: 8, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	up := geom.Conv{N: 1, InD: 4, InH: 6, InW: 6, InC: 4, OutC: 8, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}
	for _, tc := range []struct {
		name    string
		d       *emuDevice
		run     func(d *emuDevice)
		kernels []string // launched at least once
		f2h     int      // f32_to_bf16 launches
		h2f     int      // bf16_to_f32 launches
	}{
		{"Add bf16 += bf16", dev, func(d *emuDevice) { d.Add(dy, grad(d, shape)) }, []string{"add_bf16"}, 0, 0},
		{"SplitChannels bf16", dev, func(d *emuDevice) {
			d.SplitChannels(grad(d, shape), grad(d, nn.Shape{1, 2, 3, 4, 2}), grad(d, nn.Shape{1, 2, 3, 4, 3}))
		}, []string{"split_channels_bf16"}, 0, 0},
		{"ChannelSum bf16", dev, func(d *emuDevice) { d.ChannelSum(dy, db) }, []string{"channel_sum_partial_bf16"}, 0, 0},
		{"InstanceNormActBackward bf16 x, dy, dx in place", dev, func(d *emuDevice) {
			d.InstanceNormActBackward(x, gamma, beta, stats, dy, dy, dg, db, 0.01)
		}, []string{"instnorm_bwd_partial_bf16g", "instnorm_bwd_apply_bf16g"}, 0, 0},
		{"ActBackward bf16 y, dy, dx in place", dev, func(d *emuDevice) { d.ActBackward(x, dy, dy, 0.01) }, []string{"act_backward_bf16g"}, 0, 0},
		// … and many tiles.
		{"3x3x3 backward-weight, bf16 x and dy, bias", tiles, func(d *emuDevice) {
			d.Conv3DBackwardWeight(conv, act(d, conv.InShape()), grad(d, conv.OutShape()), d.Alloc(conv.WeightShape()), d.Alloc(nn.Shape{conv.OutC}))
		}, []string{"vol2col_bf16x", "channel_sum_partial_bf16"}, 0, 0},
		{"3x3x3 backward-data bf16 → bf16", tiles, func(d *emuDevice) {
			d.Conv3DBackwardData(conv, grad(d, conv.OutShape()), d.Alloc(conv.WeightShape()), grad(d, conv.InShape()))
		}, []string{"col2vol_bf16"}, 1, 0}, // the weights
		{"3x3x3 forward bf16 → bf16", dev, func(d *emuDevice) {
			d.Conv3DForward(conv, act(d, conv.InShape()), d.Alloc(conv.WeightShape()), nil, act(d, conv.OutShape()))
		}, []string{"vol2col_bf16x"}, 2, 0}, // the weights, the output's one tile
		{"transposed conv's backward: forward bf16 dy → bf16 dx", dev, func(d *emuDevice) {
			d.Conv3DForward(up, grad(d, up.InShape()), d.Alloc(up.WeightShape()), nil, grad(d, up.OutShape()))
		}, []string{"vol2col_bf16x"}, 2, 0},
		// Mixes nn does not pass keep the widen path.
		{"ActBackward bf16 y, float32 dy → bf16 dx", dev, func(d *emuDevice) { d.ActBackward(x, f, grad(d, shape), 0.01) }, []string{"act_backward_bf16"}, 1, 0},
		{"SplitChannels bf16 → float32", dev, func(d *emuDevice) {
			d.SplitChannels(grad(d, shape), d.Alloc(nn.Shape{1, 2, 3, 4, 2}), d.Alloc(nn.Shape{1, 2, 3, 4, 3}))
		}, []string{"split_channels"}, 0, 1},
	} {
		before := tc.d.be.l.Launched()
		tc.run(tc.d)
		after := tc.d.be.l.Launched()
		if got := after["f32_to_bf16"] - before["f32_to_bf16"]; got != tc.f2h {
			t.Errorf("%s: %d f32_to_bf16 launches, want %d", tc.name, got, tc.f2h)
		}
		if got := after["bf16_to_f32"] - before["bf16_to_f32"]; got != tc.h2f {
			t.Errorf("%s: %d bf16_to_f32 launches, want %d", tc.name, got, tc.h2f)
		}
		for _, k := range tc.kernels {
			if after[k] == before[k] {
				t.Errorf("%s: %s not launched", tc.name, k)
			}
		}
	}
	for _, d := range []*emuDevice{dev, tiles} {
		if err := d.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResidualUNetStepBF16UnderEmulation: the residual-encoder step with
// bf16 activations and activation gradients (the bf16 mode's default)
// against the CPU's float32 step, within bf16 tolerances, and nothing
// widened: the average pools, their adjoints and the blocks' sums run on
// bf16 directly.
func TestResidualUNetStepBF16UnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(bf16GradOptions(64 << 10))
	devcheck.UNetStep(t, dev, residualStepCase(), devcheck.BF16)
	castsOnly(t, dev.be, func(op, kernel string) bool {
		return kernel == "f32_to_bf16" && strings.HasPrefix(op, "Conv3D")
	})
}

// TestUNetStepBF16GradientsUnderEmulation: the U-Net step with bf16
// activations and activation gradients against the CPU's float32 step
// within bf16 tolerances, and nothing widened: no bf16 → float32
// conversion at all, float32 → bf16 only inside the convolutions (the
// weights, the loss gradients, bf16 outputs a float32 tile at a time).
func TestUNetStepBF16GradientsUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(bf16GradOptions(64 << 10))
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
	castsOnly(t, dev.be, func(op, kernel string) bool {
		return kernel == "f32_to_bf16" && strings.HasPrefix(op, "Conv3D")
	})
}

// castsOnly fails t when a float32 ↔ bf16 conversion was launched by an
// op and kernel allowed does not admit, logging every conversion by op.
func castsOnly(t *testing.T, be *emuBackend, allowed func(op, kernel string) bool) {
	t.Helper()
	var names []string
	for k := range be.casts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("%5d launches: %s", be.casts[k], k)
		op, kernel, _ := strings.Cut(k, " ")
		if !allowed(op, kernel) {
			t.Errorf("%s launched %d times: the op widens or rounds where a bf16 path should read and write bf16 as it is", k, be.casts[k])
		}
	}
	if len(names) == 0 {
		t.Error("no conversions counted at all: the bf16 step converted no weights, so the count is broken")
	}
}

// bf16GradDNNDevice is bf16ActDNNDevice with bf16 activation gradients.
func bf16GradDNNDevice() (*emuDevice, *fakeDNN) {
	o := bf16GradOptions(4 << 10)
	o.Chunk = 0
	o.Name = "emulated CUDA device, fake cuDNN, bf16, bf16 activations and gradients"
	dev := newEmuDevice(o)
	f := newFakeDNN()
	dev.UseDNN(dnn.New[*emu.Buffer](f, dnn.Options{}), dnn.BF16)
	return dev, f
}

// TestBF16GradientsDNNUnderEmulation: through the fake cuDNN, the ops on
// bf16 activations and gradients match the CPU and cuDNN computed every
// convolution.
func TestBF16GradientsDNNUnderEmulation(t *testing.T) {
	dev, _ := bf16GradDNNDevice()
	devcheck.Ops(t, dev, devcheck.Options{Seed: 9, Tol: devcheck.BF16, Only: []string{"BF16Gradients"}})
	if dev.be.gemms != 0 {
		t.Errorf("%d GEMMs issued: some convolution did not go to cuDNN", dev.be.gemms)
	}
}

// TestUNetStepBF16GradientsDNNUnderEmulation is
// TestUNetStepBF16GradientsUnderEmulation with every convolution through
// the fake cuDNN: it reads and writes bf16 activations and gradients as
// they are, so the only conversions are float32 operands rounded on the
// way in (weights, input image, loss gradients) and float32 results
// widened on the way out (logits, weight gradients) — no backward-data
// widens into a float32 gradient any more.
func TestUNetStepBF16GradientsDNNUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev, f := bf16GradDNNDevice()
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
	if dev.be.gemms != 0 || f.runs[4] == 0 {
		t.Errorf("%d GEMMs, cuDNN runs %v: the step's convolutions did not all go to cuDNN", dev.be.gemms, f.runs)
	}
	castsOnly(t, dev.be, func(op, kernel string) bool {
		switch kernel {
		case "f32_to_bf16":
			return strings.HasPrefix(op, "Conv3D")
		case "bf16_to_f32":
			return op == "Conv3DForward" || op == "Conv3DBackwardWeight"
		}
		return false
	})
}

// TestBF16GradientsCutStepMemory: the peak tensor memory of a training
// step falls with bf16 activation gradients against bf16 activations
// alone by at least what the workspace saves (WorkspaceBytes), and so
// does the peak of everything the device allocates (PeakAllocated:
// tensors and the ops' buffers) — bf16 gradients need no float32 copies.
func TestBF16GradientsCutStepMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	sc := emuStepCase("sgd")
	// Two levels have every kind of activation gradient (a block's, a
	// concat's, the skip's); a patch whose tensors are whole multiples of
	// the allocator's 512-byte blocks makes PeakAllocated's block
	// rounding save what the tensors save.
	sc.Model = devcheck.Model([]int{4, 8}, 3, false)
	sc.Patch = [3]int{8, 16, 16}
	// One-tile convolutions: a bf16 backward-data's carry between tiles
	// (a few input planes of float32, small beside nnU-Net's tensors) is
	// none, so the buffers compare alike.
	act := stepMemory(t, sc, bf16ActOptions(0))
	grad := stepMemory(t, sc, bf16GradOptions(0))
	t.Logf("bf16 activations: peak tensors %d bytes, everything %d, workspace %d; with bf16 gradients too: %d, %d, %d",
		act.tensors, act.all, act.workspace, grad.tensors, grad.all, grad.workspace)
	saved := act.workspace - grad.workspace
	if saved <= 0 {
		t.Fatalf("workspace %d bytes with bf16 gradients, %d without: no saving", grad.workspace, act.workspace)
	}
	if act.tensors-grad.tensors < saved {
		t.Errorf("peak tensor memory %d bytes with bf16 gradients, %d without: want a saving of at least the workspace's %d bytes", grad.tensors, act.tensors, saved)
	}
	if act.all-grad.all < saved {
		t.Errorf("peak of everything allocated %d bytes with bf16 gradients, %d without: want a saving of at least the workspace's %d bytes", grad.all, act.all, saved)
	}
}
