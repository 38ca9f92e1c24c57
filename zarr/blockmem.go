package zarr

import "sync"

// Memory for the cache's decoded blocks. It is taken outside the
// garbage-collected heap (mapBlock: anonymous mmap where there is one) and
// reused through a free list by size, never returned: the blocks held at
// once are bounded by the cache plus the blocks being decoded, so the
// process holds about the cache's bound for them, however many blocks a
// long training decodes. On the Go heap the same cache would count as live
// data, and the collector would let the heap grow to twice it (GOGC=100)
// before collecting the garbage beside it: the 2.4× of the cache's bound
// measured before (docs/BENCHMARKS.md).

var blockMem struct {
	mu   sync.Mutex
	free map[int][][]byte
}

// getBlock returns an n-byte buffer for a cached block, its contents
// undefined.
func getBlock(n int) []byte {
	blockMem.mu.Lock()
	if l := blockMem.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		blockMem.free[n] = l[:len(l)-1]
		blockMem.mu.Unlock()
		return b
	}
	blockMem.mu.Unlock()
	return mapBlock(n)
}

// putBlock hands back a buffer getBlock returned.
func putBlock(b []byte) {
	if len(b) == 0 {
		return
	}
	blockMem.mu.Lock()
	if blockMem.free == nil {
		blockMem.free = map[int][][]byte{}
	}
	blockMem.free[len(b)] = append(blockMem.free[len(b)], b)
	blockMem.mu.Unlock()
}
