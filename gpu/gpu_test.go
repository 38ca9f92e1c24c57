//go:build cuda

// The GPU test suite. It needs an NVIDIA GPU (compute capability 8.0+),
// its driver and cuBLAS; gorgonia.org/cu exits the binary at start where
// there is none. Build it anywhere with the CUDA toolkit's stub libcuda and
// run it on the GPU node (docs/GPU.md):
//
//	CGO_LDFLAGS=-L/usr/local/cuda/lib64/stubs go test -tags cuda -c -o gpu.test ./gpu
//	./gpu.test -test.v                                   # equivalence, overlap, determinism
//	./gpu.test -test.run '^$' -test.bench . -test.benchtime 10x   # H2D GB/s, step times
package gpu_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/feed"
	"github.com/voxtrain/voxtrain/gpu"
	"github.com/voxtrain/voxtrain/gpu/internal/devcheck"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/nn"
)

// The pinned allocator is what package data's ring takes; the device is a
// feed.Timeline; HostAllocator has the shape the trainer asserts for.
var (
	_ data.Allocator = (*gpu.PinnedAllocator)(nil)
	_ feed.Timeline  = (*gpu.Device)(nil)
	_ interface {
		HostAllocator() interface {
			Alloc(int) ([]float32, error)
			Free([]float32)
		}
	} = (*gpu.Device)(nil)
	_ data.Allocator = (interface {
		Alloc(int) ([]float32, error)
		Free([]float32)
	})(nil)
)

var (
	ordinal  = flag.Int("gpu.device", 0, "GPU ordinal to test")
	convFlag = flag.String("gpu.conv", "auto", "convolutions of the devices under test: auto, own or cudnn")
	conv     gpu.Conv
)

// dev is the device every test shares (fp32 GEMMs).
var dev *gpu.Device

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	if conv, err = gpu.ParseConv(*convFlag); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	d, err := gpu.New(gpu.Options{Ordinal: *ordinal, Conv: conv})
	if err != nil {
		fmt.Fprintf(os.Stderr, "GPU test suite: cannot open the device: %v\n", err)
		os.Exit(1)
	}
	dev = d
	fmt.Printf("GPU test suite on %s\n", d.Name())
	info := d.Info()
	fmt.Printf("  cuBLAS from %s\n", info.CuBLASPath)
	if info.CuDNNPath != "" {
		fmt.Printf("  cuDNN %s from %s\n", info.CuDNNVersion, info.CuDNNPath)
	}
	for _, n := range info.Notes {
		fmt.Printf("  note: %s\n", n)
	}
	mon := gpumon.Start(info.Ordinal, time.Second, func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) })
	code := m.Run()
	if s, ok := mon.TakeMean(); ok {
		fmt.Printf("NVML over the run: %.0f%% utilisation, %.0f of %.0f MiB, %.0f W, %.0f °C\n", s.UtilPct, s.MemUsedMiB, s.MemTotalMiB, s.PowerW, s.TempC)
	}
	mon.Close()
	if err := d.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "closing the device: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	for _, n := range d.DNNNotes() {
		fmt.Printf("  cuDNN note: %s\n", n)
	}
	os.Exit(code)
}

