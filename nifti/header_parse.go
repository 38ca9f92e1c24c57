package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// headerField names a header field and its byte offset in each version, so
// errors can say where in the file the problem is.
type headerField struct {
	name string
	off1 int64
	off2 int64
}

// at returns the field's offset in a header of the given version.
func (f headerField) at(version int) int64 {
	if version == 2 {
		return f.off2
	}
	return f.off1
}

var (
	fSizeof   = headerField{"sizeof_hdr", 0, 0}
	fMagic    = headerField{"magic", 344, 4}
	fDim      = headerField{"dim", 40, 16}
	fDatatype = headerField{"datatype", 70, 12}
	fBitpix   = headerField{"bitpix", 72, 14}
	fPixdim   = headerField{"pixdim", 76, 104}
	fVoxOff   = headerField{"vox_offset", 108, 168}
	fQform    = headerField{"qform_code", 252, 344}
	fSform    = headerField{"sform_code", 254, 348}
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

// cstring is b up to its first NUL byte, as a string.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// dec reads the fields of a header at their byte offsets, in its byte
// order, widened to the NIfTI-2 types.
type dec struct {
	b []byte
	o binary.ByteOrder
}

func (d dec) i16(off int) int16   { return int16(d.o.Uint16(d.b[off:])) }
func (d dec) i32(off int) int32   { return int32(d.o.Uint32(d.b[off:])) }
func (d dec) i64(off int) int64   { return int64(d.o.Uint64(d.b[off:])) }
func (d dec) f32(off int) float64 { return float64(math.Float32frombits(d.o.Uint32(d.b[off:]))) }
func (d dec) f64(off int) float64 { return math.Float64frombits(d.o.Uint64(d.b[off:])) }

// parse1 fills h from a NIfTI-1 header.
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
	h.Glmin = d.i32(144)
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

// parse2 fills h from a NIfTI-2 header.
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
	if h.fsLongVector() && h.Glmin <= 0 {
		return fieldErr(file, v, fDim, "dim[1] = -1 (FreeSurfer's long vector) but glmin = %d holds no length", h.Glmin)
	}
	var total uint64 = 1
	for i, d := range h.Shape() {
		if d <= 0 {
			return fieldErr(file, v, fDim, "dim[%d] = %d, want > 0", i+1, h.Dim[i+1])
		}
		hi, lo := bits.Mul64(total, uint64(d))
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
	h.StoredQfac = h.Pixdim[0]
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
