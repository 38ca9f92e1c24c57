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

// TestOpsUnderEmulation runs package gpu's device logic — every nn.Device
// op as the CUDA device issues it: the same launch sequences, scratch
// sizes, vol2col tiles and GEMM arguments — over the emulated kernels and
// compares it with package cpu. Small reduction chunks (37 voxels) and a
// 4 KiB vol2col workspace force multi-chunk sums and many-tile
// convolutions; a second device with the default workspace checks the
// one-tile path.
func TestOpsUnderEmulation(t *testing.T) {
	dev := newEmuDevice(core.Options{Chunk: 37, FlatChunk: 1000, ConvWorkspace: 4 << 10})
	devcheck.Ops(t, dev, devcheck.Options{Seed: 1})
	if dev.be.gemms == 0 {
		t.Error("no GEMM was issued")
	}
	t.Run("one-tile convolutions", func(t *testing.T) {
		one := newEmuDevice(core.Options{Name: "emulated CUDA device (default workspace)"})
		devcheck.Ops(t, one, devcheck.Options{Seed: 2, Only: []string{"Conv3D"}})
	})
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestUNetStepUnderEmulation trains a small deep-supervised 3-class U-Net
// with clDice and AdamW for a step on the emulated device and on the CPU
// and compares loss, gradients and weights: nn driving the GPU device
// logic end to end, through the most ops (soft skeletons, one-hot, label
// downsampling, channel sums and affine adds, AdamW). The GPU suite runs
// this case and the reference U-Net with CE + Dice and SGD.
func TestUNetStepUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(core.Options{Chunk: 37, ConvWorkspace: 64 << 10})
	devcheck.UNetStep(t, dev, emuStepCase("adamw"), devcheck.FP32)
}

// TestResidualUNetStepUnderEmulation is TestUNetStepUnderEmulation with
// nnU-Net's residual encoder: every kind of skip (identity, average pool,
// pooled 1×1×1 projection), the stem, the in-place add and activation of
// each block's output.
func TestResidualUNetStepUnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(core.Options{Chunk: 37, ConvWorkspace: 64 << 10})
	devcheck.UNetStep(t, dev, residualStepCase(), devcheck.FP32)
}

// residualStepCase is the residual-encoder step of the emulation tests:
// levels 4-8-8 with 1, 2, 2 blocks (a pooled projection at level 1, a
// pooling-only skip at level 2), deep supervision, CE + Dice, SGD.
func residualStepCase() devcheck.StepCase {
	return devcheck.StepCase{
		Model: devcheck.ResidualModel([]int{4, 8, 8}, 3, true, []int{1, 2, 2}),
		Loss:  devcheck.Loss("dice_ce", false),
		Optim: devcheck.Optim("sgd"),
		Batch: 1, Patch: [3]int{8, 16, 16}, Seed: 5, Steps: 1,
	}
}

// emuStepCase is the step the emulated device trains in the U-Net step
// tests: a small deep-supervised 3-class U-Net with clDice (through the
// most ops) and the given optimiser, one step of 1×4×8×8.
func emuStepCase(optim string) devcheck.StepCase {
	return devcheck.StepCase{
		Model: devcheck.Model([]int{4, 8, 8}, 3, true),
		Loss:  devcheck.Loss("cldice", false),
		Optim: devcheck.Optim(optim),
		Batch: 1, Patch: [3]int{4, 8, 8}, Seed: 2, Steps: 1,
	}
}

// TestConvBF16UnderEmulation runs the convolution ops with bf16 GEMM
// operands (Options.BF16) against the CPU's float32 ones, in many tiles
// and in one, within bf16 tolerances.
func TestConvBF16UnderEmulation(t *testing.T) {
	for _, ws := range []int{4 << 10, 0} {
		dev := newEmuDevice(core.Options{BF16: true, ConvWorkspace: ws, Name: fmt.Sprintf("emulated CUDA device (bf16 GEMMs, workspace %d)", ws)})
		devcheck.Ops(t, dev, devcheck.Options{Seed: 4, Tol: devcheck.BF16, Only: []string{"Conv3D"}})
	}
}

// TestUNetStepBF16UnderEmulation is TestUNetStepUnderEmulation with bf16
// GEMM operands: the mixed-precision step against the CPU's float32 one.
// With SGD rather than AdamW: Adam's first step moves every weight by
// about ±lr whatever the gradient's size, so a small gradient entry whose
// sign bf16 rounding flips makes its weight differ by 2·lr — a property
// of Adam, not of the device (the optimiser kernels are compared exactly
// by TestOps).
func TestUNetStepBF16UnderEmulation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under emulation; skipped with -short")
	}
	dev := newEmuDevice(core.Options{Chunk: 37, ConvWorkspace: 64 << 10, BF16: true, Name: "emulated CUDA device (bf16 GEMMs)"})
	devcheck.UNetStep(t, dev, emuStepCase("sgd"), devcheck.BF16)
}

