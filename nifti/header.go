package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Sizes of the two header versions and of the extension flag that follows
// them in a .nii file.
const (
	Nifti1HeaderSize = 348
	Nifti2HeaderSize = 540
	extFlagSize      = 4
)

// Magic strings. The single-file (.nii) and pair (.hdr/.img) forms differ.
var (
	magic1Single = []byte("n+1\x00")
	magic1Pair   = []byte("ni1\x00")
	magic2Single = []byte("n+2\x00\r\n\x1a\n")
	magic2Pair   = []byte("ni2\x00\r\n\x1a\n")
)

// Header is a NIfTI-1 or NIfTI-2 header, with every field held at the
// precision of NIfTI-2 (float64, int64) so one type serves both versions.
// Writing a NIfTI-1 file narrows the values back to the NIfTI-1 widths.
type Header struct {
	// Version is 1 or 2.
	Version int
	// ByteOrder is the order the file was stored in (binary.LittleEndian or
	// binary.BigEndian). Writers honour it.
	ByteOrder binary.ByteOrder

	DimInfo       uint8
	Dim           [8]int64
	IntentP1      float64
	IntentP2      float64
	IntentP3      float64
	IntentCode    int32
	Datatype      Datatype
	Bitpix        int16
	SliceStart    int64
	Pixdim        [8]float64
	VoxOffset     int64
	SclSlope      float64
	SclInter      float64
	SliceEnd      int64
	SliceCode     int32
	XYZTUnits     uint8
	CalMax        float64
	CalMin        float64
	SliceDuration float64
	Toffset       float64
	Descrip       string
	AuxFile       string
	QformCode     int32
	SformCode     int32
	QuaternB      float64
	QuaternC      float64
	QuaternD      float64
	QoffsetX      float64
	QoffsetY      float64
	QoffsetZ      float64
	Srow          [3][4]float64
	IntentName    string

	// Extensions are the header extensions found between the header and the
	// voxel data. They are kept so a file can be rewritten without losing them.
	Extensions []Extension
}

// Extension is one NIfTI header extension (esize, ecode, data). Data excludes
// the 8-byte esize/ecode prefix and includes any padding.
type Extension struct {
	Code int32
	Data []byte
}

// NewHeader returns a NIfTI-1, little-endian header for a volume of the given
// shape (x, y, z, ... as in nibabel; 1 to 7 dimensions) and datatype, with
// unit voxel sizes in millimetres and seconds, no scaling, and both qform and
// sform set to the identity with code 1 (scanner).
func NewHeader(shape []int, dt Datatype) (*Header, error) {
	if len(shape) < 1 || len(shape) > 7 {
		return nil, fmt.Errorf("nifti: new header: %d dimensions, want 1 to 7", len(shape))
	}
	if !dt.Supported() {
		return nil, fmt.Errorf("nifti: new header: unsupported datatype %v", dt)
	}
	h := &Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: dt, Bitpix: int16(dt.Size() * 8)}
	h.Dim[0] = int64(len(shape))
	h.Pixdim[0] = 1
	for i := 1; i < 8; i++ {
		h.Dim[i] = 1
		h.Pixdim[i] = 1
	}
	for i, n := range shape {
		if n <= 0 {
			return nil, fmt.Errorf("nifti: new header: dimension %d is %d, want > 0", i, n)
		}
		h.Dim[i+1] = int64(n)
	}
	h.XYZTUnits = UnitsMM | UnitsSec
	h.QformCode, h.SformCode = 1, 1
	h.Srow = [3][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}
	return h, nil
}

// Spatial and temporal unit codes of xyzt_units.
const (
	UnitsMeter  = 1
	UnitsMM     = 2
	UnitsMicron = 3
	UnitsSec    = 8
	UnitsMsec   = 16
	UnitsUsec   = 24
)

// NDim returns dim[0], the number of dimensions.
func (h *Header) NDim() int { return int(h.Dim[0]) }

