package cpu

import (
	"sync"
	"sync/atomic"
)

// chunkVoxels is the fixed reduction chunk: reductions over voxels sum each
// chunk of this many voxels on its own and combine the chunk sums in order,
// which keeps results independent of the thread count.
const chunkVoxels = 4096

// parallel runs f(i) for i in [0, n) on up to d.threads goroutines, handing
// out indices dynamically. f must not depend on which goroutine runs it.
func (d *Device) parallel(n int, f func(i int)) {
	workers := min(d.threads, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

// parallelRange splits [0, n) into contiguous blocks of at least minBlock
// elements and runs f(lo, hi) on each, in parallel. Only for elementwise work
// whose result does not depend on the split.
func (d *Device) parallelRange(n, minBlock int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	blocks := min(d.threads*4, (n+minBlock-1)/minBlock)
	if blocks <= 1 {
		f(0, n)
		return
	}
	size := (n + blocks - 1) / blocks
	d.parallel(blocks, func(b int) {
		lo := b * size
		hi := min(lo+size, n)
		if lo < hi {
			f(lo, hi)
		}
	})
}

// chunks returns the number of fixed-size voxel chunks of a sample of v voxels.
func chunks(v int) int { return (v + chunkVoxels - 1) / chunkVoxels }
