package nifti

import "fmt"

// Datatype is the NIfTI datatype code of the stored voxels (the header's
// "datatype" field).
type Datatype int16

// The datatype codes voxtrain reads and writes. Codes are those of nifti1.h.
const (
	Uint8      Datatype = 2
	Int16      Datatype = 4
	Int32      Datatype = 8
	Float32    Datatype = 16
	Complex64  Datatype = 32
	Float64    Datatype = 64
	RGB24      Datatype = 128
	Int8       Datatype = 256
	Uint16     Datatype = 512
	Uint32     Datatype = 768
	Int64      Datatype = 1024
	Uint64     Datatype = 1280
	Complex128 Datatype = 1792
	RGBA32     Datatype = 2304
)

// dtInfo describes how a datatype is laid out in the file.
type dtInfo struct {
	name string
	// size is bytes per voxel.
	size int
	// comp is the size in bytes of one scalar component, the unit that a byte
	// swap reverses (the whole voxel for scalars, one float for complex, one
	// byte for RGB).
	comp int
	// ncomp is the number of components per voxel.
	ncomp int
	// scalar is true when a voxel converts to one float32 value.
	scalar bool
}

var dtTable = map[Datatype]dtInfo{
	Uint8:      {"uint8", 1, 1, 1, true},
	Int8:       {"int8", 1, 1, 1, true},
	Int16:      {"int16", 2, 2, 1, true},
	Uint16:     {"uint16", 2, 2, 1, true},
	Int32:      {"int32", 4, 4, 1, true},
	Uint32:     {"uint32", 4, 4, 1, true},
	Int64:      {"int64", 8, 8, 1, true},
	Uint64:     {"uint64", 8, 8, 1, true},
	Float32:    {"float32", 4, 4, 1, true},
	Float64:    {"float64", 8, 8, 1, true},
	Complex64:  {"complex64", 8, 4, 2, false},
	Complex128: {"complex128", 16, 8, 2, false},
	RGB24:      {"RGB24", 3, 1, 3, false},
	RGBA32:     {"RGBA32", 4, 1, 4, false},
}

// knownButUnsupported names datatype codes that exist in nifti1.h but that
// voxtrain does not decode, so the error can say what the code means.
var knownButUnsupported = map[Datatype]string{
	1:    "binary (1 bit)",
	1536: "float128",
	2048: "complex256",
}

// String returns the datatype's name, e.g. "int16".
func (d Datatype) String() string {
	if i, ok := dtTable[d]; ok {
		return i.name
	}
	if n, ok := knownButUnsupported[d]; ok {
		return n
	}
	return fmt.Sprintf("datatype(%d)", int16(d))
}

// Size returns the number of bytes per voxel, or 0 for an unsupported code.
func (d Datatype) Size() int { return dtTable[d].size }

// Supported reports whether voxtrain can read and write voxels of this type.
func (d Datatype) Supported() bool { _, ok := dtTable[d]; return ok }

// Scalar reports whether a voxel of this type is one real number (integer or
// float). Complex and RGB types are not scalar.
func (d Datatype) Scalar() bool { return dtTable[d].scalar }

// Components returns the number of values in one voxel: 1 for scalars, 2 for
// complex, 3 for RGB24, 4 for RGBA32.
func (d Datatype) Components() int { return dtTable[d].ncomp }