// Shape returns dim[1..dim[0]] (x first, as nibabel's img.shape).
func (h *Header) Shape() []int {
	n := h.NDim()
	if n < 1 || n > 7 {
		return nil
	}
	s := make([]int, n)
	for i := range s {
		s[i] = int(h.Dim[i+1])
	}
	return s
}

// NumVoxels returns the product of the dimensions. It is only meaningful on a
// header that passed validation (reading validates).
func (h *Header) NumVoxels() int64 {
	n := int64(1)
	for i := 1; i <= h.NDim() && i < 8; i++ {
		n *= h.Dim[i]
	}
	return n
}

// DataSize returns the number of voxel bytes the header describes.
func (h *Header) DataSize() int64 { return h.NumVoxels() * int64(h.Datatype.Size()) }

// VoxelSize returns pixdim[1..3], the spatial voxel sizes in xyzt units.
func (h *Header) VoxelSize() [3]float64 { return [3]float64{h.Pixdim[1], h.Pixdim[2], h.Pixdim[3]} }

// SpaceUnits returns the name of the spatial unit ("mm", "m", "um" or "unknown").
func (h *Header) SpaceUnits() string {
	switch h.XYZTUnits & 0x07 {
	case UnitsMeter:
		return "m"
	case UnitsMM:
		return "mm"
	case UnitsMicron:
		return "um"
	}
	return "unknown"
}

// TimeUnits returns the name of the temporal unit ("s", "ms", "us", "hz",
// "ppm", "rad/s" or "unknown").
func (h *Header) TimeUnits() string {
	switch h.XYZTUnits & 0x38 {
	case UnitsSec:
		return "s"
	case UnitsMsec:
		return "ms"
	case UnitsUsec:
		return "us"
	case 32:
		return "hz"
	case 40:
		return "ppm"
	case 48:
		return "rad/s"
	}
	return "unknown"
}

// Scaling returns the slope and intercept to apply to stored values, as
// nibabel does: a slope of 0 or a non-finite slope means no scaling (1, 0).
// A finite slope with a non-finite intercept is an error.
func (h *Header) Scaling() (slope, inter float64, err error) {
	if h.SclSlope == 0 || math.IsNaN(h.SclSlope) || math.IsInf(h.SclSlope, 0) {
		return 1, 0, nil
	}
	if math.IsNaN(h.SclInter) || math.IsInf(h.SclInter, 0) {
		return 0, 0, fmt.Errorf("scl_slope %g is valid but scl_inter %g is not finite", h.SclSlope, h.SclInter)
	}
	return h.SclSlope, h.SclInter, nil
}

// headerField names a header field and its byte offset in each version, so
// errors can say where in the file the problem is.
type headerField struct {
	name   string
	off1   int64
	off2   int64
	suffix string
}

func (f headerField) at(version int) int64 {
	if version == 2 {
		return f.off2
	}
	return f.off1
}

var (
	fSizeof   = headerField{"sizeof_hdr", 0, 0, ""}
	fMagic    = headerField{"magic", 344, 4, ""}
	fDim      = headerField{"dim", 40, 16, ""}
	fDatatype = headerField{"datatype", 70, 12, ""}
	fBitpix   = headerField{"bitpix", 72, 14, ""}
	fPixdim   = headerField{"pixdim", 76, 104, ""}
	fVoxOff   = headerField{"vox_offset", 108, 168, ""}
	fQform    = headerField{"qform_code", 252, 344, ""}
	fSform    = headerField{"sform_code", 254, 348, ""}
)

// fieldErr builds a FormatError for a header field.
func fieldErr(file string, version int, f headerField, format string, args ...any) *FormatError {
	return &FormatError{File: file, Field: f.name, Offset: f.at(version), Msg: fmt.Sprintf(format, args...)}
}

