package zarr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"
)

// array reads regions of one stored array through its file's cache.
type array struct {
	m     *arrayMeta
	cache *chunkCache
	src   *source // where its chunks are read
}

// chunkData is a decoded chunk: elements of dt in data, element p (chunk
// coordinates) at Σ p[d]·strides[d]; shape is what the chunk stores (an
// N5 block at the array's edge may be cut to the array). A nil chunkData
// is a missing chunk: all fill.
type chunkData struct {
	data    []byte
	shape   []int
	strides []int
}

func prod(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}

// decode turns a chunk's stored bytes into its elements. shape is the
// chunk's (the stored array's, before perm) shape.
func (c chunkCodec) decode(raw []byte, shape []int) (*chunkData, error) {
	size := prod(shape) * c.dt.size
	b := raw
	for i, bc := range c.bytes {
		exact := i == len(c.bytes)-1
		lim := size
		if !exact {
			lim = maxChunkBytes
		}
		var err error
		if b, err = bc.decode(b, lim, exact); err != nil {
			return nil, err
		}
	}
	if len(b) != size {
		return nil, fmt.Errorf("%d bytes, the chunk's shape %v of %v holds %d", len(b), shape, c.dt, size)
	}
	return &chunkData{data: b, shape: shape, strides: c.strides(shape)}, nil
}

// strides are the element strides of a decoded chunk of shape, in array
// axis order: stored axis i (C order) is array axis perm[i].
func (c chunkCodec) strides(shape []int) []int {
	n := len(shape)
	strides := make([]int, n)
	st := 1
	for i := n - 1; i >= 0; i-- {
		strides[c.perm[i]] = st
		st *= shape[c.perm[i]]
	}
	return strides
}

// chunkShape is the full chunk shape (the grid's).
func (a *array) chunkOrigin(idx []int) []int {
	o := make([]int, len(idx))
	for i := range idx {
		o[i] = idx[i] * a.m.chunks[i]
	}
	return o
}

