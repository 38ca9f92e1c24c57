package data

import (
	"container/list"
	"sync"
)

// volumeCache keeps decoded, preprocessed volumes in memory within a byte
// budget, evicting the least recently used. Concurrent misses on one case
// decode it once: the others wait for that decode.
type volumeCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[int]*cacheEntry
	lru     list.List // of *cacheEntry, most recent first; loaded entries only
	load    func(c int) (*Volume, error)

	hits, misses, evictions, uncacheable int64
}

type cacheEntry struct {
	key   int
	v     *Volume
	err   error
	ready chan struct{} // closed when the load finished
	elem  *list.Element
	bytes int64
}

// CacheStats counts cache outcomes.
type CacheStats struct {
	// Hits counts gets served from memory (including waits on another
	// worker's decode of the same case); Misses counts decodes.
	Hits, Misses int64
	// Evictions counts volumes dropped to stay within the budget;
	// Uncacheable counts volumes larger than the whole budget (used once,
	// not kept).
	Evictions, Uncacheable int64
	// Bytes and Entries describe what is held now; Budget is the limit.
	Bytes, Budget int64
	Entries       int
}

func newVolumeCache(budget int64, load func(int) (*Volume, error)) *volumeCache {
	return &volumeCache{budget: budget, entries: map[int]*cacheEntry{}, load: load}
}

// get returns case key's volume, decoding it on a miss.
func (c *volumeCache) get(key int) (*Volume, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.hits++
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.v, nil
		}
		c.mu.Unlock()
		<-e.ready // another worker is decoding it
		return e.v, e.err
	}
	c.misses++
	e := &cacheEntry{key: key, ready: make(chan struct{})}
	c.entries[key] = e
	c.mu.Unlock()

	v, err := c.load(key)

	c.mu.Lock()
	e.v, e.err = v, err
	switch {
	case err != nil:
		delete(c.entries, key) // a later get tries again
	default:
		e.bytes = v.Bytes()
		if e.bytes > c.budget {
			delete(c.entries, key)
			c.uncacheable++
			break
		}
		e.elem = c.lru.PushFront(e)
		c.used += e.bytes
		for c.used > c.budget {
			old := c.lru.Back().Value.(*cacheEntry)
			c.lru.Remove(old.elem)
			old.elem = nil
			delete(c.entries, old.key)
			c.used -= old.bytes
			c.evictions++
		}
	}
	c.mu.Unlock()
	close(e.ready)
	return v, err
}

func (c *volumeCache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Evictions: c.evictions, Uncacheable: c.uncacheable,
		Bytes: c.used, Budget: c.budget, Entries: c.lru.Len()}
}
