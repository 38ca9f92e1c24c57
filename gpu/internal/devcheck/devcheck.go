// Package devcheck holds the equivalence tests of a compute device against
// package cpu, written once against nn.Device: every op on random inputs
// (Ops) and whole U-Net training steps (UNetStep).
//
// The CUDA test suite (package gpu, build tag cuda) runs them on a GPU;
// the tests of gpu/internal/core run them, in every `make test`, on the
// same device logic over the host emulation of the kernels, so the checks
// themselves are exercised long before a GPU is at hand. Every comparison
// is logged (go test -v) with its maximum error and tolerance.
package devcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// Tol is an elementwise tolerance: |got − want| <= Atol·scale + Rtol·|want|,
// where scale is max(1, max |want|) so that Atol is relative to the
// magnitude of the whole result.
type Tol struct{ Atol, Rtol float64 }

// Exact is the tolerance of data movement: bit-exact.
var Exact = Tol{}

// Tolerances for the device under test. Kernels compute in float32 with
// float64 reductions, as package cpu does, but sum in other orders and
// (on a GPU) evaluate exp/log with other libraries; GEMMs are cuBLAS's.
type Tolerances struct {
	Elementwise Tol // arithmetic on single elements (Add, Scale, activations, optimisers)
	Reduce      Tol // float32 results of float64 sums (ChannelSum, norm statistics)
	Sum64       Tol // float64 sums returned to the host (loss sums, ChannelDot)
	Norm        Tol // instance norm outputs and gradients
	Softmax     Tol // probabilities and loss gradients
	Conv        Tol // convolution outputs and gradients (GEMM)
	// Step is the norm-wise relative tolerance of a U-Net step's
	// gradients and updated weights: ‖got − want‖ / ‖want‖.
	Step float64
	// Loss is the relative tolerance of a U-Net step's loss.
	Loss float64
	// Rounding is the relative size of the device's rounding of GEMM
	// inputs (2⁻²⁴ for float32, 2⁻¹¹ for TF32). UNetStep perturbs the CPU
	// reference's initial weights by this much to measure how far rounding
	// alone moves each gradient (see UNetStep).
	Rounding float64
}

// FP32 is for a device whose GEMMs accumulate in float32 (cuBLAS
// CUBLAS_DEFAULT_MATH, or the emulation's float64 GEMM).
var FP32 = Tolerances{
	Elementwise: Tol{1e-6, 1e-6},
	Reduce:      Tol{1e-5, 1e-5},
	Sum64:       Tol{1e-9, 1e-9},
	Norm:        Tol{1e-4, 1e-4},
	Softmax:     Tol{1e-6, 1e-5},
	Conv:        Tol{1e-5, 1e-4},
	Step:        2e-3,
	Loss:        1e-4,
	Rounding:    0x1p-24,
}

// TF32 is for GEMMs on TF32 tensor cores (10-bit mantissa inputs).
var TF32 = Tolerances{
	Elementwise: FP32.Elementwise,
	Reduce:      FP32.Reduce,
	Sum64:       FP32.Sum64,
	Norm:        FP32.Norm,
	Softmax:     FP32.Softmax,
	Conv:        Tol{3e-3, 2e-2},
	Step:        5e-2,
	Loss:        5e-3,
	Rounding:    0x1p-11,
}

// BF16 is for GEMMs on bfloat16 operands (8-bit mantissa) with float32
// accumulation: each product's inputs are rounded by up to 2⁻⁹, 8× TF32's.
var BF16 = Tolerances{
	Elementwise: FP32.Elementwise,
	Reduce:      FP32.Reduce,
	Sum64:       FP32.Sum64,
	Norm:        FP32.Norm,
	Softmax:     FP32.Softmax,
	Conv:        Tol{3e-2, 0.15},
	Step:        0.1,
	Loss:        4e-2,
	Rounding:    0x1p-8,
}

// Options configure Ops.
type Options struct {
	// Shape is (N, D, H, W) of the activations the ops run on; the zero
	// value means (2, 5, 6, 7). Sizes above the kernels' reduction chunk
	// (4096 voxels per sample on the GPU) exercise multi-chunk sums.
	Shape [4]int
	Tol   Tolerances
	Seed  uint64
	// Only, when not empty, names the ops to run (as the subtests are
	// named, "Conv3D" say); a name Ops does not know fails the test.
	Only []string
}

// checker compares a device with the CPU reference.
type checker struct {
	t    *testing.T
	dev  nn.Device
	ref  *cpu.Device
	rng  *rand.Rand
	tol  Tolerances
	name string
}

