// Package rawvol reads the voxels of a volume stored as one block of
// samples a text header describes (NRRD, MetaImage): the sample type, byte
// order and encoding (raw, gzip, zlib, bzip2, ASCII), where the block
// starts, and how channels are laid out. The format packages parse their
// headers into a Spec; this package does the reading, as a volume.File.
//
// A raw block is read with ReadAt, only the rows a region needs; a
// compressed or text block is decoded from its start no further than the
// region's last sample, and never into a buffer larger than the data
// actually decoded, so a header that claims more data than the file holds
// is an error, not a large allocation.
package rawvol

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/voxtrain/voxtrain/volume"
)

// Type is a sample type.
type Type uint8

// The sample types.
const (
	Int8 Type = iota + 1
	Uint8
	Int16
	Uint16
	Int32
	Uint32
	Int64
	Uint64
	Float32
	Float64
)

var typeNames = [...]string{"", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"}

func (t Type) String() string {
	if int(t) < len(typeNames) && t != 0 {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Size is the sample's size in bytes (0 for an invalid type).
func (t Type) Size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Decode converts len(dst) samples of type t in byte order o from b
// (at least len(dst)·t.Size() bytes) to float32.
func Decode(dst []float32, b []byte, t Type, o binary.ByteOrder) {
	// The common types in either byte order through the concrete
	// binary.LittleEndian/BigEndian, whose calls inline: through the
	// interface each voxel costs a dynamic call (4× slower on uint16).
	le, be := binary.ByteOrder(binary.LittleEndian), binary.ByteOrder(binary.BigEndian)
	switch {
	case t == Int16 && o == le:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:])))
		}
		return
	case t == Int16 && o == be:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = float32(int16(binary.BigEndian.Uint16(b[2*i:])))
		}
		return
	case t == Uint16 && o == le:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = float32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return
	case t == Uint16 && o == be:
		b = b[:2*len(dst)]
		for i := range dst {
			dst[i] = float32(binary.BigEndian.Uint16(b[2*i:]))
		}
		return
	case t == Float32 && o == le:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return
	case t == Float32 && o == be:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4*i:]))
		}
		return
	}
	switch t {
	case Int8:
		for i := range dst {
			dst[i] = float32(int8(b[i]))
		}
	case Uint8:
		for i := range dst {
			dst[i] = float32(b[i])
		}
	case Int16:
		for i := range dst {
			dst[i] = float32(int16(o.Uint16(b[2*i:])))
		}
	case Uint16:
		for i := range dst {
			dst[i] = float32(o.Uint16(b[2*i:]))
		}
	case Int32:
		for i := range dst {
			dst[i] = float32(int32(o.Uint32(b[4*i:])))
		}
	case Uint32:
		for i := range dst {
			dst[i] = float32(o.Uint32(b[4*i:]))
		}
	case Int64:
		for i := range dst {
			dst[i] = float32(int64(o.Uint64(b[8*i:])))
		}
	case Uint64:
		for i := range dst {
			dst[i] = float32(o.Uint64(b[8*i:]))
		}
	case Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(o.Uint32(b[4*i:]))
		}
	case Float64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(o.Uint64(b[8*i:])))
		}
	}
}

// Encoding is how the block of samples is stored.
type Encoding uint8

// The encodings.
const (
	Raw Encoding = iota
	Gzip
	Zlib
	Bzip2
	ASCII
)

func (e Encoding) String() string {
	return [...]string{"raw", "gzip", "zlib", "bzip2", "ascii"}[e]
}

// Spec is what a header says of its data.
type Spec struct {
	// Format names the format in errors ("nrrd").
	Format string
	// Header is the header file, named in errors.
	Header string
	// Data is the file holding the samples (the header itself for an
	// attached block).
	Data string
	// Offset is where the block starts in Data; −1 means it is the last
	// bytes of the file (raw only).
	Offset int64
	// Skip is how many decoded bytes precede the samples in a compressed
	// block.
	Skip int64
	// Encoding, Type and BigEndian describe the samples.
	Encoding  Encoding
	Type      Type
	BigEndian bool
	// Interleaved says the channels of a voxel are adjacent (vector
	// pixels); otherwise each channel is a whole volume, one after another.
	Interleaved bool
	// Geometry is the volume's shape, channels, spacing and affine.
	Geometry volume.Header
}

// file is an open block of samples.
type file struct {
	s     Spec
	f     *os.File // raw blocks: kept open for ReadAt
	order binary.ByteOrder
}

