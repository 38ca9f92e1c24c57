//go:build cgo

package emu

import (
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
)

const selftestPrefix = "emu_selftest_"

// TestRegistryMatchesTable checks that the emulation compiled every kernel
// of package kernels with the parameter kinds of its table entry (which
// package kernels holds to the PTX), and nothing else.
func TestRegistryMatchesTable(t *testing.T) {
	names, params := Registered()
	inTable := map[string]bool{}
	for _, k := range kernels.All() {
		inTable[k.Name] = true
		p, ok := params[k.Name]
		switch {
		case !ok:
			t.Errorf("kernel %s (%s.cu) is not registered in the emulation: add it to kernels/emu/%s.cc", k.Name, k.Module, k.Module)
		case p != k.Params:
			t.Errorf("kernel %s: emulation compiled parameters %q, table says %q", k.Name, p, k.Params)
		}
	}
	for _, n := range names {
		if !inTable[n] && !strings.HasPrefix(n, selftestPrefix) {
			t.Errorf("emulation registers %s, which is not in package kernels' table", n)
		}
	}
	t.Logf("%d kernels registered in the emulation", len(names))
}

func selftest(name, params string) kernels.Kernel {
	return kernels.Kernel{Module: "selftest", Name: selftestPrefix + name, Params: params}
}

// TestEmulationBarrier checks that __syncthreads holds every thread until
// all have written shared memory, over several blocks.
func TestEmulationBarrier(t *testing.T) {
	const blocks = 3
	out := scratch(t, 4*blocks*kernels.Block)
	for rep := 0; rep < 3; rep++ {
		must(t, launcher.Launch(selftest("barrier", "p"), kernels.Dim3{X: blocks}, out))
		got := out.I32()
		for b := 0; b < blocks; b++ {
			for i := 0; i < kernels.Block; i++ {
				want := int32((i+1)%kernels.Block + 1000*b)
				if got[b*kernels.Block+i] != want {
					t.Fatalf("block %d thread %d read %d, want %d", b, i, got[b*kernels.Block+i], want)
				}
			}
		}
	}
}

// TestEmulationMissingBarrierShows checks that a kernel reading another
// thread's shared-memory write without a barrier between them gets stale
// values: the emulation runs a block's threads one after another, in an
// order that alternates between blocks, so such a read cannot happen to work
// in every block.
func TestEmulationMissingBarrierShows(t *testing.T) {
	const blocks = 2
	out := scratch(t, 4*blocks*kernels.Block)
	must(t, launcher.Launch(selftest("nobarrier", "p"), kernels.Dim3{X: blocks}, out))
	got := out.I32()
	for b := 0; b < blocks; b++ {
		stale := 0
		for i := 0; i < kernels.Block; i++ {
			if got[b*kernels.Block+i] != int32((i+1)%kernels.Block+1000*b) {
				stale++
			}
		}
		t.Logf("block %d: %d of %d threads read a stale neighbour", b, stale, kernels.Block)
		if b == 0 && stale == 0 {
			t.Errorf("block 0 ran without a barrier and every thread read its neighbour's new value")
		}
	}
}

// TestEmulationDivergentSync checks that threads reaching different
// __syncthreads are reported instead of deadlocking.
func TestEmulationDivergentSync(t *testing.T) {
	out := scratch(t, 4*kernels.Block)
	err := launcher.Launch(selftest("divergent", "p"), kernels.Dim3{X: 2}, out)
	if err == nil || !strings.Contains(err.Error(), "divergent __syncthreads") {
		t.Fatalf("divergent kernel: err = %v, want divergent __syncthreads", err)
	}
}

// TestEmulationOutOfBounds checks that a write past a buffer is reported.
func TestEmulationOutOfBounds(t *testing.T) {
	out := scratch(t, 4*10)
	if err := launcher.Launch(selftest("oob", "pi"), kernels.Dim3{X: 1}, out, int32(9)); err != nil {
		t.Fatalf("in-bounds write: %v", err)
	}
	err := launcher.Launch(selftest("oob", "pi"), kernels.Dim3{X: 1}, out, int32(10))
	if err == nil || !strings.Contains(err.Error(), "outside a buffer") {
		t.Fatalf("out-of-bounds write: err = %v", err)
	}
}

// TestEmulationAtomics checks atomicAdd and atomicMin under contention.
func TestEmulationAtomics(t *testing.T) {
	counter, lowest := scratch(t, 4), scratch(t, 4)
	must(t, launcher.Launch(kernelNamed(t, "fill_i32"), kernels.Dim3{X: 1}, counter, int32(1), int32(0)))
	must(t, launcher.Launch(kernelNamed(t, "fill_i32"), kernels.Dim3{X: 1}, lowest, int32(1), int32(1<<30)))
	must(t, launcher.Launch(selftest("atomics", "pp"), kernels.Dim3{X: 4}, counter, lowest))
	if c := counter.I32()[0]; c != 4*kernels.Block {
		t.Errorf("counter = %d, want %d", c, 4*kernels.Block)
	}
	if l := lowest.I32()[0]; l != 0 {
		t.Errorf("lowest = %d, want 0", l)
	}
}

// TestLaunchChecksArguments checks the launcher's argument validation.
func TestLaunchChecksArguments(t *testing.T) {
	k := kernelNamed(t, "fill_f32")
	b := scratch(t, 16)
	if err := launcher.Launch(k, kernels.Dim3{X: 1}, b, 4, float32(1)); err == nil || !strings.Contains(err.Error(), "type int") {
		t.Errorf("int argument: err = %v", err)
	}
	if err := launcher.Launch(k, kernels.Dim3{X: 1}, b, int32(4)); err == nil || !strings.Contains(err.Error(), "parameters") {
		t.Errorf("missing argument: err = %v", err)
	}
	bad := k
	bad.Params = "pi"
	if err := launcher.Launch(bad, kernels.Dim3{X: 1}, b, int32(4)); err == nil || !strings.Contains(err.Error(), "takes parameters pif") {
		t.Errorf("wrong table entry: err = %v", err)
	}
	if err := launcher.Launch(kernels.Kernel{Name: "nope", Params: ""}, kernels.Dim3{X: 1}); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("unknown kernel: err = %v", err)
	}
}

func kernelNamed(t *testing.T, name string) kernels.Kernel {
	t.Helper()
	k, ok := kernels.Lookup(name)
	if !ok {
		t.Fatalf("no kernel %s", name)
	}
	return k
}