// upload returns a new device tensor holding data.
func upload(t testing.TB, dev nn.Device, shape nn.Shape, data []float32) nn.Tensor {
	t.Helper()
	x := dev.Alloc(shape)
	s := dev.ComputeStream()
	if err := dev.Upload(s, x, data); err != nil {
		t.Fatalf("upload %v to %s: %v", shape, dev.Name(), err)
	}
	s.Synchronize()
	return x
}

// download returns a device tensor's contents.
func download(t testing.TB, dev nn.Device, x nn.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Shape().Len())
	s := dev.ComputeStream()
	if err := dev.Download(s, out, x); err != nil {
		t.Fatalf("download %v from %s: %v", x.Shape(), dev.Name(), err)
	}
	s.Synchronize()
	if err := dev.Err(); err != nil {
		t.Fatalf("%s: %v", dev.Name(), err)
	}
	return out
}

// pair is one tensor on both devices.
type pair struct {
	dev, ref nn.Tensor
}

// both uploads data to both devices.
func (k *checker) both(shape nn.Shape, data []float32) pair {
	k.t.Helper()
	p := pair{upload(k.t, k.dev, shape, data), cpu.NewTensor(shape, append([]float32(nil), data...))}
	k.t.Cleanup(func() { k.dev.Free(p.dev) })
	return p
}

// zeros returns a zero tensor on both devices.
func (k *checker) zeros(shape nn.Shape) pair { return k.both(shape, make([]float32, shape.Len())) }

func (k *checker) uniform(n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*k.rng.Float32()
	}
	return x
}

func (k *checker) labels(n, c int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(k.rng.IntN(c))
	}
	return x
}

// same compares a tensor on both devices.
func (k *checker) same(what string, p pair, tol Tol) {
	k.t.Helper()
	compare(k.t, k.name, what, download(k.t, k.dev, p.dev), p.ref.(*cpu.Tensor).Data(), tol)
}

// compare fails t unless got matches want within tol, and logs the result.
func compare[T float32 | float64](t testing.TB, dev, what string, got, want []T, tol Tol) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %s has %d values, the CPU %d", dev, what, len(got), len(want))
	}
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	maxErr, bad, first := 0.0, 0, -1
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsNaN(w) {
			if math.IsNaN(g) != math.IsNaN(w) {
				bad++
				if first < 0 {
					first = i
				}
			}
			continue
		}
		e := math.Abs(g - w)
		if g == w { // equal infinities
			e = 0
		}
		maxErr = max(maxErr, e)
		if e > tol.Atol*scale+tol.Rtol*math.Abs(w) {
			bad++
			if first < 0 {
				first = i
			}
		}
	}
	tl := fmt.Sprintf("tol %g·%.3g + %g·|cpu|", tol.Atol, scale, tol.Rtol)
	if tol == Exact {
		tl = "bit-exact"
	}
	t.Logf("%s vs cpu: %s: max abs err %.3g, max |cpu| %.3g (%s), %d values", dev, what, maxErr, scale, tl, len(got))
	if bad > 0 {
		t.Errorf("%s: %s: %d of %d values out of tolerance; first at %d: got %v, cpu %v", dev, what, bad, len(got), first, got[first], want[first])
	}
}

// Ops compares every nn.Device operation of dev with package cpu's on
// random inputs, each in a subtest named after the op.
func Ops(t *testing.T, dev nn.Device, o Options) {
	if o.Shape == [4]int{} {
		o.Shape = [4]int{2, 5, 6, 7}
	}
	if o.Tol == (Tolerances{}) {
		o.Tol = FP32
	}
	only := map[string]bool{}
	for _, s := range o.Only {
		only[s] = true
	}
	for _, tc := range opTests {
		delete(only, tc.name)
	}
	for name := range only {
		t.Fatalf("devcheck.Ops: no op %q to run", name)
	}
	ref := cpu.New(cpu.Options{Threads: 2, ReferenceConv: true})
	for _, tc := range opTests {
		if len(o.Only) > 0 && !slices.Contains(o.Only, tc.name) {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			k := &checker{t: t, dev: dev, ref: ref, rng: rand.New(rand.NewPCG(o.Seed, hash(tc.name))), tol: o.Tol, name: dev.Name()}
			tc.run(k, o.Shape)
			if err := dev.Err(); err != nil {
				t.Fatalf("%s after %s: %v", dev.Name(), tc.name, err)
			}
		})
	}
}

// hash is FNV-1a, to seed each op's inputs from its name.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
