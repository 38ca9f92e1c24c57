package tiff

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Tags read (TIFF 6.0, BigTIFF, and the ones tifffile writes).
const (
	tNewSubfileType  = 254
	tImageWidth      = 256
	tImageLength     = 257
	tBitsPerSample   = 258
	tCompression     = 259
	tImageDesc       = 270
	tStripOffsets    = 273
	tSamplesPerPixel = 277
	tRowsPerStrip    = 278
	tStripByteCounts = 279
	tXResolution     = 282
	tYResolution     = 283
	tPlanarConfig    = 284
	tPredictor       = 317
	tTileWidth       = 322
	tTileLength      = 323
	tTileOffsets     = 324
	tTileByteCounts  = 325
	tSampleFormat    = 339
)

var tagNames = map[uint16]string{
	tNewSubfileType: "NewSubfileType", tImageWidth: "ImageWidth", tImageLength: "ImageLength",
	tBitsPerSample: "BitsPerSample", tCompression: "Compression", tImageDesc: "ImageDescription",
	tStripOffsets: "StripOffsets", tSamplesPerPixel: "SamplesPerPixel", tRowsPerStrip: "RowsPerStrip",
	tStripByteCounts: "StripByteCounts", tXResolution: "XResolution", tYResolution: "YResolution",
	tPlanarConfig: "PlanarConfiguration", tPredictor: "Predictor", tTileWidth: "TileWidth",
	tTileLength: "TileLength", tTileOffsets: "TileOffsets", tTileByteCounts: "TileByteCounts",
	tSampleFormat: "SampleFormat",
}

// typeSize is the size of a TIFF field type's value (0: unknown type).
func typeSize(t uint16) int {
	switch t {
	case 1, 2, 6, 7: // BYTE, ASCII, SBYTE, UNDEFINED
		return 1
	case 3, 8: // SHORT, SSHORT
		return 2
	case 4, 9, 11, 13: // LONG, SLONG, FLOAT, IFD
		return 4
	case 5, 10, 12, 16, 17, 18: // RATIONAL, SRATIONAL, DOUBLE, LONG8, SLONG8, IFD8
		return 8
	}
	return 0
}

// entry is one IFD entry, its value still in the file.
type entry struct {
	typ   uint16
	count uint64
	raw   []byte // the value when it fits in the entry
	off   uint64 // else its offset
}

// reader reads IFDs from a TIFF file.
type reader struct {
	r    io.ReaderAt
	size int64
	bo   binary.ByteOrder
	big  bool
	name string
}

func (r *reader) errf(format string, a ...any) error {
	return fmt.Errorf("tiff: %s: %s", r.name, fmt.Sprintf(format, a...))
}

// readAt reads n bytes at off, which must lie in the file.
func (r *reader) readAt(off uint64, n uint64, what string) ([]byte, error) {
	if off > uint64(r.size) || n > uint64(r.size)-off {
		return nil, r.errf("%s: %d bytes at offset %d past the end of the %d-byte file", what, n, off, r.size)
	}
	b := make([]byte, n)
	if _, err := r.r.ReadAt(b, int64(off)); err != nil {
		return nil, r.errf("%s: %v", what, err)
	}
	return b, nil
}

