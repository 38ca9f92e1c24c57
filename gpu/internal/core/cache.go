package core

import (
	"errors"
	"fmt"
	"sync"
)

// cache is a caching allocator over Backend.Malloc. Freed blocks go to a
// free list by size class and are handed out again without a trip to the
// driver (cuMemAlloc/cuMemFree are slow and cuMemFree synchronises).
//
// Reusing a block at once is safe because all work that touches device
// memory through a Device runs on one stream, in issue order: the new
// owner's work runs after the old owner's. Work on another stream (an
// Upload on a copy stream) must be finished before its tensor is freed,
// which is nn's contract for tensors shared between streams.
//
// There is no splitting or coalescing: nn allocates its workspace once per
// model and batch shape, so exact size classes waste little and keep the
// allocator simple. Classes: multiples of 512 bytes below 1 MiB, of 2 MiB
// above.
type cache[B comparable] struct {
	machine Backend[B]

	mu       sync.Mutex
	free     map[int][]B
	inUse    int64 // bytes requested by live tensors
	out      int64 // bytes of blocks handed out (tensors and buffers), by size class
	outPeak  int64 // the peak of out
	peak     int64
	reserved int64 // bytes obtained from the backend and not released
	cached   int64 // of which on free lists
}

// classBytes returns the size class of a request of n bytes.
func classBytes(n int) int {
	const small, big = 512, 2 << 20
	switch {
	case n <= small:
		return small
	case n <= 1<<20:
		return (n + small - 1) / small * small
	default:
		return (n + big - 1) / big * big
	}
}

// get returns a block of at least n bytes; tensor says whether it counts
// as tensor memory (MemoryInUse).
func (c *cache[B]) get(n int, tensor bool) (B, error) {
	if n < 0 {
		var null B
		return null, fmt.Errorf("allocate %d bytes: negative size", n)
	}
	cls := classBytes(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tensor {
		c.inUse += int64(n)
		c.peak = max(c.peak, c.inUse)
	}
	c.out += int64(cls)
	c.outPeak = max(c.outPeak, c.out)
	if l := c.free[cls]; len(l) > 0 {
		p := l[len(l)-1]
		c.free[cls] = l[:len(l)-1]
		c.cached -= int64(cls)
		return p, nil
	}
	p, err := c.machine.Malloc(cls)
	if err != nil {
		// Give every cached block back and try once more: the free lists
		// may hold memory of other size classes.
		if rerr := c.releaseLocked(); rerr != nil {
			err = errors.Join(err, rerr)
		} else {
			p, err = c.machine.Malloc(cls)
		}
	}
	if err != nil {
		if tensor {
			c.inUse -= int64(n)
		}
		c.out -= int64(cls)
		var null B
		return null, fmt.Errorf("allocate %d bytes: %w", cls, err)
	}
	c.reserved += int64(cls)
	return p, nil
}

// put returns a block of a request of n bytes to its free list.
func (c *cache[B]) put(p B, n int, tensor bool) {
	cls := classBytes(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tensor {
		c.inUse -= int64(n)
	}
	c.out -= int64(cls)
	if c.free == nil {
		c.free = map[int][]B{}
	}
	c.free[cls] = append(c.free[cls], p)
	c.cached += int64(cls)
}

// release frees every cached block.
func (c *cache[B]) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releaseLocked()
}

func (c *cache[B]) releaseLocked() error {
	var errs []error
	for cls, l := range c.free {
		for _, p := range l {
			if err := c.machine.MemFree(p); err != nil {
				errs = append(errs, err)
			}
			c.reserved -= int64(cls)
			c.cached -= int64(cls)
		}
		delete(c.free, cls)
	}
	return errors.Join(errs...)
}

// stats returns the tensor bytes in use, their peak and the cached bytes.
func (c *cache[B]) stats() (inUse, peak, cached int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inUse, c.peak, c.cached
}

// peakOut returns the peak bytes of blocks handed out: tensors, the ops'
// buffers and workspaces, rounded up to their size classes.
func (c *cache[B]) peakOut() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outPeak
}

func (c *cache[B]) reservedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reserved
}

// buffer is a device buffer an op reuses from call to call, grown on
// demand (the old block goes back to the cache; stream order makes that
// safe, see cache).
type buffer[B comparable] struct {
	ptr  B
	size int
}

// ensure returns a block of at least n bytes.
func (b *buffer[B]) ensure(c *cache[B], n int) (B, error) {
	if b.size >= n && b.size > 0 {
		return b.ptr, nil
	}
	b.drop(c)
	p, err := c.get(n, false)
	if err != nil {
		return p, err
	}
	b.ptr, b.size = p, classBytes(n)
	return p, nil
}

// drop returns the buffer's block to the cache.
func (b *buffer[B]) drop(c *cache[B]) {
	if b.size > 0 {
		c.put(b.ptr, b.size, false)
		var null B
		b.ptr, b.size = null, 0
	}
}
