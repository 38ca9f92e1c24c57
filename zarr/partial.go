package zarr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	mbits "math/bits"
	"os"
	"strconv"
	"sync"
)

// Reading part of a blosc chunk. Blosc compresses a chunk as blocks of a
// few hundred KiB, each on its own (c-blosc 1 picks 256 KiB for zstd at
// clevel 5: 16 z-slices of a 128³ uint8 chunk), and its header gives
// where each block starts. A region that needs only some of a chunk —
// a random 128³ patch needs on average half of each of the eight 128³
// chunks it overlaps, its z-range cutting each — needs only the blocks
// holding the bytes between the first and the last element it reads, so
// only those are decoded: about half the decoding of whole chunks for
// training patches. With a cache, the decoded blocks are what it holds,
// so a later patch decodes only the blocks no earlier patch needed.

// bloscParts reports whether the array's chunks are decoded in part: their
// only bytes-to-bytes step is blosc (numcodecs' Blosc compressor without
// filters; v3's bytes codec then blosc) and a chunk is a stored object of
// its own (not an N5 block behind a header, not a shard's inner chunk).
func (a *array) bloscParts() bool {
	if a.m.shard != nil || a.m.n5 || len(a.m.codec.bytes) != 1 {
		return false
	}
	_, ok := a.m.codec.bytes[0].(bloscCodecT)
	return ok
}

// chunkSpan is the byte range [b0, b1) of chunk idx's decoded buffer
// between the first and the last element of the region [lo, hi) inside
// the chunk: every element the region reads from it lies there.
func (a *array) chunkSpan(idx, lo, hi, strides []int) (b0, b1 int) {
	first, last := 0, 0
	for d := range idx {
		org := idx[d] * a.m.chunks[d]
		first += (max(lo[d], org) - org) * strides[d]
		last += (min(hi[d], org+a.m.chunks[d]) - 1 - org) * strides[d]
	}
	size := a.m.codec.dt.size
	return first * size, (last + 1) * size
}