// TestCacheReusesBlocks: freed tensors' blocks are handed out again without
// new backend allocations, each Alloc zero-fills its block, MemoryInUse
// follows live tensors, and Close gives everything back. (Kernels are not
// run here: large fills are slow under emulation; see
// TestReusedBlocksAreZeroed.)
func TestCacheReusesBlocks(t *testing.T) {
	dev := newEmuDevice(core.Options{})
	dev.be.skipKernels = true
	shapes := []nn.Shape{{3, 5}, {1000}, {2, 300, 1000}} // small, medium, > 1 MiB
	var ts []nn.Tensor
	for _, s := range shapes {
		ts = append(ts, dev.Alloc(s))
	}
	cur, peak := dev.MemoryInUse()
	want := int64(4 * (15 + 1000 + 600000))
	if cur != want || peak != want {
		t.Fatalf("MemoryInUse = %d, %d; want %d, %d", cur, peak, want, want)
	}
	before := dev.be.mallocs
	for _, x := range ts {
		dev.Free(x)
	}
	if cur, _ := dev.MemoryInUse(); cur != 0 {
		t.Fatalf("MemoryInUse after Free = %d", cur)
	}
	for i := 0; i < 3; i++ {
		var again []nn.Tensor
		for _, s := range shapes {
			again = append(again, dev.Alloc(s))
		}
		for _, x := range again {
			dev.Free(x)
		}
	}
	if dev.be.mallocs != before {
		t.Errorf("%d backend allocations for reused sizes, want none", dev.be.mallocs-before)
	}
	if got := dev.be.l.Launched()["fill_f32"] + dev.be.skipped["fill_f32"]; got != 4*len(shapes) {
		t.Errorf("%d zero fills for %d allocations", got, 4*len(shapes))
	}
	if _, peak := dev.MemoryInUse(); peak != want {
		t.Errorf("peak = %d, want %d", peak, want)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if dev.be.live != 0 || dev.Reserved() != 0 {
		t.Errorf("after Close: %d backend blocks live, %d bytes reserved", dev.be.live, dev.Reserved())
	}
}

// TestReusedBlocksAreZeroed: a block that held data comes back zero-filled.
func TestReusedBlocksAreZeroed(t *testing.T) {
	dev := newEmuDevice(core.Options{})
	s := nn.Shape{2, 3, 50}
	x := dev.Alloc(s)
	dev.Fill(x, 7)
	dev.Free(x)
	y := dev.Alloc(s)
	if dev.be.mallocs != 1 {
		t.Fatalf("%d backend allocations, want 1 (the block reused)", dev.be.mallocs)
	}
	got := make([]float32, s.Len())
	if err := dev.Download(dev.ComputeStream(), got, y); err != nil {
		t.Fatal(err)
	}
	for j, v := range got {
		if v != 0 {
			t.Fatalf("reused tensor element %d = %v, want 0", j, v)
		}
	}
}

// TestOutOfMemory: when the backend has no memory the cache is released
// and the allocation retried; when that fails too, Alloc panics with an
// *OutOfMemoryError that says how much was asked for and held.
func TestOutOfMemory(t *testing.T) {
	dev := newEmuDevice(core.Options{})
	x := dev.Alloc(nn.Shape{1 << 18}) // 1 MiB
	dev.Free(x)
	dev.be.failMalloc = func(bytes int) bool {
		// Fail while the cached 1 MiB block is held, succeed once released
		// (called with the backend's lock held: read live directly).
		return dev.be.live > 0
	}
	y := dev.Alloc(nn.Shape{100}) // needs a new 512-byte block: retried after releasing the cache
	if dev.be.frees != 1 {
		t.Errorf("cache not released before the retry (%d frees)", dev.be.frees)
	}
	dev.Free(y)
	dev.be.failMalloc = func(int) bool { return true }
	defer func() {
		r := recover()
		oom, ok := r.(*core.OutOfMemoryError)
		if !ok {
			t.Fatalf("Alloc panicked with %v (%T), want *core.OutOfMemoryError", r, r)
		}
		msg := oom.Error()
		for _, s := range []string{"(7, 1000)", "0.0 MiB in tensors", "injected"} {
			if !strings.Contains(msg, s) {
				t.Errorf("error %q lacks %q", msg, s)
			}
		}
		t.Logf("out of memory: %v", oom)
	}()
	dev.Alloc(nn.Shape{7, 1000})
}

// TestBackendFailuresAreSticky: a failing launch does not panic; Err names
// the op and the kernel, and ops that return errors return it.
func TestBackendFailuresAreSticky(t *testing.T) {
	dev := newEmuDevice(core.Options{})
	x := dev.Alloc(nn.Shape{1, 2, 2, 2, 3})
	y := dev.Alloc(nn.Shape{1, 2, 2, 2})
	p := dev.Alloc(nn.Shape{1, 2, 2, 2, 3})
	dev.be.failLaunch = "softmax_fwd"
	_, err := dev.SoftmaxLoss(x, y, p)
	if err == nil || !strings.Contains(err.Error(), "softmax_fwd") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("SoftmaxLoss error %v, want one naming the failed kernel", err)
	}
	if dev.Err() == nil {
		t.Fatal("no sticky error")
	}
	dev.be.failLaunch = ""
	dev.Fill(x, 1) // later ops run; the first error stays
	if got := dev.Err(); got == nil || !strings.Contains(got.Error(), "softmax_fwd") {
		t.Errorf("Err() = %v after a later op, want the first error", got)
	}
	t.Logf("sticky error: %v", dev.Err())
}

// TestMisuse: foreign, freed and mis-shaped tensors panic with messages
// naming the op.
func TestMisuse(t *testing.T) {
	dev := newEmuDevice(core.Options{})
	x := dev.Alloc(nn.Shape{2, 3})
	y := dev.Alloc(nn.Shape{7})
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"length mismatch", "gpu.Copy: tensor (7) has 7 elements, want 6", func() { dev.Copy(y, x) }},
		{"bad view", "gpu.View: cannot view (2, 3) as (5)", func() { dev.View(x, nn.Shape{5}) }},
		{"not 5-D", "gpu.NCDHWToNDHWC: want a 5-D tensor", func() { dev.NCDHWToNDHWC(x, y) }},
		{"slope", "slope 2 outside [0, 1]", func() { dev.ActForward(x, x, 2) }},
		{"freed", "use of a freed tensor", func() { z := dev.Alloc(nn.Shape{1}); dev.Free(z); dev.Fill(z, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), tc.want) {
					t.Errorf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}
