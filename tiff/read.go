package tiff

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/image/tiff/lzw"

	"github.com/voxtrain/voxtrain/internal/rawvol"
	"github.com/voxtrain/voxtrain/volume"
)

type readerAt = io.ReaderAt

// ReadRegion implements volume.File: it decodes only the strips or tiles
// of the box's pages that overlap the box.
func (t *File) ReadRegion(box volume.Box, dst [][]float32) error {
	if len(dst) != t.hdr.Channels {
		return t.r.errf("%d destinations for %d channels", len(dst), t.hdr.Channels)
	}
	if box.Empty() || !volume.Whole(t.hdr.Shape).Contains(box) {
		return t.r.errf("region %v outside the volume %v", box, t.hdr.Shape)
	}
	if err := volume.CheckInMemory(box.Size(), t.hdr.Channels); err != nil {
		return fmt.Errorf("tiff: %s: region %v..%v: %w", t.r.name, box.Lo, box.Hi, err)
	}
	for _, d := range dst {
		if len(d) != box.Voxels() {
			return t.r.errf("a destination of %d values for a region of %d", len(d), box.Voxels())
		}
	}
	sz := box.Size()
	W, H := t.hdr.Shape[2], t.hdr.Shape[1]
	across := (W + t.tileW - 1) / t.tileW
	size := t.typ.Size()
	row := make([]float32, t.tileW*t.spp)
	var sc scratch
	pageChans := 1 // channels stored as pages rather than samples
	if t.spp == 1 {
		pageChans = t.hdr.Channels
	}
	for c := range pageChans {
		for z := box.Lo[0]; z < box.Hi[0]; z++ {
			pi := t.pageOf(c, z)
			p := t.pages[pi]
			for ty := box.Lo[1] / t.tileH; ty*t.tileH < box.Hi[1]; ty++ {
				for tx := box.Lo[2] / t.tileW; tx*t.tileW < box.Hi[2]; tx++ {
					ci := ty*across + tx
					rows := t.tileH
					if !t.tiled {
						rows = min(t.tileH, H-ty*t.tileH)
					}
					// The part of the chunk inside the box.
					y0, y1 := max(box.Lo[1], ty*t.tileH), min(box.Hi[1], ty*t.tileH+rows)
					x0, x1 := max(box.Lo[2], tx*t.tileW), min(box.Hi[2], (tx+1)*t.tileW)
					// The chunk's bytes from (y0, x0) to (y1−1, x1): an
					// uncompressed one is read from there only.
					lo := ((y0-ty*t.tileH)*t.tileW + (x0 - tx*t.tileW)) * t.spp * size
					hi := ((y1-1-ty*t.tileH)*t.tileW + (x1 - tx*t.tileW)) * t.spp * size
					chunk, err := t.chunk(p, ci, rows, lo, hi, &sc)
					if err != nil {
						return fmt.Errorf("%w (page %d, chunk %d)", err, pi, ci)
					}
					for y := y0; y < y1; y++ {
						src := chunk[(y-y0)*t.tileW*t.spp*size:]
						n := (x1 - x0) * t.spp
						o := ((z-box.Lo[0])*sz[1]+(y-box.Lo[1]))*sz[2] + (x0 - box.Lo[2])
						if t.spp == 1 {
							rawvol.Decode(dst[c][o:o+n], src, t.typ, t.r.bo)
							continue
						}
						rawvol.Decode(row[:n], src, t.typ, t.r.bo)
						for x := 0; x < x1-x0; x++ {
							for s := range t.spp {
								dst[s][o+x] = row[x*t.spp+s]
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// ReadLabels implements volume.File: every voxel of the box must be an
// integer in 0..255.
func (t *File) ReadLabels(box volume.Box, dst []uint8) error {
	if t.hdr.Channels != 1 {
		return t.r.errf("a label map with %d channels, want one", t.hdr.Channels)
	}
	if len(dst) != box.Voxels() {
		return t.r.errf("a destination of %d labels for a region of %d", len(dst), box.Voxels())
	}
	if err := volume.CheckInMemory(box.Size(), 1); err != nil {
		return fmt.Errorf("tiff: %s: region %v..%v: %w", t.r.name, box.Lo, box.Hi, err)
	}
	f := make([]float32, len(dst))
	if err := t.ReadRegion(box, [][]float32{f}); err != nil {
		return err
	}
	return volume.ToLabels(dst, f, t.r.name)
}

// scratch holds one region read's buffers, reused from chunk to chunk.
type scratch struct {
	raw, out, pred []byte
	zr             io.ReadCloser // a deflate reader, reset for each chunk
}

// maxSharedZstd bounds the chunks the shared zstd decoder decodes whole
// (its memory bound); a larger one is streamed by a decoder of its own.
const maxSharedZstd = 64 << 20

// sharedZstd decodes zstd chunks of up to maxSharedZstd bytes; DecodeAll
// may be called concurrently, and one decoder spares each chunk a new
// decoder's window buffers.
// (NewReader fails only for bad options, and these are constant.)
var sharedZstd, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxSharedZstd+1<<20))

// chunk returns the bytes lo..hi of strip or tile i of page p (rows rows
// of tileW pixels), decoded, in sc's storage (valid until the next call).
// An uncompressed chunk is read from lo to hi only; a compressed one is
// decoded whole.
func (t *File) chunk(p page, i, rows, lo, hi int, sc *scratch) ([]byte, error) {
	size := t.typ.Size()
	want := rows * t.tileW * t.spp * size
	if t.comp == 1 {
		if p.counts[i] < uint64(want) {
			return nil, t.r.errf("uncompressed chunk of %d bytes, want %d", p.counts[i], want)
		}
		if t.pred == 1 {
			var err error
			sc.raw, err = t.r.readInto(sc.raw, p.offsets[i]+uint64(lo), uint64(hi-lo), "chunk")
			return sc.raw, err
		}
		// With a predictor, the chunk is read whole: its rows are undone
		// from their first pixel.
	}
	var err error
	sc.raw, err = t.r.readInto(sc.raw, p.offsets[i], p.counts[i], "chunk")
	if err != nil {
		return nil, err
	}
	raw := sc.raw
	var out []byte
	switch {
	case t.comp == 1:
		out = raw[:want]
	case t.comp == 50000 && want <= maxSharedZstd:
		// A frame that says it holds more than the chunk is refused
		// before the decoder sizes its output by it.
		var h zstd.Header
		if h.Decode(raw) == nil && h.HasFCS && h.FrameContentSize > uint64(want) {
			return nil, t.r.errf("zstd chunk: frame of %d bytes, want %d", h.FrameContentSize, want)
		}
		if cap(sc.out) < want {
			sc.out = make([]byte, 0, want)
		}
		out, err = sharedZstd.DecodeAll(raw, sc.out[:0])
		if cap(out) > cap(sc.out) {
			sc.out = out[:0]
		}
		if err != nil {
			return nil, t.r.errf("zstd chunk: %v", err)
		}
	case t.comp == 8 || t.comp == 32946:
		if sc.zr == nil {
			sc.zr, err = zlib.NewReader(bytes.NewReader(raw))
		} else {
			err = sc.zr.(zlib.Resetter).Reset(bytes.NewReader(raw), nil)
		}
		if err != nil {
			sc.zr = nil
			return nil, t.r.errf("deflate chunk: %v", err)
		}
		if cap(sc.out) < want {
			sc.out = make([]byte, want)
		}
		out = sc.out[:want]
		var n int
		n, err = io.ReadFull(sc.zr, out)
		if err != nil {
			return nil, t.r.errf("deflate chunk: %v (%d bytes of %d)", err, n, want)
		}
	default:
		var dec io.Reader
		switch t.comp {
		case 5:
			lr := lzw.NewReader(bytes.NewReader(raw), lzw.MSB, 8)
			defer lr.Close()
			dec = lr
		case 50000:
			zr, err := zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(want)+1<<20))
			if err != nil {
				return nil, t.r.errf("zstd chunk: %v", err)
			}
			defer zr.Close()
			dec = zr
		case 32773:
			dec = &packBits{src: raw}
		}
		// ReadAll grows with the data decoded: a chunk that claims more
		// than it holds costs no more than it holds.
		out, err = io.ReadAll(io.LimitReader(dec, int64(want)))
		if err != nil && len(out) < want {
			return nil, t.r.errf("compression %d chunk: %v", t.comp, err)
		}
	}
	if len(out) < want {
		return nil, t.r.errf("compression %d chunk decodes to %d bytes, want %d", t.comp, len(out), want)
	}
	out = out[:want]
	switch t.pred {
	case 2:
		t.undoDifferencing(out, rows)
	case 3:
		sc.pred = t.undoFloatPredictor(out, rows, sc.pred)
		out = sc.pred
	}
	return out[lo:hi], nil
}

// undoDifferencing reverses predictor 2: each sample was stored as its
// difference from the same sample of the pixel to its left.
func (t *File) undoDifferencing(b []byte, rows int) {
	n := t.tileW * t.spp
	size := t.typ.Size()
	bo := t.r.bo
	for r := range rows {
		row := b[r*n*size : (r+1)*n*size]
		for i := t.spp; i < n; i++ {
			switch size {
			case 1:
				row[i] += row[i-t.spp]
			case 2:
				bo.PutUint16(row[2*i:], bo.Uint16(row[2*i:])+bo.Uint16(row[2*(i-t.spp):]))
			case 4:
				bo.PutUint32(row[4*i:], bo.Uint32(row[4*i:])+bo.Uint32(row[4*(i-t.spp):]))
			case 8:
				bo.PutUint64(row[8*i:], bo.Uint64(row[8*i:])+bo.Uint64(row[8*(i-t.spp):]))
			}
		}
	}
}

// undoFloatPredictor reverses predictor 3 (Adobe's floating-point
// predictor): per row, the bytes were split into planes, most significant
// first, and then differenced byte by byte.
func (t *File) undoFloatPredictor(b []byte, rows int, buf []byte) []byte {
	n := t.tileW * t.spp
	size := t.typ.Size()
	if cap(buf) < len(b) {
		buf = make([]byte, len(b))
	}
	out := buf[:len(b)]
	le := t.r.bo == binary.LittleEndian
	for r := range rows {
		row := b[r*n*size : (r+1)*n*size]
		for i := t.spp; i < len(row); i++ {
			row[i] += row[i-t.spp]
		}
		o := out[r*n*size:]
		for i := range n {
			for k := range size { // k = 0: most significant
				j := i*size + k
				if le {
					j = i*size + size - 1 - k
				}
				o[j] = row[k*n+i]
			}
		}
	}
	return out
}

// packBits decodes PackBits (Apple's run-length code).
type packBits struct {
	src []byte
	run []byte // pending output
}

func (p *packBits) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if len(p.run) > 0 {
			k := copy(b[n:], p.run)
			p.run = p.run[k:]
			n += k
			continue
		}
		if len(p.src) == 0 {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		h := int8(p.src[0])
		p.src = p.src[1:]
		switch {
		case h >= 0: // h+1 literal bytes
			k := min(int(h)+1, len(p.src))
			p.run, p.src = p.src[:k], p.src[k:]
		case h != -128: // the next byte 1−h times
			if len(p.src) == 0 {
				return n, io.ErrUnexpectedEOF
			}
			k := 1 - int(h)
			k = min(k, len(b)-n)
			for i := range k {
				b[n+i] = p.src[0]
			}
			n += k
			if rest := 1 - int(h) - k; rest > 0 {
				p.run = bytes.Repeat(p.src[:1], rest)
			}
			p.src = p.src[1:]
		}
	}
	return n, nil
}
