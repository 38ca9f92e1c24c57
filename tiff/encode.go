package tiff

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/klauspost/compress/zlib"
)

// The TIFF encoder behind WriteLabels: little-endian, one uint8 page per
// plane, Adobe deflate strips. The file is written front to back, with no
// seeking: each page's strips, then its IFD. An IFD's next-IFD offset
// depends on the size of the next page's compressed strips, so a page is
// compressed before the previous page's IFD is written (one compressed
// page in memory at a time).

// Tags written beyond those the reader reads.
const (
	tPhotometric    = 262
	tResolutionUnit = 296
)

// TIFF field types written.
const (
	typeASCII    = 2
	typeShort    = 3
	typeLong     = 4
	typeRational = 5
	typeLong8    = 16
)

// stripTarget is the uncompressed bytes a strip aims at: small enough
// that a region read decodes little beyond it, large enough that the
// per-strip overhead (offsets, the zlib header) is negligible. tifffile
// and libtiff choose strips of this order.
const stripTarget = 64 << 10

// rowsPerStrip returns the rows of a strip of a page w pixels wide and h
// tall: about stripTarget bytes, at least one row, at most the page.
func rowsPerStrip(w, h int) int {
	return min(max(stripTarget/w, 1), h)
}

// classicLimit is the largest offset or byte count a classic TIFF holds.
const classicLimit = math.MaxUint32

// needsBigTIFF reports whether a stack of the given (D, H, W) shape, in
// strips of rps rows, with an ImageDescription of descLen bytes, could pass
// classic TIFF's 4 GiB (classicSizeBound). The compressed size is known
// only once written, but the header must say before: label maps compress
// far below the bound, yet a stack of about 4 GiB of voxels is written as
// BigTIFF, as tifffile decides from the uncompressed size too.
func needsBigTIFF(shape [3]int, rps, descLen int) bool {
	return classicSizeBound(shape, rps, descLen) > classicLimit
}

// classicSizeBound bounds the size of the classic TIFF encodeLabels
// writes: the worst case is a strip that does not compress, which deflate
// stores in blocks of at most 65535 bytes with 5 bytes of header each,
// plus zlib's 6 bytes (n/256 + 64 bounds that with room to spare).
func classicSizeBound(shape [3]int, rps, descLen int) uint64 {
	d, h, w := uint64(shape[0]), uint64(shape[1]), uint64(shape[2])
	strips := (h + uint64(rps) - 1) / uint64(rps)
	stripBytes := uint64(rps) * w
	perStrip := stripBytes + stripBytes/256 + 64
	// An IFD: its count, 17 entries, the next offset, a strip offset and
	// count per strip, two rationals, and alignment.
	ifd := 2 + 17*12 + 4 + 8*strips + 16 + 8
	return 8 + uint64(descLen) + 2 + d*(strips*perStrip+ifd)
}

// field is one IFD entry to write.
type field struct {
	tag, typ uint16
	count    uint64
	data     []byte // little-endian values
}

// tiffEncoder writes the file to w, counting the bytes written.
type tiffEncoder struct {
	w   io.Writer
	off uint64
	big bool
}

var le = binary.LittleEndian

func (e *tiffEncoder) write(b []byte) error {
	n, err := e.w.Write(b)
	e.off += uint64(n)
	return err
}

// padTo writes zeros up to off (IFDs and their values start on a word
// boundary, as TIFF 6.0 requires).
func (e *tiffEncoder) padTo(off uint64) error {
	if off < e.off {
		return fmt.Errorf("internal: layout at %d, writer at %d", off, e.off)
	}
	return e.write(make([]byte, off-e.off))
}

// header writes the 8-byte (BigTIFF: 16-byte) header.
func (e *tiffEncoder) header(firstIFD uint64) error {
	if !e.big {
		b := le.AppendUint32([]byte{'I', 'I', 42, 0}, uint32(firstIFD))
		return e.write(b)
	}
	b := le.AppendUint64([]byte{'I', 'I', 43, 0, 8, 0, 0, 0}, firstIFD)
	return e.write(b)
}

func (e *tiffEncoder) headerSize() uint64 {
	if e.big {
		return 16
	}
	return 8
}

// offsets encodes strip offsets or byte counts: LONG in a classic TIFF,
// LONG8 in a BigTIFF.
func (e *tiffEncoder) offsets(tag uint16, v []uint64) (field, error) {
	if e.big {
		b := make([]byte, 0, 8*len(v))
		for _, x := range v {
			b = le.AppendUint64(b, x)
		}
		return field{tag, typeLong8, uint64(len(v)), b}, nil
	}
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		if x > classicLimit {
			return field{}, fmt.Errorf("internal: %s %d past classic TIFF's 4 GiB", tagName(tag), x)
		}
		b = le.AppendUint32(b, uint32(x))
	}
	return field{tag, typeLong, uint64(len(v)), b}, nil
}

