package kern

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// Engine runs the fast kernels. The zero value is ready to use and runs on
// runtime.GOMAXPROCS(0) goroutines; set Threads to pin the count.
//
// An Engine is safe for concurrent use by several goroutines: each call
// takes its own scratch buffers from a pool inside the Engine. The pool keeps
// the buffers between calls (they grow to the largest layer seen), so a
// training loop allocates no large buffer in steady state (only a few small
// closures per call); ReleaseScratch drops them.
// An Engine must not be copied after first use.
//
// Results are bit-identical for every Threads value and GOMAXPROCS: each
// output element is summed by one goroutine in an order fixed by the
// geometry alone, and the weight gradient's reduction over voxels is split
// into chunks whose number depends only on the geometry and is summed in
// chunk order. The AVX2 and the portable micro-kernels round differently
// (fused multiply-add), so results may differ in the last bits between
// machines with and without AVX2+FMA.
type Engine struct {
	// Threads is the number of goroutines a kernel call may use; 0 means GOMAXPROCS.
	Threads int

	// generic forces the portable micro-kernel (tests).
	generic bool

	mu   sync.Mutex
	free []*scratch
}

// scratch holds one goroutine's buffers. Slices only grow.
type scratch struct {
	ring      []float32 // zero-padded source planes (see preparePlanes)
	ringKeys  []int     // which plane each ring slot holds
	tile      []float32 // C rows of a partial column panel
	bpad      []float32 // a B block copied with padded row stride
	rowOffA   []int     // offsets of the register tiles' A rows (ukArgs.aoff)
	rowOffC   []int     // offsets of their C rows (ukArgs.coff)
	offTables []int     // further offset tables: taps, ring slots, lines, tile rows
	callBuf   []float32 // per-call buffer shared by all goroutines: packed weights or partial sums
	biasBuf   []float32 // per-call bias, zero-padded to whole column panels
	classes   []icClass // per-call work lists
	icItems   []icItem
	bwItems   []bwItem
}

// getScratch takes a scratch from the pool (or makes one).
func (e *Engine) getScratch() *scratch {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	return new(scratch)
}

// putScratch returns a scratch to the pool.
func (e *Engine) putScratch(s *scratch) {
	e.mu.Lock()
	e.free = append(e.free, s)
	e.mu.Unlock()
}

// ReleaseScratch drops the pooled scratch buffers so the garbage collector can
// reclaim them; later calls allocate afresh. Calls running concurrently keep
// their buffers until they return.
func (e *Engine) ReleaseScratch() {
	e.mu.Lock()
	e.free = nil
	e.mu.Unlock()
}

// threads is the goroutine count of a call.
func (e *Engine) threads() int {
	if e.Threads > 0 {
		return e.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// parallel runs fn(s, i) for every item i in [0, n) on up to e.threads()
// goroutines, each with its own scratch s; items are handed out in order from
// a shared counter, so an item's result must not depend on which goroutine
// runs it. The calling goroutine is one of the workers.
func (e *Engine) parallel(n int, fn func(s *scratch, i int)) {
	if n <= 0 {
		return
	}
	w := min(e.threads(), n)
	if w <= 1 {
		s := e.getScratch()
		for i := 0; i < n; i++ {
			fn(s, i)
		}
		e.putScratch(s)
		return
	}
	var next atomic.Int64
	work := func() {
		s := e.getScratch()
		defer e.putScratch(s)
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(s, i)
		}
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for t := 1; t < w; t++ {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// grow returns buf resized to n elements, reallocating only when it is too
// small. The contents are unspecified.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n, n+n/8)
	}
	return buf[:n]
}

// checkConv panics with a clear message when the geometry is invalid or a
// slice is too short: the assembly kernels do no bounds checks of their own.
func checkConv(op string, g geom.Conv, xLen, wLen, yLen int, x, w, y []float32, bias []float32, biasName string) {
	if err := g.Validate(); err != nil {
		panic(fmt.Sprintf("kern.%s: %v", op, err))
	}
	check := func(name string, s []float32, n int) {
		if len(s) < n {
			panic(fmt.Sprintf("kern.%s: %s has %d floats, geometry %+v needs %d", op, name, len(s), g, n))
		}
	}
	check("input", x, xLen)
	check("weights", w, wLen)
	check("output", y, yLen)
	if bias != nil {
		check(biasName, bias, g.OutC)
	}
}

// Conv3DForward computes y = conv(x, w) + bias (see Conv3DForwardRef). y is overwritten.
func (e *Engine) Conv3DForward(g geom.Conv, x, w, bias, y []float32) {
	checkConv("Conv3DForward", g, g.InLen(), g.WeightLen(), g.OutLen(), x, w, y, bias, "bias")
	e.convForward(g, x, w, bias, y)
}

// Conv3DBackwardData computes dx from dy (see Conv3DBackwardDataRef). dx is overwritten.
func (e *Engine) Conv3DBackwardData(g geom.Conv, dy, w, dx []float32) {
	checkConv("Conv3DBackwardData", g, g.OutLen(), g.WeightLen(), g.InLen(), dy, w, dx, nil, "")
	e.convBackwardData(g, dy, w, dx)
}

// Conv3DBackwardWeight computes dw and, if dbias is not nil, dbias (see
// Conv3DBackwardWeightRef). Both are overwritten.
func (e *Engine) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, dbias []float32) {
	checkConv("Conv3DBackwardWeight", g, g.InLen(), g.OutLen(), g.WeightLen(), x, dy, dw, dbias, "dbias")
	e.convBackwardWeight(g, x, dy, dw, dbias)
}