// open returns another device on the same GPU with other options; its
// convolutions are -gpu.conv's unless o says otherwise.
func open(t testing.TB, o gpu.Options) *gpu.Device {
	t.Helper()
	o.Ordinal = *ordinal
	if o.Conv == gpu.ConvAuto {
		o.Conv = conv
	}
	d, err := gpu.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// TestOps compares every nn.Device op with the CPU device on random
// inputs larger than one reduction chunk (4096 voxels per sample).
func TestOps(t *testing.T) {
	devcheck.Ops(t, dev, devcheck.Options{Shape: [4]int{2, 17, 18, 19}, Seed: 1})
}

// TestConvTiles runs the convolutions with a 64 KiB vol2col workspace, so
// every convolution is many tiles (the large-volume path).
func TestConvTiles(t *testing.T) {
	d := open(t, gpu.Options{ConvWorkspace: 64 << 10})
	devcheck.Ops(t, d, devcheck.Options{Shape: [4]int{2, 9, 10, 11}, Seed: 2, Only: []string{"Conv3D"}})
}

// TestConvTF32 checks the convolutions with TF32 tensor-core GEMMs
// against the CPU within TF32's tolerance.
func TestConvTF32(t *testing.T) {
	d := open(t, gpu.Options{Math: gpu.MathTF32})
	devcheck.Ops(t, d, devcheck.Options{Shape: [4]int{2, 9, 10, 11}, Seed: 3, Tol: devcheck.TF32, Only: []string{"Conv3D"}})
}

// TestConvBF16 checks the bf16 mixed-precision convolutions (bf16 GEMM
// operands, float32 accumulation) against the CPU within bf16's
// tolerance, in one tile and in many.
func TestConvBF16(t *testing.T) {
	for _, ws := range []int{0, 64 << 10} {
		d := open(t, gpu.Options{Math: gpu.MathBF16, ConvWorkspace: ws})
		devcheck.Ops(t, d, devcheck.Options{Shape: [4]int{2, 9, 10, 11}, Seed: 5, Tol: devcheck.BF16, Only: []string{"Conv3D"}})
	}
}

// TestBF16Activations checks the ops nn applies to activations and to
// their gradients with bf16 operands (math mode bf16's default storage)
// against the CPU, in one tile and in many.
func TestBF16Activations(t *testing.T) {
	for _, ws := range []int{0, 64 << 10} {
		d := open(t, gpu.Options{Math: gpu.MathBF16, ConvWorkspace: ws})
		if d.ActivationBytes() != 2 || d.ActivationGradientBytes() != 2 {
			t.Fatalf("math mode bf16: ActivationBytes %d, ActivationGradientBytes %d, want 2 and 2", d.ActivationBytes(), d.ActivationGradientBytes())
		}
		devcheck.Ops(t, d, devcheck.Options{Shape: [4]int{2, 9, 10, 11}, Seed: 6, Tol: devcheck.BF16, Only: []string{"BF16Activations", "BF16Gradients"}})
	}
}

// TestUNetStep trains the reference U-Net of bench/torch_unet_step.py
// (16-32-64-128, CE + Dice, SGD Nesterov) on the GPU and on the CPU from
// the same weights and compares loss, gradients and weights after each of
// two steps; then a deep-supervised U-Net with clDice and AdamW.
func TestUNetStep(t *testing.T) {
	t.Run("reference U-Net, 2x1x32^3, dice_ce, SGD", func(t *testing.T) {
		devcheck.UNetStep(t, dev, devcheck.StepCase{
			Loss:  devcheck.Loss("dice_ce", true),
			Optim: devcheck.Optim("sgd"),
			Batch: 2, Patch: [3]int{32, 32, 32}, Seed: 1,
		}, devcheck.FP32)
	})
	t.Run("deep supervision, 3 classes, 1x1x24x32x16, cldice, AdamW", func(t *testing.T) {
		devcheck.UNetStep(t, dev, devcheck.StepCase{
			Model: devcheck.Model([]int{8, 16, 32}, 3, true),
			Loss:  devcheck.Loss("cldice", false),
			Optim: devcheck.Optim("adamw"),
			Batch: 1, Patch: [3]int{24, 32, 16}, Seed: 2,
		}, devcheck.FP32)
	})
	t.Run("deep supervision, 3 multi-label classes, 1x1x24x32x16, dice_bce, SGD", func(t *testing.T) {
		// Batch's labels 1 and 2 are the bit-packed bytes of classes 0 and 1.
		devcheck.UNetStep(t, dev, devcheck.StepCase{
			Model: devcheck.Model([]int{8, 16, 32}, 3, true),
			Loss:  devcheck.Loss("dice_bce", false),
			Optim: devcheck.Optim("sgd"),
			Batch: 1, Patch: [3]int{24, 32, 16}, Seed: 3,
		}, devcheck.FP32)
	})
	t.Run("residual encoder (nnU-Net ResEnc), 3 classes, 1x1x16x32x32, dice_ce, SGD", func(t *testing.T) {
		devcheck.UNetStep(t, dev, devcheck.StepCase{
			Model: devcheck.ResidualModel([]int{8, 16, 32, 32}, 3, true, []int{1, 2, 2, 2}),
			Loss:  devcheck.Loss("dice_ce", false),
			Optim: devcheck.Optim("sgd"),
			Batch: 1, Patch: [3]int{16, 32, 32}, Seed: 4,
		}, devcheck.FP32)
	})
	t.Run("residual encoder with bf16 activations and gradients", func(t *testing.T) {
		d := open(t, gpu.Options{Math: gpu.MathBF16})
		devcheck.UNetStep(t, d, devcheck.StepCase{
			Model: devcheck.ResidualModel([]int{8, 16, 32, 32}, 3, true, []int{1, 2, 2, 2}),
			Loss:  devcheck.Loss("dice_ce", false),
			Optim: devcheck.Optim("sgd"),
			Batch: 1, Patch: [3]int{16, 32, 32}, Seed: 4, Steps: 1,
		}, devcheck.BF16)
	})
	t.Run("reference U-Net with TF32 GEMMs", func(t *testing.T) {
		d := open(t, gpu.Options{Math: gpu.MathTF32})
		devcheck.UNetStep(t, d, devcheck.StepCase{
			Loss:  devcheck.Loss("dice_ce", true),
			Optim: devcheck.Optim("sgd"),
			Batch: 2, Patch: [3]int{32, 32, 32}, Seed: 1, Steps: 1,
		}, devcheck.TF32)
	})
	t.Run("reference U-Net with bf16 mixed precision", func(t *testing.T) {
		d := open(t, gpu.Options{Math: gpu.MathBF16, FloatActivations: true})
		devcheck.UNetStep(t, d, devcheck.StepCase{
			Loss:  devcheck.Loss("dice_ce", true),
			Optim: devcheck.Optim("sgd"),
			Batch: 2, Patch: [3]int{32, 32, 32}, Seed: 1, Steps: 2,
		}, devcheck.BF16)
	})
	t.Run("reference U-Net with bf16 mixed precision and bf16 activations", func(t *testing.T) {
		d := open(t, gpu.Options{Math: gpu.MathBF16, FloatGradients: true})
		devcheck.UNetStep(t, d, devcheck.StepCase{
			Loss:  devcheck.Loss("dice_ce", true),
			Optim: devcheck.Optim("sgd"),
			Batch: 2, Patch: [3]int{32, 32, 32}, Seed: 1, Steps: 2,
		}, devcheck.BF16)
	})
	t.Run("reference U-Net with bf16 mixed precision, bf16 activations and gradients", func(t *testing.T) {
		d := open(t, gpu.Options{Math: gpu.MathBF16})
		if d.ActivationGradientBytes() != 2 {
			t.Fatalf("math mode bf16: ActivationGradientBytes %d, want 2", d.ActivationGradientBytes())
		}
		devcheck.UNetStep(t, d, devcheck.StepCase{
			Loss:  devcheck.Loss("dice_ce", true),
			Optim: devcheck.Optim("sgd"),
			Batch: 2, Patch: [3]int{32, 32, 32}, Seed: 1, Steps: 2,
		}, devcheck.BF16)
	})
}

// train runs steps training steps of a fresh reference U-Net on d and
// returns the weights.
func train(t *testing.T, d nn.Device, steps int) []nn.HostTensor {
	t.Helper()
	m, err := nn.NewUNet(d, config.Default().Model, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	size := [3]int{32, 32, 32}
	l, err := nn.NewLearner(m, 2, size, devcheck.Loss("dice_ce", true), devcheck.Optim("sgd"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	x, y := d.Alloc(l.WS.InputShape()), d.Alloc(l.WS.LabelShape())
	defer d.Free(x)
	defer d.Free(y)
	for s := 0; s < steps; s++ {
		xs, ys := devcheck.Batch(uint64(s), 2, 1, 2, size)
		cs := d.ComputeStream()
		if err := d.Upload(cs, x, xs); err != nil {
			t.Fatal(err)
		}
		if err := d.Upload(cs, y, ys); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Step(x, y, 0.01); err != nil {
			t.Fatal(err)
		}
	}
	w, err := nn.ExportParams(d, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDeterministic: the same training from the same seed gives the same
// weights bit for bit, run after run (no atomics in float sums, one
// cuBLAS handle on one stream; with cuDNN, Options.Deterministic).
func TestDeterministic(t *testing.T) {
	dev := open(t, gpu.Options{Deterministic: true})
	a, b := train(t, dev, 3), train(t, dev, 3)
	n := 0
	for i := range a {
		for j := range a[i].Data {
			if math.Float32bits(a[i].Data[j]) != math.Float32bits(b[i].Data[j]) {
				t.Fatalf("%s[%d] differs between two identical runs: %v vs %v", a[i].Name, j, a[i].Data[j], b[i].Data[j])
			}
			n++
		}
	}
	t.Logf("%s: two runs of 3 training steps gave bit-identical weights (%d values)", dev.Name(), n)
}

// TestPinnedMemory: pinned buffers round-trip through the device on a copy
// stream ordered by events, are recognised as pinned, and are freed.
func TestPinnedMemory(t *testing.T) {
	for _, wc := range []bool{false, true} {
		alloc := dev.PinnedAllocator(wc)
		const n = 1<<20 + 3
		src, err := alloc.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := alloc.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range src {
			src[i] = float32(i%1000) - 0.5
		}
		x := dev.Alloc(nn.Shape{n})
		cs := dev.NewStream()
		if err := dev.Upload(cs, x, src); err != nil {
			t.Fatal(err)
		}
		dev.ComputeStream().Wait(cs.Record())
		dev.Scale(x, 2)
		back := dev.NewStream()
		back.Wait(dev.ComputeStream().Record())
		if err := dev.Download(back, dst, x); err != nil {
			t.Fatal(err)
		}
		ev := back.Record()
		ev.Synchronize()
		if !ev.Done() {
			t.Error("event not done after Synchronize")
		}
		for i := range dst {
			if dst[i] != 2*src[i] {
				t.Fatalf("write-combined %v: element %d = %v, want %v", wc, i, dst[i], 2*src[i])
			}
		}
		dev.Free(x)
		alloc.Free(src)
		alloc.Free(dst)
		if err := dev.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("pinned (write-combined %v): %d floats up on a copy stream, scaled on the compute stream, down on a third stream, ordered by events: exact", wc, n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("freeing Go memory through the pinned allocator did not panic")
			}
		}()
		dev.PinnedAllocator(false).Free(make([]float32, 4))
	}()
}

// TestEventsAndTiming: timing events measure a kernel's duration; Done
// turns true without Synchronize.
func TestEventsAndTiming(t *testing.T) {
	x := dev.Alloc(nn.Shape{64 << 20})
	defer dev.Free(x)
	cs := dev.Compute()
	a := cs.RecordTimed()
	for i := 0; i < 10; i++ {
		dev.Scale(x, 1.0001)
	}
	b := cs.RecordTimed()
	deadline := time.Now().Add(10 * time.Second)
	for !b.Done() {
		if time.Now().After(deadline) {
			t.Fatal("event not done after 10 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
	d, err := dev.Elapsed(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("10 scales of 256 MiB took %v on the GPU's clock", d)
	}
	t.Logf("10 × Scale over 256 MiB: %v (%.0f GB/s of reads+writes)", d, 10*2*256*(1<<20)/d.Seconds()/1e9)
}

// hostRing is a batch ring in pinned memory: a goroutine fills free
// buffers (with one of a few synthetic batches, in turn) and hands them
// out in order, as package data's ring does.
type hostRing struct {
	free, ready chan int
	stop, done  chan struct{}
	img, lbl    [][]float32
}

func newHostRing(t testing.TB, alloc *gpu.PinnedAllocator, buffers, n int, size [3]int) *hostRing {
	t.Helper()
	v := size[0] * size[1] * size[2]
	r := &hostRing{free: make(chan int, buffers), ready: make(chan int, buffers), stop: make(chan struct{}), done: make(chan struct{})}
	for i := 0; i < buffers; i++ {
		img, err := alloc.Alloc(n * v)
		if err != nil {
			t.Fatal(err)
		}
		lbl, err := alloc.Alloc(n * v)
		if err != nil {
			t.Fatal(err)
		}
		r.img, r.lbl = append(r.img, img), append(r.lbl, lbl)
		r.free <- i
	}
	var xs, ys [][]float32
	for k := uint64(0); k < 3; k++ {
		x, y := devcheck.Batch(k, n, 1, 2, size)
		xs, ys = append(xs, x), append(ys, y)
	}
	go func() {
		defer close(r.done)
		for seq := 0; ; seq++ {
			var i int
			select {
			case i = <-r.free:
			case <-r.stop:
				return
			}
			copy(r.img[i], xs[seq%len(xs)])
			copy(r.lbl[i], ys[seq%len(ys)])
			r.ready <- i
		}
	}()
	t.Cleanup(func() {
		close(r.stop)
		<-r.done
		for i := range r.img {
			alloc.Free(r.img[i])
			alloc.Free(r.lbl[i])
		}
	})
	return r
}