// partChunk returns chunk idx (strides: the grid's chunk strides) with at
// least its bytes [b0, b1) decoded (nil when the chunk is missing: all
// fill), and a release to call once the caller is done with it. Its data is a pooled buffer of the whole
// chunk's size whose bytes outside the blocks holding [b0, b1) are
// undefined.
func (a *array) partChunk(idx []int, b0, b1 int, strides []int) (*chunkData, func(), error) {
	path := joinLoc(a.m.dir, a.m.key(idx))
	size := prod(a.m.chunks) * a.m.codec.dt.size
	// The stored chunk is read at most once per call, when a block is
	// not cached (or nothing is).
	var (
		frame   bloscFrame
		fetched bool
		missing bool
	)
	fetch := func() error {
		if fetched {
			return nil
		}
		fetched = true
		raw, err := a.src.st.get(a.src.ctx, path)
		if errors.Is(err, fs.ErrNotExist) {
			missing = true
			return nil
		}
		if err != nil {
			return err
		}
		if len(raw) > maxChunkBytes {
			return fmt.Errorf("chunk %s: %d bytes", path, len(raw))
		}
		if frame, err = parseBlosc(raw, size); err != nil {
			return fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err)
		}
		return nil
	}
	// zstdSlack past the chunk: its last block decodes in place too.
	buf := getBuf(size + zstdSlack)[:size]
	release := func() { putBuf(buf) }
	fail := func(err error) (*chunkData, func(), error) {
		release()
		return nil, nil, err
	}
	cd := &chunkData{data: buf, shape: a.m.chunks, strides: strides}

	if a.cache.max == 0 {
		// Nothing is kept: decode the blocks straight into buf.
		if _, local := a.src.st.(fileStore); local {
			// A local file's ranges cost no round trip: read its layout,
			// then the needed blocks' bytes only.
			found, err := a.readLocalBlocks(path, size, b0, b1, buf)
			if err != nil {
				return fail(err)
			}
			if !found {
				release()
				return nil, func() {}, nil
			}
			return cd, release, nil
		}
		if err := fetch(); err != nil {
			return fail(err)
		}
		if missing {
			release()
			return nil, func() {}, nil
		}
		j0, j1 := frame.blocksOf(b0, b1)
		tmp := getBuf(min(frame.blocksize, frame.nbytes) + zstdSlack)
		defer putBuf(tmp)
		if err := frame.decodeBlocks(j0, j1, buf, tmp); err != nil {
			return fail(fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err))
		}
		return cd, release, nil
	}

	// The chunk's header (its block layout), cached on its own, says
	// which blocks hold [b0, b1); each block is cached as decoded bytes.
	// A read fetches only the byte range of the blocks it misses (one
	// pread, or one Range GET from an http store) — except the first
	// read of a chunk from an http store, which fetches all of it with
	// its layout (one round trip, not two).
	_, local := a.src.st.(fileStore)
	hv, err := a.cache.get(path+"#blosc", func() (any, int64, error) {
		if local {
			// Only the layout: the blocks' bytes are read by range
			// below, as the uncached read does.
			l, err := a.openLocal(path)
			if err != nil {
				return nil, 0, err
			}
			if l == nil {
				return (*bloscFrame)(nil), 64, nil
			}
			defer l.close()
			h, err := l.head(size)
			if err != nil {
				return nil, 0, err
			}
			return &h, 64 + 8*int64(len(h.starts)), nil
		}
		if err := fetch(); err != nil {
			return nil, 0, err
		}
		if missing {
			return (*bloscFrame)(nil), 64, nil
		}
		h := frame
		h.src = nil // the layout only: the bytes are not kept
		return &h, 64 + 8*int64(len(h.starts)), nil
	})
	if err != nil {
		return fail(err)
	}
	head := hv.(*bloscFrame)
	if head == nil {
		release()
		return nil, func() {}, nil
	}
	j0, j1 := head.blocksOf(b0, b1)
	var (
		win        bloscFrame // the bytes of blocks [wj0, wj1), read by range
		wj0, wj1   int
		haveWindow bool
		windows    []*[]byte // pooled windows of local reads, back when done
	)
	defer func() {
		for _, w := range windows {
			putWindow(w)
		}
	}()
	source := func(j int) (bloscFrame, error) {
		if fetched {
			if missing || frame.blocksize != head.blocksize || frame.nbytes != head.nbytes || frame.flags != head.flags {
				return frame, fmt.Errorf("chunk %s (array %s): changed while being read (its blosc header differs from the one read before)", path, a.m.file)
			}
			return frame, nil
		}
		if haveWindow && j >= wj0 && j < wj1 {
			return win, nil
		}
		// The blocks from j to the last this read needs: some may be
		// cached already, but one request beats one per block.
		lo, hi := head.window(j, j1)
		var b []byte
		if local {
			l, err := a.openLocal(path)
			if err == nil && l == nil {
				err = fs.ErrNotExist
			}
			if err != nil {
				return win, fmt.Errorf("chunk %s (array %s): blocks %d to %d: %w", path, a.m.file, j, j1-1, err)
			}
			if l.size < head.cbytes {
				l.close()
				return win, fmt.Errorf("chunk %s (array %s): changed while being read (%d bytes, its blosc header says %d)", path, a.m.file, l.size, head.cbytes)
			}
			wb, err := l.read(lo, hi-lo)
			l.close()
			if err != nil {
				return win, err
			}
			windows = append(windows, wb)
			b = *wb
		} else {
			var err error
			b, _, err = a.src.st.getRange(a.src.ctx, path, int64(lo), int64(hi-lo))
			if err == nil && len(b) != hi-lo {
				err = fmt.Errorf("%d of %d bytes at %d: %w", len(b), hi-lo, lo, io.ErrUnexpectedEOF)
			}
			if err != nil {
				return win, fmt.Errorf("chunk %s (array %s): blocks %d to %d: %w", path, a.m.file, j, j1-1, err)
			}
		}
		win, wj0, wj1, haveWindow = head.withWindow(b, lo), j, j1, true
		return win, nil
	}
	for j := j0; j < j1; j++ {
		lo, hi := head.blockSpan(j)
		err := a.cache.use(path+"#b"+strconv.Itoa(j), func() (any, int64, error) {
			f, err := source(j)
			if err != nil {
				return nil, 0, err
			}
			blk := newBlock(hi - lo)
			tmp := getBuf(hi - lo + zstdSlack)
			defer putBuf(tmp)
			if err := f.decodeBlock(j, blk.b, tmp); err != nil {
				blk.recycle()
				return nil, 0, fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err)
			}
			return blk, blk.cost(), nil
		}, func(v any) {
			copy(buf[lo:hi], v.(*block).b)
		})
		if err != nil {
			return fail(err)
		}
	}
	return cd, release, nil
}

// headBytes is the first read of a local chunk file: the blosc header
// and the starts of up to 1020 blocks (a 128³ uint8 chunk in 256 KiB
// blocks has 8), so the layout takes one pread.
const headBytes = 4096

// localChunk is a local chunk file open for range reads into pooled
// windows (getWindow): a local range costs no round trip, so only the
// layout and the blocks a read needs are read, never the whole file.
type localChunk struct {
	f    *os.File
	size int // the file's size
	wrap func(error) error
}

// openLocal opens the local chunk file at path; nil when it does not
// exist (a missing chunk).
func (a *array) openLocal(path string) (*localChunk, error) {
	if err := a.src.ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l := &localChunk{f: f, wrap: func(err error) error { return fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err) }}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, l.wrap(err)
	}
	if st.Size() > maxChunkBytes {
		f.Close()
		return nil, fmt.Errorf("chunk %s: %d bytes", path, st.Size())
	}
	l.size = int(st.Size())
	return l, nil
}

func (l *localChunk) close() { l.f.Close() }

// read reads n bytes at off into a pooled window (putWindow it).
func (l *localChunk) read(off, n int) (*[]byte, error) {
	b := getWindow(n)
	if _, err := l.f.ReadAt(*b, int64(off)); err != nil {
		putWindow(b)
		return nil, l.wrap(fmt.Errorf("%d bytes at %d: %w", n, off, err))
	}
	return b, nil
}