// headerSize returns the header length that the 4-byte sizeof_hdr field b
// announces in either byte order (348 or 540), or 4 when it is neither.
func headerSize(b []byte) int {
	for _, v := range []uint32{binary.LittleEndian.Uint32(b), binary.BigEndian.Uint32(b)} {
		if v == Nifti1HeaderSize || v == Nifti2HeaderSize {
			return int(v)
		}
	}
	return 4
}

// ParseHeader decodes a NIfTI-1 or NIfTI-2 header from the start of b (at
// least 348 bytes for NIfTI-1, 540 for NIfTI-2) and validates it. file is used
// only in error messages. Extensions are not parsed here (they live after the
// header; see the readers).
func ParseHeader(b []byte, file string) (*Header, error) {
	if len(b) < 4 {
		return nil, &FormatError{File: file, Field: "sizeof_hdr", Offset: 0, Msg: fmt.Sprintf("truncated header: %d bytes, need at least 348", len(b))}
	}
	var order binary.ByteOrder
	var version int
	le, be := binary.LittleEndian.Uint32(b), binary.BigEndian.Uint32(b)
	switch {
	case le == Nifti1HeaderSize:
		order, version = binary.LittleEndian, 1
	case be == Nifti1HeaderSize:
		order, version = binary.BigEndian, 1
	case le == Nifti2HeaderSize:
		order, version = binary.LittleEndian, 2
	case be == Nifti2HeaderSize:
		order, version = binary.BigEndian, 2
	default:
		return nil, &FormatError{File: file, Field: "sizeof_hdr", Offset: 0,
			Msg: fmt.Sprintf("is %d, want 348 (NIfTI-1) or 540 (NIfTI-2) in either byte order; not a NIfTI file", int32(le))}
	}
	need := Nifti1HeaderSize
	if version == 2 {
		need = Nifti2HeaderSize
	}
	if len(b) < need {
		return nil, &FormatError{File: file, Field: "sizeof_hdr", Offset: int64(len(b)),
			Msg: fmt.Sprintf("truncated header: %d bytes, NIfTI-%d needs %d", len(b), version, need)}
	}
	h := &Header{Version: version, ByteOrder: order}
	if version == 1 {
		parse1(h, b[:need], order)
	} else {
		parse2(h, b[:need], order)
	}
	if err := h.validate(file, b[:need]); err != nil {
		return nil, err
	}
	return h, nil
}

// isPairMagic reports whether the header's magic is the .hdr/.img one.
func isPairMagic(b []byte, version int) bool {
	if version == 1 {
		return bytes.Equal(b[344:348], magic1Pair)
	}
	return bytes.Equal(b[4:12], magic2Pair)
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

type dec struct {
	b []byte
	o binary.ByteOrder
}

func (d dec) i16(off int) int16   { return int16(d.o.Uint16(d.b[off:])) }
func (d dec) i32(off int) int32   { return int32(d.o.Uint32(d.b[off:])) }
func (d dec) i64(off int) int64   { return int64(d.o.Uint64(d.b[off:])) }
func (d dec) f32(off int) float64 { return float64(math.Float32frombits(d.o.Uint32(d.b[off:]))) }
func (d dec) f64(off int) float64 { return math.Float64frombits(d.o.Uint64(d.b[off:])) }

func parse1(h *Header, b []byte, o binary.ByteOrder) {
	d := dec{b, o}
	h.DimInfo = b[39]
	for i := 0; i < 8; i++ {
		h.Dim[i] = int64(d.i16(40 + 2*i))
		h.Pixdim[i] = d.f32(76 + 4*i)
	}
	h.IntentP1, h.IntentP2, h.IntentP3 = d.f32(56), d.f32(60), d.f32(64)
	h.IntentCode = int32(d.i16(68))
	h.Datatype = Datatype(d.i16(70))
	h.Bitpix = d.i16(72)
	h.SliceStart = int64(d.i16(74))
	h.VoxOffset = int64(d.f32(108))
	h.SclSlope, h.SclInter = d.f32(112), d.f32(116)
	h.SliceEnd = int64(d.i16(120))
	h.SliceCode = int32(b[122])
	h.XYZTUnits = b[123]
	h.CalMax, h.CalMin = d.f32(124), d.f32(128)
	h.SliceDuration, h.Toffset = d.f32(132), d.f32(136)
	h.Descrip = cstring(b[148:228])
	h.AuxFile = cstring(b[228:252])
	h.QformCode, h.SformCode = int32(d.i16(252)), int32(d.i16(254))
	h.QuaternB, h.QuaternC, h.QuaternD = d.f32(256), d.f32(260), d.f32(264)
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = d.f32(268), d.f32(272), d.f32(276)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			h.Srow[r][c] = d.f32(280 + 16*r + 4*c)
		}
	}
	h.IntentName = cstring(b[328:344])
}