// chunk returns chunk idx of the read grid, decoded, or nil when missing.
func (a *array) chunk(idx []int) (*chunkData, error) {
	if a.m.shard != nil {
		return a.innerChunk(idx)
	}
	rel := a.m.key(idx)
	path := joinLoc(a.m.dir, rel)
	v, err := a.cache.get(path, func() (any, int64, error) {
		raw, err := a.src.st.get(a.src.ctx, path)
		if errors.Is(err, fs.ErrNotExist) {
			return (*chunkData)(nil), 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if len(raw) > maxChunkBytes {
			return nil, 0, fmt.Errorf("chunk %s: %d bytes", path, len(raw))
		}
		shape := a.m.chunks
		if a.m.n5 {
			if raw, shape, err = a.n5Block(raw, idx); err != nil {
				return nil, 0, fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err)
			}
		}
		c, err := a.m.codec.decode(raw, shape)
		if err != nil {
			return nil, 0, fmt.Errorf("chunk %s (array %s): %w", path, a.m.file, err)
		}
		return c, int64(len(c.data)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkData), nil
}

// n5Block reads an N5 block header: mode (0 default), number of
// dimensions, the block's dimensions (fastest first; an edge block may be
// cut to the array), then the compressed data.
func (a *array) n5Block(raw []byte, idx []int) ([]byte, []int, error) {
	n := len(a.m.shape)
	if len(raw) < 4 {
		return nil, nil, fmt.Errorf("N5 block header: %d bytes", len(raw))
	}
	mode := binary.BigEndian.Uint16(raw)
	nd := int(binary.BigEndian.Uint16(raw[2:]))
	if mode != 0 {
		return nil, nil, fmt.Errorf("N5 block mode %d is not read (0, default, is)", mode)
	}
	if nd != n || len(raw) < 4+4*nd {
		return nil, nil, fmt.Errorf("N5 block header: %d dimensions, the dataset %d", nd, n)
	}
	shape := make([]int, n)
	for i := range n {
		d := int(binary.BigEndian.Uint32(raw[4+4*i:]))
		j := n - 1 - i
		need := min(a.m.chunks[j], a.m.shape[j]-idx[j]*a.m.chunks[j])
		if d < need || d > a.m.chunks[j] {
			return nil, nil, fmt.Errorf("N5 block dimension %d is %d, want %d to blockSize %d", i, d, need, a.m.chunks[j])
		}
		shape[j] = d
	}
	return raw[4+4*n:], shape, nil
}

// innerChunk reads inner chunk idx of a sharded array: the shard's index
// (cached), then only that chunk's bytes.
func (a *array) innerChunk(idx []int) (*chunkData, error) {
	s := a.m.shard
	n := len(idx)
	sidx, local := make([]int, n), 0
	for i := range idx {
		sidx[i] = idx[i] / s.perShard[i]
		local = local*s.perShard[i] + idx[i]%s.perShard[i]
	}
	path := joinLoc(a.m.dir, s.shardKey(sidx))
	iv, err := a.cache.get(path+"#index", func() (any, int64, error) {
		// One (Range) read of the index: the shard's first or last
		// bytes, and its size to check the index's offsets against.
		ib := s.indexBytes()
		at := int64(0)
		if !s.atStart {
			at = -1 // the last ib bytes
		}
		b, size, err := a.src.st.getRange(a.src.ctx, path, at, int64(ib))
		if errors.Is(err, fs.ErrNotExist) {
			return shardIndex(nil), 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		if size < int64(ib) {
			return nil, 0, fmt.Errorf("shard %s: %d bytes, shorter than its %d-byte index (array %s)", path, size, ib, a.m.file)
		}
		if len(b) != ib {
			return nil, 0, fmt.Errorf("shard %s: index: %d of %d bytes", path, len(b), ib)
		}
		x, err := s.parseIndex(b, size)
		if err != nil {
			return nil, 0, fmt.Errorf("shard %s (array %s): %w", path, a.m.file, err)
		}
		return x, int64(len(x) * 8), nil
	})
	if err != nil {
		return nil, err
	}
	index := iv.(shardIndex)
	if index == nil {
		return nil, nil
	}
	off, size := index[2*local], index[2*local+1]
	if off == ^uint64(0) && size == ^uint64(0) {
		return nil, nil
	}
	key := fmt.Sprintf("%s#%d", path, local)
	v, err := a.cache.get(key, func() (any, int64, error) {
		raw, _, err := a.src.st.getRange(a.src.ctx, path, int64(off), int64(size))
		if err == nil && uint64(len(raw)) != size {
			err = fmt.Errorf("%d of %d bytes: %w", len(raw), size, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("shard %s inner chunk %d: %w", path, local, err)
		}
		c, err := s.codec.decode(raw, a.m.chunks)
		if err != nil {
			return nil, 0, fmt.Errorf("shard %s inner chunk %d (array %s): %w", path, local, a.m.file, err)
		}
		return c, int64(len(c.data)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkData), nil
}

// read fills dst with the region [lo, hi) of the array as float32: the
// element at p goes to dst[Σ (p[d]−lo[d])·dstStrides[d]]. The chunks the
// region overlaps are decoded concurrently.
func (a *array) read(lo, hi []int, dst []float32, dstStrides []int) error {
	n := len(lo)
	clo, chi := make([]int, n), make([]int, n)
	total := 1
	for d := range n {
		if lo[d] >= hi[d] {
			return nil
		}
		clo[d] = lo[d] / a.m.chunks[d]
		chi[d] = (hi[d]-1)/a.m.chunks[d] + 1
		total *= chi[d] - clo[d]
	}
	if total == 1 {
		return a.readChunk(clo, lo, hi, dst, dstStrides)
	}
	// A producer hands out chunk indices; it stops at the first error.
	idxs := make(chan []int)
	stop := make(chan struct{})
	go func() {
		defer close(idxs)
		forEach(clo, chi, func(p []int) bool {
			select {
			case idxs <- append([]int(nil), p...):
				return true
			case <-stop:
				return false
			}
		})
	}()
	// Local chunks are decoded a core at a time; remote ones are
	// fetched as many at a time as the store allows.
	workers := min(total, max(runtime.GOMAXPROCS(0), a.src.workers))
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idx := range idxs {
				select {
				case <-stop:
					continue // drain: an error ended the read
				default:
				}
				if err := a.readChunk(idx, lo, hi, dst, dstStrides); err != nil {
					once.Do(func() { firstErr = err; close(stop) })
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// readChunk copies the part of chunk idx inside [lo, hi) to dst,
// decoding only the blosc blocks that part lies in where the array's
// chunks allow it (partial.go).
func (a *array) readChunk(idx, lo, hi []int, dst []float32, dstStrides []int) error {
	if a.bloscParts() {
		strides := a.m.codec.strides(a.m.chunks)
		b0, b1 := a.chunkSpan(idx, lo, hi, strides)
		c, release, err := a.partChunk(idx, b0, b1, strides)
		if err != nil {
			return err
		}
		defer release()
		return a.copyChunk(c, idx, lo, hi, dst, dstStrides)
	}
	c, err := a.chunk(idx)
	if err != nil {
		return err
	}
	return a.copyChunk(c, idx, lo, hi, dst, dstStrides)
}

// forEach calls f with every index in [lo, hi), the last axis fastest,
// until f returns false.
func forEach(lo, hi []int, f func(p []int) bool) {
	p := append([]int(nil), lo...)
	for {
		if !f(p) {
			return
		}
		d := len(p) - 1
		for ; d >= 0; d-- {
			p[d]++
			if p[d] < hi[d] {
				break
			}
			p[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}

// copyChunk copies the part of chunk idx inside [lo, hi) to dst, a run
// along the last axis at a time.
func (a *array) copyChunk(c *chunkData, idx, lo, hi []int, dst []float32, dstStrides []int) error {
	n := len(idx)
	org := a.chunkOrigin(idx)
	ilo, ihi := make([]int, n), make([]int, n)
	for d := range n {
		ilo[d] = max(lo[d], org[d])
		ihi[d] = min(hi[d], org[d]+a.m.chunks[d])
		if c != nil && ihi[d]-org[d] > c.shape[d] {
			return fmt.Errorf("chunk %s of %s: holds %v, the region needs %d along axis %d", a.m.key(idx), a.m.dir, c.shape, ihi[d]-org[d], d)
		}
	}
	L := n - 1
	run := ihi[L] - ilo[L]
	outer := append([]int(nil), ihi...)
	outer[L] = ilo[L] + 1
	forEach(ilo, outer, func(p []int) bool {
		do, so := 0, 0
		for d := range n {
			do += (p[d] - lo[d]) * dstStrides[d]
			if c != nil {
				so += (p[d] - org[d]) * c.strides[d]
			}
		}
		if c == nil {
			for i := range run {
				dst[do+i*dstStrides[L]] = a.m.fill
			}
			return true
		}
		a.m.codec.dt.convert(dst[do:], dstStrides[L], c.data, so, c.strides[L], run)
		return true
	})
	return nil
}

// name is the array's directory, for errors.
func (a *array) name() string { return strings.TrimSuffix(a.m.dir, "/") }
