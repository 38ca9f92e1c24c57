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
}

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
		c.entries[key] = c.lru.PushFront(&cacheEntry{key, v, size})
		c.used += size
		for c.used > c.max {
			e := c.lru.Back()
			ce := e.Value.(*cacheEntry)
			c.lru.Remove(e)
			delete(c.entries, ce.key)
			c.used -= ce.size
		}
	}
	c.mu.Unlock()
	close(f.done)
	return v, err
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
	c.lru.Init()
	clear(c.entries)
	c.used = 0
}