func parse2(h *Header, b []byte, o binary.ByteOrder) {
	d := dec{b, o}
	h.Datatype = Datatype(d.i16(12))
	h.Bitpix = d.i16(14)
	for i := 0; i < 8; i++ {
		h.Dim[i] = d.i64(16 + 8*i)
		h.Pixdim[i] = d.f64(104 + 8*i)
	}
	h.IntentP1, h.IntentP2, h.IntentP3 = d.f64(80), d.f64(88), d.f64(96)
	h.VoxOffset = d.i64(168)
	h.SclSlope, h.SclInter = d.f64(176), d.f64(184)
	h.CalMax, h.CalMin = d.f64(192), d.f64(200)
	h.SliceDuration, h.Toffset = d.f64(208), d.f64(216)
	h.SliceStart, h.SliceEnd = d.i64(224), d.i64(232)
	h.Descrip = cstring(b[240:320])
	h.AuxFile = cstring(b[320:344])
	h.QformCode, h.SformCode = d.i32(344), d.i32(348)
	h.QuaternB, h.QuaternC, h.QuaternD = d.f64(352), d.f64(360), d.f64(368)
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = d.f64(376), d.f64(384), d.f64(392)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			h.Srow[r][c] = d.f64(400 + 32*r + 8*c)
		}
	}
	h.SliceCode = d.i32(496)
	h.XYZTUnits = uint8(d.i32(500))
	h.IntentCode = d.i32(504)
	h.IntentName = cstring(b[508:524])
	h.DimInfo = b[524]
}