// ifd encodes the IFD at offset at: its entries sorted by tag, the
// next-IFD offset (zero here; nextAt is where it lies in the result, for
// the caller to set), and the values too large for an entry after it.
func (e *tiffEncoder) ifd(at uint64, fields []field) (b []byte, nextAt int) {
	sort.Slice(fields, func(i, j int) bool { return fields[i].tag < fields[j].tag })
	countSize, entrySize, inline := 2, 12, 4
	if e.big {
		countSize, entrySize, inline = 8, 20, 8
	}
	n := len(fields)
	nextAt = countSize + n*entrySize
	head := nextAt + inline // the next-IFD offset is as wide as a value
	var ext []byte          // the values stored after the IFD
	if e.big {
		b = le.AppendUint64(b, uint64(n))
	} else {
		b = le.AppendUint16(b, uint16(n))
	}
	for _, f := range fields {
		b = le.AppendUint16(b, f.tag)
		b = le.AppendUint16(b, f.typ)
		if e.big {
			b = le.AppendUint64(b, f.count)
		} else {
			b = le.AppendUint32(b, uint32(f.count))
		}
		if len(f.data) <= inline {
			v := make([]byte, inline)
			copy(v, f.data)
			b = append(b, v...)
			continue
		}
		if len(ext)%2 == 1 {
			ext = append(ext, 0)
		}
		off := at + uint64(head+len(ext))
		if e.big {
			b = le.AppendUint64(b, off)
		} else {
			b = le.AppendUint32(b, uint32(off))
		}
		ext = append(ext, f.data...)
	}
	b = append(b, make([]byte, inline)...) // the next-IFD offset
	return append(b, ext...), nextAt
}

// setNext sets an encoded IFD's next-IFD offset.
func (e *tiffEncoder) setNext(b []byte, nextAt int, next uint64) {
	if e.big {
		le.PutUint64(b[nextAt:], next)
	} else {
		le.PutUint32(b[nextAt:], uint32(next))
	}
}

// compressedPage is one page's deflated strips, concatenated.
type compressedPage struct {
	data   []byte
	counts []uint64
}

// deflater compresses pages strip by strip with one reused zlib writer.
type deflater struct {
	zw  *zlib.Writer
	buf bytes.Buffer
}

// page deflates plane (h rows of w bytes) in strips of rps rows: each
// strip is a zlib stream of its own, as TIFF's Adobe deflate (compression
// 8) stores it.
func (d *deflater) page(plane []byte, w, h, rps int) (compressedPage, error) {
	d.buf.Reset()
	if d.zw == nil {
		d.zw = zlib.NewWriter(&d.buf)
	}
	var p compressedPage
	for y := 0; y < h; y += rps {
		before := d.buf.Len()
		d.zw.Reset(&d.buf)
		if _, err := d.zw.Write(plane[y*w : min(y+rps, h)*w]); err != nil {
			return p, err
		}
		if err := d.zw.Close(); err != nil {
			return p, err
		}
		p.counts = append(p.counts, uint64(d.buf.Len()-before))
	}
	p.data = append([]byte(nil), d.buf.Bytes()...)
	return p, nil
}

// rational returns num/den ≈ x with both in uint32, the continued
// fraction convergent nearest x that fits; ok is false when none is
// within 1e-9 of x relatively (x beyond uint32's range, or too small).
func rational(x float64) (num, den uint32, ok bool) {
	if !(x > 0) || math.IsInf(x, 0) {
		return 0, 0, false
	}
	// Convergents h/k: h(n) = a·h(n−1) + h(n−2), likewise k; exact in
	// float64 below 2^53.
	h0, h1, k0, k1 := 0.0, 1.0, 1.0, 0.0
	var bh, bk float64
	r := x
	for range 64 {
		a := math.Floor(r)
		h, k := a*h1+h0, a*k1+k0
		if h > classicLimit || k > classicLimit {
			break
		}
		bh, bk = h, k
		h0, h1, k0, k1 = h1, h, k1, k
		frac := r - a
		if frac == 0 || math.Abs(h/k-x) <= x*1e-16 {
			break
		}
		r = 1 / frac
	}
	if bh == 0 || bk == 0 || math.Abs(bh/bk-x) > x*1e-9 {
		return 0, 0, false
	}
	return uint32(bh), uint32(bk), true
}

// rationalField encodes one RATIONAL.
func rationalField(tag uint16, num, den uint32) field {
	return field{tag, typeRational, 1, le.AppendUint32(le.AppendUint32(nil, num), den)}
}

func shortField(tag uint16, v uint16) field {
	return field{tag, typeShort, 1, le.AppendUint16(nil, v)}
}

func longField(tag uint16, v uint32) field {
	return field{tag, typeLong, 1, le.AppendUint32(nil, v)}
}

// asciiField encodes an ASCII value with its NUL.
func asciiField(tag uint16, s string) field {
	return field{tag, typeASCII, uint64(len(s) + 1), append([]byte(s), 0)}
}
