package zarr

import (
	"container/list"
	"sync"
)

// DefaultCacheBytes is the default size of a file's cache of decoded
// chunks.
const DefaultCacheBytes = 256 << 20

// chunkCache holds decoded chunks (and shard indexes) up to a number of
// bytes, evicting the least recently used. Concurrent loads of one key
// share a single decode.
type chunkCache struct {
	mu       sync.Mutex
	max      int64
	used     int64
	lru      *list.List // of *cacheEntry, most recent first
	entries  map[string]*list.Element
	inflight map[string]*flight
}

type cacheEntry struct {
	key  string
	val  any
	size int64
	// pins counts the readers using val now (use); an entry dropped
	// while pinned is marked dropped and recycled by its last reader.
	pins    int
	dropped bool
}

// recycler is a cached value whose memory is reused once the cache has
// dropped it and no reader holds it: the decoded blosc blocks, so that
// a cache churning through a volume reuses the buffers it evicts
// instead of leaving them to the garbage collector, and the process
// stays near the cache's bound.
type recycler interface{ recycle() }

type flight struct {
	done chan struct{}
	val  any
	err  error
}

func newChunkCache(max int64) *chunkCache {
	return &chunkCache{max: max, lru: list.New(), entries: map[string]*list.Element{}, inflight: map[string]*flight{}}
}

// get returns key's value, loading it (once, however many ask at a time)
// when absent. load returns the value and its size in bytes; errors are
// not cached.
func (c *chunkCache) get(key string, load func() (any, int64, error)) (any, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.lru.MoveToFront(e)
		v := e.Value.(*cacheEntry).val
		c.mu.Unlock()
		return v, nil
	}
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		<-f.done
		return f.val, f.err
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	v, size, err := load()
	f.val, f.err = v, err
	c.mu.Lock()
	delete(c.inflight, key)
	if err == nil && size <= c.max {
		c.insert(&cacheEntry{key: key, val: v, size: size})
	}
	c.mu.Unlock()
	close(f.done)
	return v, err
}

// insert adds ce as the most recent entry and drops the least recent
// ones beyond the bound. c.mu is held.
func (c *chunkCache) insert(ce *cacheEntry) {
	c.entries[ce.key] = c.lru.PushFront(ce)
	c.used += ce.size
	for c.used > c.max {
		e := c.lru.Back()
		old := e.Value.(*cacheEntry)
		c.lru.Remove(e)
		delete(c.entries, old.key)
		c.used -= old.size
		c.drop(old)
	}
}

// drop recycles a removed entry's value, or leaves that to its last
// reader. c.mu is held.
func (c *chunkCache) drop(ce *cacheEntry) {
	if ce.pins > 0 {
		ce.dropped = true
		return
	}
	if r, ok := ce.val.(recycler); ok {
		r.recycle()
	}
}

// use calls f with key's value, loading it as get does. The value stays
// the cache's and is valid only while f runs: a recycler's memory is
// reused once the cache drops it and f has returned.
func (c *chunkCache) use(key string, load func() (any, int64, error), f func(v any)) error {
	for {
		c.mu.Lock()
		if e, ok := c.entries[key]; ok {
			c.lru.MoveToFront(e)
			ce := e.Value.(*cacheEntry)
			ce.pins++
			c.mu.Unlock()
			f(ce.val)
			c.unpin(ce)
			return nil
		}
		if fl, ok := c.inflight[key]; ok {
			c.mu.Unlock()
			<-fl.done
			if fl.err != nil {
				return fl.err
			}
			continue // cached now, unless already dropped: look again
		}
		fl := &flight{done: make(chan struct{})}
		c.inflight[key] = fl
		c.mu.Unlock()

		v, size, err := load()
		fl.err = err
		c.mu.Lock()
		delete(c.inflight, key)
		var ce *cacheEntry
		if err == nil && size <= c.max {
			ce = &cacheEntry{key: key, val: v, size: size, pins: 1}
			c.insert(ce)
		}
		c.mu.Unlock()
		close(fl.done)
		if err != nil {
			return err
		}
		f(v)
		if ce != nil {
			c.unpin(ce)
		} else if r, ok := v.(recycler); ok {
			r.recycle() // never cached: this reader was its only one
		}
		return nil
	}
}

// unpin ends a reader's use of ce's value.
func (c *chunkCache) unpin(ce *cacheEntry) {
	c.mu.Lock()
	ce.pins--
	recycle := ce.dropped && ce.pins == 0
	c.mu.Unlock()
	if recycle {
		if r, ok := ce.val.(recycler); ok {
			r.recycle()
		}
	}
}

// Cache is a byte-bounded LRU cache of decoded chunks that several open
// files share (Options.Cache): a training loader keeps one for all its
// stores, so the chunks a patch decodes serve the later patches that
// overlap them, whichever file handle or worker reads them. It is safe for
// concurrent use.
type Cache struct{ c *chunkCache }

// NewCache returns a Cache holding up to maxBytes of decoded chunks
// (0 or less: it holds nothing, and every read decodes).
func NewCache(maxBytes int64) *Cache { return &Cache{newChunkCache(max(maxBytes, 0))} }

// Bytes reports the decoded bytes the cache holds now.
func (c *Cache) Bytes() int64 { return c.c.bytes() }

// bytes reports the cache's held bytes.
func (c *chunkCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// reset drops every held value (a closed file's).
func (c *chunkCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		c.drop(e.Value.(*cacheEntry))
	}
	c.lru.Init()
	clear(c.entries)
	c.used = 0
}