// validate checks the fields every reader relies on and applies the same
// benign fixes nibabel applies when it loads a header (so that the affine and
// pixdim agree with nibabel's): qfac (pixdim[0]) not ±1 becomes 1, zero
// spatial pixdims become 1 and negative ones their absolute value, unknown
// qform/sform codes become 0.
func (h *Header) validate(file string, raw []byte) error {
	v := h.Version
	okMagic := false
	if v == 1 {
		okMagic = bytes.Equal(raw[344:348], magic1Single) || bytes.Equal(raw[344:348], magic1Pair)
	} else {
		okMagic = bytes.Equal(raw[4:12], magic2Single) || bytes.Equal(raw[4:12], magic2Pair)
	}
	if !okMagic {
		var got []byte
		if v == 1 {
			got = raw[344:348]
		} else {
			got = raw[4:12]
		}
		return fieldErr(file, v, fMagic, "is %q, want %q or %q", got, map[int]string{1: "n+1", 2: "n+2"}[v], map[int]string{1: "ni1", 2: "ni2"}[v])
	}
	nd := h.Dim[0]
	if nd < 1 || nd > 7 {
		return fieldErr(file, v, fDim, "dim[0] = %d, want 1 to 7", nd)
	}
	var total uint64 = 1
	for i := int64(1); i <= nd; i++ {
		if h.Dim[i] <= 0 {
			return fieldErr(file, v, fDim, "dim[%d] = %d, want > 0", i, h.Dim[i])
		}
		hi, lo := bits.Mul64(total, uint64(h.Dim[i]))
		if hi != 0 || lo > math.MaxInt64 {
			return fieldErr(file, v, fDim, "product of dim[1..%d] overflows 64 bits", nd)
		}
		total = lo
	}
	if !h.Datatype.Supported() {
		if name, ok := knownButUnsupported[h.Datatype]; ok {
			return fieldErr(file, v, fDatatype, "%d (%s) is not supported", int16(h.Datatype), name)
		}
		return fieldErr(file, v, fDatatype, "%d is not a known NIfTI datatype", int16(h.Datatype))
	}
	hi, lo := bits.Mul64(total, uint64(h.Datatype.Size()))
	if hi != 0 || lo > math.MaxInt64 {
		return fieldErr(file, v, fDim, "data size (%d voxels × %d bytes) overflows 64 bits", total, h.Datatype.Size())
	}
	if want := int16(h.Datatype.Size() * 8); h.Bitpix != want {
		// nibabel fixes bitpix from the datatype; so do we.
		h.Bitpix = want
	}
	if h.VoxOffset < 0 {
		return fieldErr(file, v, fVoxOff, "%d is negative", h.VoxOffset)
	}
	// Fixes nibabel applies on load (Nifti1Header.check_fix).
	if h.Pixdim[0] != 1 && h.Pixdim[0] != -1 {
		h.Pixdim[0] = 1
	}
	for i := 1; i <= 3; i++ {
		if h.Pixdim[i] == 0 {
			h.Pixdim[i] = 1
		} else if h.Pixdim[i] < 0 {
			h.Pixdim[i] = -h.Pixdim[i]
		}
	}
	if h.QformCode < 0 || h.QformCode > 5 {
		h.QformCode = 0
	}
	if h.SformCode < 0 || h.SformCode > 5 {
		h.SformCode = 0
	}
	return nil
}

// encode writes h as a NIfTI-1 or NIfTI-2 header (h.Version) in h.ByteOrder,
// with the single-file or pair magic. voxOffset is the value to store.
func (h *Header) encode(pair bool, voxOffset int64) ([]byte, error) {
	o := h.ByteOrder
	if o == nil {
		o = binary.LittleEndian
	}
	switch h.Version {
	case 1, 0:
		return h.encode1(o, pair, voxOffset)
	case 2:
		return h.encode2(o, pair, voxOffset), nil
	}
	return nil, fmt.Errorf("nifti: header version %d, want 1 or 2", h.Version)
}

func putStr(dst []byte, s string) { copy(dst, s) }

func (h *Header) encode1(o binary.ByteOrder, pair bool, voxOffset int64) ([]byte, error) {
	b := make([]byte, Nifti1HeaderSize)
	p16 := func(off int, v int64) { o.PutUint16(b[off:], uint16(int16(v))) }
	pf := func(off int, v float64) { o.PutUint32(b[off:], math.Float32bits(float32(v))) }
	for i, d := range h.Dim {
		if d > math.MaxInt16 || d < math.MinInt16 {
			return nil, fmt.Errorf("nifti: dim[%d] = %d does not fit NIfTI-1 (int16); write NIfTI-2", i, d)
		}
	}
	o.PutUint32(b[0:], Nifti1HeaderSize)
	b[38] = 'r' // "regular", as nibabel writes
	b[39] = h.DimInfo
	for i := 0; i < 8; i++ {
		p16(40+2*i, h.Dim[i])
		pf(76+4*i, h.Pixdim[i])
	}
	pf(56, h.IntentP1)
	pf(60, h.IntentP2)
	pf(64, h.IntentP3)
	p16(68, int64(h.IntentCode))
	p16(70, int64(h.Datatype))
	p16(72, int64(h.Datatype.Size()*8))
	p16(74, h.SliceStart)
	pf(108, float64(voxOffset))
	pf(112, h.SclSlope)
	pf(116, h.SclInter)
	p16(120, h.SliceEnd)
	b[122] = byte(h.SliceCode)
	b[123] = h.XYZTUnits
	pf(124, h.CalMax)
	pf(128, h.CalMin)
	pf(132, h.SliceDuration)
	pf(136, h.Toffset)
	putStr(b[148:227], h.Descrip)
	putStr(b[228:251], h.AuxFile)
	p16(252, int64(h.QformCode))
	p16(254, int64(h.SformCode))
	pf(256, h.QuaternB)
	pf(260, h.QuaternC)
	pf(264, h.QuaternD)
	pf(268, h.QoffsetX)
	pf(272, h.QoffsetY)
	pf(276, h.QoffsetZ)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			pf(280+16*r+4*c, h.Srow[r][c])
		}
	}
	putStr(b[328:343], h.IntentName)
	if pair {
		copy(b[344:], magic1Pair)
	} else {
		copy(b[344:], magic1Single)
	}
	return b, nil
}