// Open checks s against the data file and returns it as a volume.File. A
// raw block must fit in the file.
func Open(s Spec) (volume.File, error) {
	g := s.Geometry
	if err := volume.CheckShape(g.Shape); err != nil {
		return nil, s.errf("%v", err)
	}
	if g.Channels < 1 || g.Channels > 1<<16 {
		return nil, s.errf("%d channels", g.Channels)
	}
	if s.Type.Size() == 0 {
		return nil, s.errf("no sample type")
	}
	// A raw block is read by region (ReadAt of the rows a box needs):
	// only its addressing is bounded here. A compressed or text block is
	// decoded from its start, and reader bounds that prefix.
	n := s.samples()
	if float64(n) != float64(g.Shape[0])*float64(g.Shape[1])*float64(g.Shape[2])*float64(g.Channels) || n > volume.MaxVoxels {
		return nil, s.errf("%d samples, more than 2^53", n)
	}
	v := &file{s: s, order: binary.ByteOrder(binary.LittleEndian)}
	if s.BigEndian {
		v.order = binary.BigEndian
	}
	f, err := os.Open(s.Data)
	if err != nil {
		return nil, s.errf("data file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, s.errf("data file: %w", err)
	}
	need := n * int64(s.Type.Size())
	if s.Encoding == Raw {
		if s.Offset < 0 {
			v.s.Offset = st.Size() - need
		}
		if v.s.Offset < 0 || st.Size()-v.s.Offset < need {
			f.Close()
			return nil, s.errf("data file %s holds %d bytes after offset %d; %d samples of %s need %d",
				s.Data, max(0, st.Size()-max(0, s.Offset)), max(0, s.Offset), n, s.Type, need)
		}
		v.f = f
		return v, nil
	}
	f.Close()
	if s.Offset < 0 || s.Offset > st.Size() {
		return nil, s.errf("data offset %d outside the %d-byte data file %s", s.Offset, st.Size(), s.Data)
	}
	return v, nil
}

// errf is an error naming the header file.
func (s *Spec) errf(format string, a ...any) error {
	return fmt.Errorf("%s: %s: %w", s.Format, s.Header, fmt.Errorf(format, a...))
}

func (s *Spec) samples() int64 {
	sh := s.Geometry.Shape
	return int64(sh[0]) * int64(sh[1]) * int64(sh[2]) * int64(s.Geometry.Channels)
}

func (v *file) Header() volume.Header { return v.s.Geometry }

func (v *file) Close() error {
	if v.f != nil {
		return v.f.Close()
	}
	return nil
}

// span is a run of samples read for one plane (and one channel when the
// channels are not interleaved): whole rows box.Lo[1]..box.Hi[1].
type span struct{ start, n int64 }

// ReadRegion implements volume.File.
func (v *file) ReadRegion(box volume.Box, dst [][]float32) error {
	g := v.s.Geometry
	if len(dst) != g.Channels {
		return v.s.errf("%d destinations for %d channels", len(dst), g.Channels)
	}
	if box.Empty() || !volume.Whole(g.Shape).Contains(box) {
		return v.s.errf("region %v outside the volume %v", box, g.Shape)
	}
	for _, d := range dst {
		if len(d) != box.Voxels() {
			return v.s.errf("a destination of %d values for a region of %d", len(d), box.Voxels())
		}
	}
	sh := g.Shape
	// The box, and the rows it spans at the volume's whole width (what
	// one plane's read holds), are decoded into memory.
	if err := volume.CheckInMemory(box.Size(), g.Channels); err != nil {
		return v.s.errf("region %v..%v: %w", box.Lo, box.Hi, err)
	}
	if err := volume.CheckInMemory([3]int{1, box.Hi[1] - box.Lo[1], sh[2]}, g.Channels); err != nil {
		return v.s.errf("region %v..%v reads whole rows of the volume: %w", box.Lo, box.Hi, err)
	}
	C := int64(g.Channels)
	D, H, W := int64(sh[0]), int64(sh[1]), int64(sh[2])
	rows := int64(box.Hi[1] - box.Lo[1])
	// Per plane: the rows of the box, whole width, all channels when they
	// are interleaved.
	per, groups := C, int64(1)
	if !v.s.Interleaved {
		per, groups = 1, C
	}
	// The last sample needed: the end of the box's last row in the last
	// group.
	end := (((groups-1)*D+int64(box.Hi[0]-1))*H + int64(box.Hi[1])) * W * per
	get, err := v.reader(end)
	if err != nil {
		return err
	}
	buf := make([]float32, rows*W*per)
	sz := box.Size()
	for c := int64(0); c < groups; c++ {
		for z := int64(box.Lo[0]); z < int64(box.Hi[0]); z++ {
			start := ((c*D+z)*H + int64(box.Lo[1])) * W * per
			if err := get(buf, start); err != nil {
				return err
			}
			o := int((z - int64(box.Lo[0])) * int64(sz[1]*sz[2]))
			for y := 0; y < sz[1]; y++ {
				row := buf[int64(y)*W*per:]
				for x := 0; x < sz[2]; x++ {
					i := int64(box.Lo[2]+x) * per
					if v.s.Interleaved {
						for ch := range dst {
							dst[ch][o+x] = row[i+int64(ch)]
						}
					} else {
						dst[c][o+x] = row[i]
					}
				}
				o += sz[2]
			}
		}
	}
	return nil
}

// reader returns a function that decodes len(dst) samples from sample
// start; end is the last sample (exclusive) any call will ask for.
func (v *file) reader(end int64) (func(dst []float32, start int64) error, error) {
	size := int64(v.s.Type.Size())
	switch v.s.Encoding {
	case Raw:
		var b []byte
		return func(dst []float32, start int64) error {
			n := int64(len(dst)) * size
			if int64(cap(b)) < n {
				b = make([]byte, n)
			}
			b = b[:n]
			if _, err := v.f.ReadAt(b, v.s.Offset+start*size); err != nil {
				return v.s.errf("reading %s: %w", v.s.Data, err)
			}
			Decode(dst, b, v.s.Type, v.order)
			return nil
		}, nil
	}
	// Compressed or text data is decoded from its start up to the
	// region's last sample, into memory.
	if end > volume.MaxInMemory {
		return nil, v.s.errf("%v data is decoded from its start, and this region ends at sample %d: more than 2^31−1 samples are %w; store the volume raw (uncompressed) to read it by region", v.s.Encoding, end, volume.ErrTooLarge)
	}
	switch v.s.Encoding {
	case ASCII:
		vals, err := v.ascii(end)
		if err != nil {
			return nil, err
		}
		return func(dst []float32, start int64) error {
			copy(dst, vals[start:])
			return nil
		}, nil
	}
	b, err := v.inflate(v.s.Skip + end*size)
	if err != nil {
		return nil, err
	}
	b = b[v.s.Skip:]
	return func(dst []float32, start int64) error {
		Decode(dst, b[start*size:], v.s.Type, v.order)
		return nil
	}, nil
}

// inflate decodes the first n bytes of a compressed block.
func (v *file) inflate(n int64) ([]byte, error) {
	f, err := os.Open(v.s.Data)
	if err != nil {
		return nil, v.s.errf("data file: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(v.s.Offset, io.SeekStart); err != nil {
		return nil, v.s.errf("data file %s: %w", v.s.Data, err)
	}
	br := bufio.NewReader(f)
	var r io.Reader
	switch v.s.Encoding {
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, v.s.errf("gzip data in %s: %w", v.s.Data, err)
		}
		defer zr.Close()
		r = zr
	case Zlib:
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, v.s.errf("zlib data in %s: %w", v.s.Data, err)
		}
		defer zr.Close()
		r = zr
	case Bzip2:
		r = bzip2.NewReader(br)
	default:
		return nil, v.s.errf("encoding %v", v.s.Encoding)
	}
	// ReadAll grows its buffer with the data decoded, so a header that
	// claims more than the stream holds costs no more than the stream.
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, v.s.errf("%v data in %s: %w", v.s.Encoding, v.s.Data, err)
	}
	if int64(len(b)) < n {
		return nil, v.s.errf("%v data in %s ends after %d bytes, want %d", v.s.Encoding, v.s.Data, len(b), n)
	}
	return b, nil
}

