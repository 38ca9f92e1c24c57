//go:build cgo

package emu

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// launcher is shared by all tests so TestMain can check that every kernel
// of package kernels ran under emulation.
var launcher Launcher

// ops runs the launch recipes with chunk sizes that are not multiples of
// the block size and do not divide the test volumes, so every reduction has
// several chunks, one of them short.
var ops = kernels.Ops[*Buffer]{Launcher: &launcher, Chunk: 37, FlatChunk: 1000}

// dev is the CPU reference device.
var dev = cpu.New(cpu.Options{Threads: 2})

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	filtered := flag.Lookup("test.run").Value.String() != "" || flag.Lookup("test.skip").Value.String() != ""
	if code == 0 && !filtered {
		// A full run must have compared every kernel.
		ran := launcher.Launched()
		var missing []string
		for _, k := range kernels.All() {
			if ran[k.Name] == 0 {
				missing = append(missing, k.Name)
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: kernels never run under emulation: %s\n", strings.Join(missing, ", "))
			code = 1
		} else if testing.Verbose() {
			var names []string
			for _, k := range kernels.All() {
				names = append(names, k.Name)
			}
			fmt.Printf("emulation: all %d kernels of package kernels ran and were compared: %s\n", len(names), strings.Join(names, " "))
		}
	}
	os.Exit(code)
}

// exact is the tolerance of kernels written to repeat package cpu's float32
// arithmetic operation for operation: none on amd64, where neither g++ (no
// FMA in the baseline ISA, contraction off) nor Go fuses a·b+c; a few ulps
// elsewhere, where Go may fuse.
func exact() (atol, rtol float64) {
	if runtime.GOARCH == "amd64" {
		return 0, 0
	}
	return 1e-6, 1e-6
}

// compare fails t unless |got-want| <= atol + rtol·|want| everywhere (NaN
// only where want is NaN) and logs the kernel's comparison line.
func compare[T float32 | float64](t *testing.T, kernel, ref string, got, want []T, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("kernel %s: %d values, CPU reference %s has %d", kernel, len(got), ref, len(want))
	}
	maxErr, worst := 0.0, -1
	bad := 0
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(w) || math.IsNaN(g) {
			if math.IsNaN(w) != math.IsNaN(g) {
				bad++
				if worst < 0 {
					worst = i
				}
			}
			continue
		}
		e := math.Abs(g - w)
		if math.IsInf(w, 0) && g == w {
			e = 0
		}
		if e > maxErr {
			maxErr = e
		}
		if e > atol+rtol*math.Abs(w) {
			bad++
			if worst < 0 {
				worst = i
			}
		}
	}
	tol := fmt.Sprintf("tol %g + %g·|ref|", atol, rtol)
	if atol == 0 && rtol == 0 {
		tol = "tol 0, bit-exact"
	}
	t.Logf("kernel %s vs CPU reference %s: max abs err %.3g (%s), %d values", kernel, ref, maxErr, tol, len(got))
	if bad > 0 {
		t.Errorf("kernel %s: %d of %d values out of tolerance; first at %d: got %v, want %v", kernel, bad, len(got), worst, got[worst], want[worst])
	}
}

// rng returns a deterministic generator for one test.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// uniform returns n values uniform in [lo, hi).
func uniform(r *rand.Rand, n int, lo, hi float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*r.Float32()
	}
	return x
}

// labelsOf returns n random class indices in [0, c) as floats.
func labelsOf(r *rand.Rand, n, c int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.IntN(c))
	}
	return x
}

// tensor wraps a copy of data as a CPU tensor.
func tensor(shape nn.Shape, data []float32) *cpu.Tensor {
	return cpu.NewTensor(shape, append([]float32(nil), data...))
}

// buf uploads a copy of data and frees it when the test ends.
func buf(t *testing.T, data []float32) *Buffer {
	b := FromF32(data)
	t.Cleanup(b.Free)
	return b
}

// scratch allocates an uninitialised buffer freed when the test ends.
func scratch(t *testing.T, bytes int) *Buffer {
	b := Alloc(bytes)
	t.Cleanup(b.Free)
	return b
}

// must fails the test on a launch error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// f64s converts float32s to float64s.
func f64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// gridOf returns a 1-D grid of ceil(n/Block) blocks.
func gridOf(n int) kernels.Dim3 { return kernels.Dim3{X: (n + kernels.Block - 1) / kernels.Block} }