// readInto is readAt into buf's storage (grown when short).
func (r *reader) readInto(buf []byte, off uint64, n uint64, what string) ([]byte, error) {
	if off > uint64(r.size) || n > uint64(r.size)-off {
		return buf, r.errf("%s: %d bytes at offset %d past the end of the %d-byte file", what, n, off, r.size)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	b := buf[:n]
	if _, err := r.r.ReadAt(b, int64(off)); err != nil {
		return buf, r.errf("%s: %v", what, err)
	}
	return b, nil
}

// ifd reads the IFD at off: its entries and the next IFD's offset.
func (r *reader) ifd(off uint64) (map[uint16]entry, uint64, error) {
	cs, es, ns := uint64(2), uint64(12), uint64(4)
	if r.big {
		cs, es, ns = 8, 20, 8
	}
	b, err := r.readAt(off, cs, "IFD")
	if err != nil {
		return nil, 0, err
	}
	var n uint64
	if r.big {
		n = r.bo.Uint64(b)
	} else {
		n = uint64(r.bo.Uint16(b))
	}
	if n > uint64(r.size)/es {
		return nil, 0, r.errf("IFD at %d: %d entries past the end of the file", off, n)
	}
	b, err = r.readAt(off+cs, n*es+ns, "IFD")
	if err != nil {
		return nil, 0, err
	}
	m := make(map[uint16]entry, n)
	inline := es - 4 - 4 // classic: 4 bytes of value; BigTIFF: 8
	if r.big {
		inline = 8
	}
	for i := range n {
		e := b[i*es:]
		tag := r.bo.Uint16(e)
		en := entry{typ: r.bo.Uint16(e[2:])}
		var v []byte
		if r.big {
			en.count, v = r.bo.Uint64(e[4:]), e[12:20]
		} else {
			en.count, v = uint64(r.bo.Uint32(e[4:])), e[8:12]
		}
		sz := uint64(typeSize(en.typ))
		if sz == 0 {
			continue // unknown type: a tag this reader does not need
		}
		if en.count > uint64(r.size) {
			return nil, 0, r.errf("tag %d: %d values, more than the file holds", tag, en.count)
		}
		if en.count*sz <= inline {
			en.raw = v[:en.count*sz]
		} else if r.big {
			en.off = r.bo.Uint64(v)
		} else {
			en.off = uint64(r.bo.Uint32(v))
		}
		m[tag] = en
	}
	var next uint64
	if r.big {
		next = r.bo.Uint64(b[n*es:])
	} else {
		next = uint64(r.bo.Uint32(b[n*es:]))
	}
	return m, next, nil
}

// value reads an entry's bytes.
func (r *reader) value(tag uint16, e entry) ([]byte, error) {
	if e.raw != nil || e.count == 0 {
		return e.raw, nil
	}
	return r.readAt(e.off, e.count*uint64(typeSize(e.typ)), tagName(tag))
}

func tagName(tag uint16) string {
	if n, ok := tagNames[tag]; ok {
		return n
	}
	return fmt.Sprintf("tag %d", tag)
}

// uints reads an integer tag's values.
func (r *reader) uints(m map[uint16]entry, tag uint16) ([]uint64, error) {
	e, ok := m[tag]
	if !ok {
		return nil, nil
	}
	b, err := r.value(tag, e)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, e.count)
	for i := range out {
		switch e.typ {
		case 1, 7:
			out[i] = uint64(b[i])
		case 3:
			out[i] = uint64(r.bo.Uint16(b[2*i:]))
		case 4, 13:
			out[i] = uint64(r.bo.Uint32(b[4*i:]))
		case 16, 18:
			out[i] = r.bo.Uint64(b[8*i:])
		default:
			return nil, r.errf("%s: type %d is not an unsigned integer", tagName(tag), e.typ)
		}
	}
	return out, nil
}

// uint1 reads a one-value integer tag, def when absent.
func (r *reader) uint1(m map[uint16]entry, tag uint16, def uint64) (uint64, error) {
	v, err := r.uints(m, tag)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return def, nil
	}
	for _, x := range v[1:] {
		if x != v[0] {
			return 0, r.errf("%s: values %v differ per sample", tagName(tag), v)
		}
	}
	return v[0], nil
}

// rational reads a RATIONAL tag's first value (0 when absent or bad).
func (r *reader) rational(m map[uint16]entry, tag uint16) float64 {
	e, ok := m[tag]
	if !ok || e.typ != 5 || e.count < 1 {
		return 0
	}
	b, err := r.value(tag, entry{typ: 5, count: 1, raw: e.raw, off: e.off})
	if err != nil {
		return 0
	}
	num, den := r.bo.Uint32(b), r.bo.Uint32(b[4:])
	if den == 0 {
		return 0
	}
	x := float64(num) / float64(den)
	if math.IsInf(x, 0) {
		return 0
	}
	return x
}

// ascii reads an ASCII tag (at most limit bytes).
func (r *reader) ascii(m map[uint16]entry, tag uint16, limit uint64) string {
	e, ok := m[tag]
	if !ok || e.typ != 2 || e.count > limit {
		return ""
	}
	b, err := r.value(tag, e)
	if err != nil {
		return ""
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return string(b)
}