func (h *Header) encode2(o binary.ByteOrder, pair bool, voxOffset int64) []byte {
	b := make([]byte, Nifti2HeaderSize)
	p64 := func(off int, v int64) { o.PutUint64(b[off:], uint64(v)) }
	pf := func(off int, v float64) { o.PutUint64(b[off:], math.Float64bits(v)) }
	o.PutUint32(b[0:], Nifti2HeaderSize)
	if pair {
		copy(b[4:], magic2Pair)
	} else {
		copy(b[4:], magic2Single)
	}
	o.PutUint16(b[12:], uint16(h.Datatype))
	o.PutUint16(b[14:], uint16(h.Datatype.Size()*8))
	for i := 0; i < 8; i++ {
		p64(16+8*i, h.Dim[i])
		pf(104+8*i, h.Pixdim[i])
	}
	pf(80, h.IntentP1)
	pf(88, h.IntentP2)
	pf(96, h.IntentP3)
	p64(168, voxOffset)
	pf(176, h.SclSlope)
	pf(184, h.SclInter)
	pf(192, h.CalMax)
	pf(200, h.CalMin)
	pf(208, h.SliceDuration)
	pf(216, h.Toffset)
	p64(224, h.SliceStart)
	p64(232, h.SliceEnd)
	putStr(b[240:319], h.Descrip)
	putStr(b[320:343], h.AuxFile)
	o.PutUint32(b[344:], uint32(h.QformCode))
	o.PutUint32(b[348:], uint32(h.SformCode))
	pf(352, h.QuaternB)
	pf(360, h.QuaternC)
	pf(368, h.QuaternD)
	pf(376, h.QoffsetX)
	pf(384, h.QoffsetY)
	pf(392, h.QoffsetZ)
	for r := 0; r < 3; r++ {
		for c := 0; c < 4; c++ {
			pf(400+32*r+8*c, h.Srow[r][c])
		}
	}
	o.PutUint32(b[496:], uint32(h.SliceCode))
	o.PutUint32(b[500:], uint32(h.XYZTUnits))
	o.PutUint32(b[504:], uint32(h.IntentCode))
	putStr(b[508:523], h.IntentName)
	b[524] = h.DimInfo
	return b
}

// FormatError reports malformed NIfTI input: the file, the header field (or
// "data"/"extension"/"gzip"), the byte offset where the problem is (-1 when
// unknown; for compressed files the offset is in the decompressed stream),
// and what is wrong.
type FormatError struct {
	File   string
	Field  string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	var sb strings.Builder
	sb.WriteString("nifti: ")
	sb.WriteString(e.File)
	sb.WriteString(": ")
	if e.Field != "" {
		sb.WriteString(e.Field)
		if e.Offset >= 0 {
			fmt.Fprintf(&sb, " (byte %d)", e.Offset)
		}
		sb.WriteString(": ")
	} else if e.Offset >= 0 {
		fmt.Fprintf(&sb, "at byte %d: ", e.Offset)
	}
	sb.WriteString(e.Msg)
	return sb.String()
}