// head reads the file's blosc layout (parseBloscHead; src nil) for a
// chunk of size decoded bytes: one pread, two when its block starts
// reach past headBytes.
func (l *localChunk) head(size int) (bloscFrame, error) {
	hb, err := l.read(0, min(headBytes, l.size))
	if err != nil {
		return bloscFrame{}, err
	}
	frame, need, err := parseBloscHead(*hb, l.size, size)
	if err == nil && need > 0 {
		putWindow(hb)
		if hb, err = l.read(0, need); err != nil {
			return bloscFrame{}, err
		}
		frame, _, err = parseBloscHead(*hb, l.size, size)
	}
	putWindow(hb)
	if err != nil {
		return bloscFrame{}, l.wrap(err)
	}
	return frame, nil
}

// readLocalBlocks decodes into buf (the chunk's decoded bytes) the blocks
// holding the decoded bytes [b0, b1) of the chunk file at path, reading
// only its layout and those blocks' byte range. found is false when the
// file does not exist (a missing chunk).
func (a *array) readLocalBlocks(path string, size, b0, b1 int, buf []byte) (found bool, err error) {
	l, err := a.openLocal(path)
	if l == nil || err != nil {
		return false, err
	}
	defer l.close()
	frame, err := l.head(size)
	if err != nil {
		return true, err
	}
	j0, j1 := frame.blocksOf(b0, b1)
	lo, hi := frame.window(j0, j1)
	wb, err := l.read(lo, hi-lo)
	if err != nil {
		return true, err
	}
	defer putWindow(wb)
	tmp := getBuf(min(frame.blocksize, frame.nbytes) + zstdSlack)
	defer putBuf(tmp)
	if err := frame.withWindow(*wb, lo).decodeBlocks(j0, j1, buf, tmp); err != nil {
		return true, l.wrap(err)
	}
	return true, nil
}

// Byte windows read from chunk files, of varying sizes: pooled by size
// class (powers of two from 64 KiB), so that a Get finds a window that
// fits. (One pool for all sizes, returning a too-small window and
// allocating a new one, held a growing pile of windows between
// collections: 60–90 MiB live, and a peak RSS of 150–350 MiB, in the
// two-thread OME-Zarr benchmark that needs about 20.)
var windowPools [windowClasses]sync.Pool // class c: *[]byte of capacity 1<<(windowMinShift+c)

// windowClasses covers windows up to maxChunkBytes (a chunk file holds at
// most about that); a larger request is allocated, not pooled.
const windowClasses = 30 - windowMinShift + 1 // maxChunkBytes = 1 << 30

const windowMinShift = 16

// windowClass returns the size class of a window of n bytes.
func windowClass(n int) int {
	if n <= 1<<windowMinShift {
		return 0
	}
	return mbits.Len(uint(n-1)) - windowMinShift
}

func getWindow(n int) *[]byte {
	c := windowClass(n)
	if c >= len(windowPools) {
		b := make([]byte, n)
		return &b
	}
	if b, ok := windowPools[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(windowMinShift+c))
	return &b
}

func putWindow(b *[]byte) {
	if c := windowClass(cap(*b)); c < len(windowPools) && cap(*b) == 1<<(windowMinShift+c) {
		windowPools[c].Put(b)
	}
}

// block is a decoded blosc block the cache holds, in blockmem.go's memory,
// which it goes back to when the cache drops it.
type block struct{ b []byte }

// newBlock's memory reaches zstdSlack bytes past a block of at least
// minSlackBlock bytes, so that its zstd streams decode in place
// (decodeBlock's scratch capacity); a smaller block takes the copy, as
// the slack would cost it a whole page more of the cache (blocks are
// mapped in pages).
func newBlock(n int) *block {
	if n < minSlackBlock {
		return &block{getBlock(n)}
	}
	return &block{getBlock(n + zstdSlack)[:n]}
}

// minSlackBlock is the smallest block given zstdSlack: a page more is at
// most 1/16 of it.
const minSlackBlock = 64 << 10

func (b *block) slack() int {
	if len(b.b) < minSlackBlock {
		return 0
	}
	return zstdSlack
}

func (b *block) recycle() { putBlock(b.b[:len(b.b)+b.slack()]) }

// cost is what the block takes of the cache's bound: its bytes, slack
// included, and 64 of bookkeeping. (mapBlock maps whole pages: a block
// holds up to a page more than it counts, at most 1/16 of a slacked one.)
func (b *block) cost() int64 { return int64(len(b.b)+b.slack()) + 64 }

// Buffers by size for a chunk being assembled or a shuffled block being
// decoded: a few per reading goroutine, reused rather than allocated
// (and zeroed) for every chunk a patch touches.
var bufPools sync.Map // int → *sync.Pool of *[]byte

func getBuf(n int) []byte {
	p, _ := bufPools.LoadOrStore(n, &sync.Pool{})
	if b, ok := p.(*sync.Pool).Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, n)
}

func putBuf(b []byte) {
	if cap(b) == 0 {
		return
	}
	b = b[:cap(b)]
	p, _ := bufPools.LoadOrStore(len(b), &sync.Pool{})
	p.(*sync.Pool).Put(&b)
}
