// Package safetensors reads and writes the safetensors tensor file format
// (https://huggingface.co/docs/safetensors), the format PyTorch users load
// with safetensors.torch.load_file.
//
// A file is
//
//	8 bytes   N, the header length, unsigned little-endian
//	N bytes   a UTF-8 JSON object, padded with spaces to a multiple of 8:
//	          {"__metadata__": {string: string},          (optional)
//	           name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
//	rest      the tensors' bytes, row-major, little-endian; offsets are
//	          relative to the start of this section, contiguous, and cover it
//	          exactly.
//
// Write lays a file out exactly as the reference implementation (the Rust
// crate behind the Python package) does: tensors sorted by descending dtype
// alignment and then by name, compact JSON with __metadata__ first, header
// padded with spaces to 8 bytes, so a file written here is byte-identical to
// the one Python's safetensors writes for the same tensors (metadata keys are
// sorted here; the reference leaves their order unspecified).
//
// Parse validates everything before handing out a tensor: header length
// against the file size, UTF-8 and JSON syntax, duplicate names, known
// dtypes, dtype × shape against the byte length (with overflow checks), and
// offsets contiguous from 0 to the end of the file. It never allocates more
// than the file holds and reports problems as *FormatError naming the file
// and the tensor.
package safetensors

import (
	"fmt"
	"math/bits"
)

// DType is a safetensors element type, spelled as in the header ("F32").
type DType string

// The element types of the format. Sub-byte types (F4, F6_*) are not
// supported: Parse rejects them as unknown.
const (
	BOOL       DType = "BOOL"
	U8         DType = "U8"
	I8         DType = "I8"
	F8E5M2     DType = "F8_E5M2"
	F8E4M3     DType = "F8_E4M3"
	F8E8M0     DType = "F8_E8M0"
	F8E4M3FNUZ DType = "F8_E4M3FNUZ"
	F8E5M2FNUZ DType = "F8_E5M2FNUZ"
	I16        DType = "I16"
	U16        DType = "U16"
	F16        DType = "F16"
	BF16       DType = "BF16"
	I32        DType = "I32"
	U32        DType = "U32"
	F32        DType = "F32"
	C64        DType = "C64"
	F64        DType = "F64"
	I64        DType = "I64"
	U64        DType = "U64"
)

// MaxHeaderSize is the largest header the reference implementation accepts
// (100 MB); Parse rejects larger ones.
const MaxHeaderSize = 100_000_000

// metaKey is the header key of the file's string-to-string metadata.
const metaKey = "__metadata__"

// dtypeInfo gives each dtype its element size and its rank in the reference
// implementation's Dtype enum, whose order is increasing alignment; Write
// sorts by descending rank, as the reference does.
var dtypeInfo = map[DType]struct{ size, rank int }{
	BOOL: {1, 0}, U8: {1, 1}, I8: {1, 2},
	F8E5M2: {1, 3}, F8E4M3: {1, 4}, F8E8M0: {1, 5}, F8E4M3FNUZ: {1, 6}, F8E5M2FNUZ: {1, 7},
	I16: {2, 8}, U16: {2, 9}, F16: {2, 10}, BF16: {2, 11},
	I32: {4, 12}, U32: {4, 13}, F32: {4, 14},
	C64: {8, 15}, F64: {8, 16}, I64: {8, 17}, U64: {8, 18},
}

// Size is the number of bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeInfo[d].size }

// Valid reports whether d is a dtype this package knows.
func (d DType) Valid() bool { _, ok := dtypeInfo[d]; return ok }

// Tensor is one named tensor to write: raw little-endian bytes in row-major
// order, len(Data) == NumElements(Shape) × DType.Size().
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// FormatError is a problem with a safetensors file's structure or with a
// tensor given to Write.
type FormatError struct {
	File   string // the file's name as given to Parse/Open ("" when writing to a stream)
	Tensor string // the tensor concerned, "" for the file as a whole
	Msg    string
}

// Error names the file, the tensor when there is one, and what is wrong.
func (e *FormatError) Error() string {
	f := e.File
	if f == "" {
		f = "safetensors"
	}
	if e.Tensor != "" {
		return fmt.Sprintf("%s: tensor %q: %s", f, e.Tensor, e.Msg)
	}
	return fmt.Sprintf("%s: %s", f, e.Msg)
}

// byteLen returns the byte length of a tensor of dtype d and the given shape,
// and false when a dimension is negative or the size overflows 63 bits.
func byteLen(d DType, shape []int) (int64, bool) {
	n := uint64(d.Size())
	for _, s := range shape {
		if s < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<62 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// NumElements is the product of shape (1 for a scalar's empty shape), or -1
// when a dimension is negative or the product overflows.
func NumElements(shape []int) int {
	n := uint64(1)
	for _, s := range shape {
		if s < 0 {
			return -1
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<62 {
			return -1
		}
		n = lo
	}
	return int(n)
}