// ascii parses the first n numbers of a text block.
func (v *file) ascii(n int64) ([]float32, error) {
	f, err := os.Open(v.s.Data)
	if err != nil {
		return nil, v.s.errf("data file: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(v.s.Offset, io.SeekStart); err != nil {
		return nil, v.s.errf("data file %s: %w", v.s.Data, err)
	}
	sc := bufio.NewScanner(f)
	sc.Split(bufio.ScanWords)
	var vals []float32
	for int64(len(vals)) < n && sc.Scan() {
		w := bytes.TrimRight(sc.Bytes(), ",")
		if len(w) == 0 {
			continue
		}
		x, err := strconv.ParseFloat(string(w), 64)
		if err != nil {
			return nil, v.s.errf("ascii data in %s: sample %d: %w", v.s.Data, len(vals), err)
		}
		vals = append(vals, float32(x))
	}
	if err := sc.Err(); err != nil {
		return nil, v.s.errf("ascii data in %s: %w", v.s.Data, err)
	}
	if int64(len(vals)) < n {
		return nil, v.s.errf("ascii data in %s ends after %d samples, want %d", v.s.Data, len(vals), n)
	}
	return vals, nil
}

// ReadLabels implements volume.File: every voxel of the box must be an
// integer in 0..255.
func (v *file) ReadLabels(box volume.Box, dst []uint8) error {
	if v.s.Geometry.Channels != 1 {
		return v.s.errf("a label map with %d channels, want one", v.s.Geometry.Channels)
	}
	if len(dst) != box.Voxels() {
		return v.s.errf("a destination of %d labels for a region of %d", len(dst), box.Voxels())
	}
	if err := volume.CheckInMemory(box.Size(), 1); err != nil {
		return v.s.errf("region %v..%v: %w", box.Lo, box.Hi, err)
	}
	f := make([]float32, len(dst))
	if err := v.ReadRegion(box, [][]float32{f}); err != nil {
		return err
	}
	return volume.ToLabels(dst, f, v.s.Header)
}

// ErrUnsupported is wrapped by errors for valid files this reader does
// not read.
var ErrUnsupported = errors.New("not supported")
