package nifti

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/volume"
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

	DimInfo    uint8
	Dim        [8]int64
	IntentP1   float64
	IntentP2   float64
	IntentP3   float64
	IntentCode int32
	Datatype   Datatype
	Bitpix     int16
	SliceStart int64
	Pixdim     [8]float64
	// StoredQfac is pixdim[0] as the file stores it. Pixdim[0] holds the
	// qfac in use: a stored value other than ±1 (often 0) reads as 1, as
	// nibabel's check_fix sets it and the NIfTI standard says to apply it;
	// fslhd prints the stored value, which `train info` shows too.
	StoredQfac    float64
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
	// Glmin is NIfTI-1's unused glmin field, which FreeSurfer (and
	// nibabel) use for the length of a vector too long for dim[1]'s int16:
	// dim = (-1, 1, 1) and the length here (see Shape).
	Glmin int32

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

// Shape returns dim[1..dim[0]] (x first, as nibabel's img.shape), with
// the two FreeSurfer conventions nibabel applies to NIfTI-1 headers of
// long vectors: dim (-1, 1, 1) is a vector of Glmin elements, and the ico7
// surface's 163842 vertices, stored as (27307, 1, 6), are (163842, 1, 1).
func (h *Header) Shape() []int {
	n := h.NDim()
	if n < 1 || n > 7 {
		return nil
	}
	s := make([]int, n)
	for i := range s {
		s[i] = int(h.Dim[i+1])
	}
	if n >= 3 && h.Version == 1 {
		switch {
		case s[0] == -1 && s[1] == 1 && s[2] == 1:
			s[0] = int(h.Glmin)
		case s[0] == fsIco7Stored && s[1] == 1 && s[2] == 6:
			s[0], s[2] = fsIco7Vertices, 1
		}
	}
	return s
}

// The ico7 surface convention of FreeSurfer (nibabel's
// Nifti1Header.get_data_shape): 163842 = 27307 × 6.
const (
	fsIco7Vertices = 163842
	fsIco7Stored   = 27307
)

// fsLongVector reports whether h uses FreeSurfer's long-vector convention
// (NIfTI-1, dim[1..3] = (-1, 1, 1), the length in glmin).
func (h *Header) fsLongVector() bool {
	return h.Version == 1 && h.Dim[0] >= 3 && h.Dim[1] == -1 && h.Dim[2] == 1 && h.Dim[3] == 1
}

// NumVoxels returns the product of the dimensions (of Shape). It is only
// meaningful on a header that passed validation (reading validates).
func (h *Header) NumVoxels() int64 {
	n := int64(1)
	for _, d := range h.Shape() {
		n *= int64(d)
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

// SpatialUnit returns the spatial unit of xyzt_units as UDUNITS-2 and
// OME-NGFF name it ("meter", "millimeter", "micrometer"; see
// volume.Header.Unit), "" when the code is 0 (unknown) or one the
// standard does not define: SpaceUnits' name, normalised, so that the
// codes are mapped in one place.
func (h *Header) SpatialUnit() string {
	if u := h.SpaceUnits(); u != "unknown" {
		return volume.NormalizeUnit(u)
	}
	return ""
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
