package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/voxtrain/voxtrain/internal/floatbytes"
)

// Info describes one tensor of a parsed file.
type Info struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are the tensor's byte offsets within the data section.
	Begin, End int64
}

// NumElements is the product of the tensor's shape.
func (i Info) NumElements() int { return NumElements(i.Shape) }

// Reader gives access to the tensors of a parsed, validated safetensors
// file. Its methods may be called concurrently if the underlying
// io.ReaderAt allows it (os.File and bytes.Reader do).
type Reader struct {
	name      string
	r         io.ReaderAt
	dataStart int64
	tensors   []Info // in offset order
	index     map[string]int
	metadata  map[string]string
}

// File is a Reader over an open file; Close it when done.
type File struct {
	*Reader
	f *os.File
}

// Open opens and validates the safetensors file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := Parse(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{Reader: r, f: f}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// rawInfo is one tensor's header entry as it appears in the JSON; pointers
// tell a missing field from a zero one.
type rawInfo struct {
	DType       *string   `json:"dtype"`
	Shape       *[]uint64 `json:"shape"`
	DataOffsets *[]uint64 `json:"data_offsets"`
}

// Parse reads and validates the header of a safetensors file of the given
// size read through r; name is used in error messages (normally the path).
// All structural problems are reported as *FormatError; read errors are
// wrapped with the name.
func Parse(r io.ReaderAt, size int64, name string) (*Reader, error) {
	bad := func(tensor, format string, args ...any) error {
		return &FormatError{File: name, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, bad("", "file of %d bytes is shorter than the 8-byte header length (truncated?)", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, bad("", "header length %d exceeds the format's limit of %d (not a safetensors file?)", n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, bad("", "header length %d does not fit in a file of %d bytes (truncated?)", n, size)
	}
	if n == 0 {
		return nil, bad("", "header length is 0 (not a safetensors file?)")
	}
	header := make([]byte, n) // n <= size-8: bounded by the file's size
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if !utf8.Valid(header) {
		return nil, bad("", "header is not valid UTF-8")
	}
	// Leading whitespace is accepted, as the reference's JSON parser does.
	if h := bytes.TrimLeft(header, " \t\r\n"); len(h) == 0 || h[0] != '{' {
		return nil, bad("", "header does not start with '{' (not a safetensors file?)")
	}

	st := &Reader{name: name, r: r, dataStart: 8 + int64(n), index: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the '{' checked above
		return nil, bad("", "header JSON: %v", err)
	}
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("", "header JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok { // the decoder only yields strings as keys; be safe anyway
			return nil, bad("", "header JSON: object key %v is not a string", tok)
		}
		if key == metaKey {
			if seenMeta {
				return nil, bad("", "duplicate %q", metaKey)
			}
			seenMeta = true
			if err := dec.Decode(&st.metadata); err != nil {
				return nil, bad("", "%s: %v (want an object of strings)", metaKey, err)
			}
			continue
		}
		if _, dup := st.index[key]; dup {
			return nil, bad(key, "duplicate name in header")
		}
		var ri rawInfo
		if err := dec.Decode(&ri); err != nil {
			return nil, bad(key, "header entry: %v", err)
		}
		info, err := checkInfo(key, ri)
		if err != nil {
			return nil, bad(key, "%s", err)
		}
		st.index[key] = len(st.tensors)
		st.tensors = append(st.tensors, info)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bad("", "header JSON: %v", err)
	}
	if rest := header[dec.InputOffset():]; len(bytes.Trim(rest, " \t\r\n")) != 0 {
		return nil, bad("", "header has %d bytes of trailing data after the JSON object", len(rest))
	}

	// The data section must be covered exactly, in offset order, without
	// holes or overlaps. Sorting by (begin, end, name) is deterministic
	// even with several empty tensors at one offset.
	slices.SortFunc(st.tensors, func(a, b Info) int {
		if a.Begin != b.Begin {
			return cmpInt64(a.Begin, b.Begin)
		}
		if a.End != b.End {
			return cmpInt64(a.End, b.End)
		}
		return strings.Compare(a.Name, b.Name)
	})
	dataLen := size - st.dataStart
	var pos int64
	for i, t := range st.tensors {
		st.index[t.Name] = i
		if t.Begin != pos {
			if t.Begin > pos {
				return nil, bad(t.Name, "data starts at %d but the previous tensor ends at %d (a hole)", t.Begin, pos)
			}
			return nil, bad(t.Name, "data [%d, %d) overlaps the previous tensor, which ends at %d", t.Begin, t.End, pos)
		}
		if t.End > dataLen {
			return nil, bad(t.Name, "data [%d, %d) runs past the end of the data section (%d bytes; truncated?)", t.Begin, t.End, dataLen)
		}
		pos = t.End
	}
	if pos != dataLen {
		return nil, bad("", "tensors cover %d bytes of data but the file holds %d after the header", pos, dataLen)
	}
	return st, nil
}

func cmpInt64(a, b int64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// checkInfo validates one header entry (without its position in the file).
func checkInfo(name string, ri rawInfo) (Info, error) {
	if ri.DType == nil || ri.Shape == nil || ri.DataOffsets == nil {
		return Info{}, errors.New(`header entry needs "dtype", "shape" and "data_offsets"`)
	}
	dt := DType(*ri.DType)
	if !dt.Valid() {
		return Info{}, fmt.Errorf("unknown dtype %q", *ri.DType)
	}
	shape := make([]int, len(*ri.Shape))
	for i, s := range *ri.Shape {
		if s > 1<<62 {
			return Info{}, fmt.Errorf("dimension %d of shape is too large (%d)", i, s)
		}
		shape[i] = int(s)
	}
	want, ok := byteLen(dt, shape)
	if !ok {
		return Info{}, fmt.Errorf("shape %v of %s is too large", shape, dt)
	}
	off := *ri.DataOffsets
	if len(off) != 2 {
		return Info{}, fmt.Errorf("data_offsets has %d values, want [begin, end]", len(off))
	}
	if off[0] > off[1] {
		return Info{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", off[0], off[1])
	}
	if off[1] > math.MaxInt64/2 {
		return Info{}, fmt.Errorf("data_offsets [%d, %d] are too large", off[0], off[1])
	}
	if got := int64(off[1] - off[0]); got != want {
		return Info{}, fmt.Errorf("shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d", shape, dt, want, off[0], off[1], got)
	}
	return Info{Name: name, DType: dt, Shape: shape, Begin: int64(off[0]), End: int64(off[1])}, nil
}

// Name is the name the file was parsed under (its path for Open).
func (st *Reader) Name() string { return st.name }

// Tensors describes the file's tensors in the order of their data. The
// slice is the caller's to keep; the shapes are shared, do not modify them.
func (st *Reader) Tensors() []Info { return slices.Clone(st.tensors) }

// Lookup returns the named tensor's description.
func (st *Reader) Lookup(name string) (Info, bool) {
	i, ok := st.index[name]
	if !ok {
		return Info{}, false
	}
	return st.tensors[i], true
}

// Metadata returns the file's "__metadata__" map (nil when absent); do not
// modify it.
func (st *Reader) Metadata() map[string]string { return st.metadata }

// lookup is Lookup with a *FormatError naming the file for a missing tensor.
func (st *Reader) lookup(name string) (Info, error) {
	t, ok := st.Lookup(name)
	if !ok {
		return Info{}, &FormatError{File: st.name, Tensor: name, Msg: "no such tensor"}
	}
	return t, nil
}

// lookupLen is lookup for a read into a destination of n elements, which
// must be exactly the tensor's.
func (st *Reader) lookupLen(name string, n int) (Info, error) {
	t, err := st.lookup(name)
	if err != nil {
		return Info{}, err
	}
	if tn := t.NumElements(); n != tn {
		return Info{}, &FormatError{File: st.name, Tensor: name, Msg: fmt.Sprintf("has %d elements (shape %v), destination holds %d", tn, t.Shape, n)}
	}
	return t, nil
}

// readAt fills buf with the data section's bytes from t.Begin on.
func (st *Reader) readAt(t Info, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if _, err := st.r.ReadAt(buf, st.dataStart+t.Begin); err != nil {
		return fmt.Errorf("read %s: tensor %q: %w", st.name, t.Name, err)
	}
	return nil
}

// ReadRaw returns the named tensor's bytes as stored (little-endian).
func (st *Reader) ReadRaw(name string) ([]byte, error) {
	t, err := st.lookup(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, t.End-t.Begin) // validated against the file's size
	return buf, st.readAt(t, buf)
}

// ReadFloat32 reads the named tensor into dst, which must hold exactly its
// number of elements. F32 is read straight into dst; F16, BF16 and F64 are
// converted to float32. Other dtypes are an error.
func (st *Reader) ReadFloat32(name string, dst []float32) error {
	t, err := st.lookupLen(name, len(dst))
	if err != nil {
		return err
	}
	switch t.DType {
	case F32:
		if floatbytes.LittleEndian {
			return st.readAt(t, floatbytes.Bytes(dst))
		}
	case F16, BF16, F64:
	default:
		return &FormatError{File: st.name, Tensor: name, Msg: fmt.Sprintf("dtype %s cannot be read as float32", t.DType)}
	}
	// Convert in chunks so a large tensor needs no second full-size buffer.
	size := int64(t.DType.Size())
	const chunk = 1 << 16 // elements
	buf := make([]byte, min(int64(len(dst)), chunk)*size)
	for i := 0; i < len(dst); i += chunk {
		m := min(len(dst)-i, chunk)
		b := buf[:int64(m)*size]
		part := Info{Name: t.Name, Begin: t.Begin + int64(i)*size}
		if err := st.readAt(part, b); err != nil {
			return err
		}
		decodeFloat32(t.DType, b, dst[i:i+m])
	}
	return nil
}

// Float32s returns an in-memory tensor's values as float32: F32, and F16,
// BF16 and F64 converted, as ReadFloat32 reads them from a file. Other
// dtypes, or Data not holding Shape's elements, are an error.
func (t Tensor) Float32s() ([]float32, error) {
	n := NumElements(t.Shape)
	switch t.DType {
	case F32, F16, BF16, F64:
	default:
		return nil, &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("dtype %s cannot be read as float32", t.DType)}
	}
	if len(t.Data) != n*t.DType.Size() {
		return nil, &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("%d bytes for %d elements of %s", len(t.Data), n, t.DType)}
	}
	out := make([]float32, n)
	decodeFloat32(t.DType, t.Data, out)
	return out, nil
}

// ReadInt64 reads the named I64, I32 or U8 tensor into dst, which must hold
// exactly its number of elements.
func (st *Reader) ReadInt64(name string, dst []int64) error {
	t, err := st.lookupLen(name, len(dst))
	if err != nil {
		return err
	}
	if t.DType != I64 && t.DType != I32 && t.DType != U8 {
		return &FormatError{File: st.name, Tensor: name, Msg: fmt.Sprintf("dtype %s cannot be read as int64", t.DType)}
	}
	b, err := st.ReadRaw(name)
	if err != nil {
		return err
	}
	for i := range dst {
		switch t.DType {
		case I64:
			dst[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		case I32:
			dst[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		case U8:
			dst[i] = int64(b[i])
		}
	}
	return nil
}

// decodeFloat32 converts little-endian elements of dtype dt in src to dst.
func decodeFloat32(dt DType, src []byte, dst []float32) {
	le := binary.LittleEndian
	for i := range dst {
		switch dt {
		case F32:
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		case F64:
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		case BF16:
			dst[i] = math.Float32frombits(uint32(le.Uint16(src[2*i:])) << 16)
		case F16:
			dst[i] = halfToFloat32(le.Uint16(src[2*i:]))
		}
	}
}

// halfToFloat32 converts an IEEE 754 binary16 value exactly.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN, keeping the payload
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default: // subnormal: mant × 2^-24, exact in float32
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
}
