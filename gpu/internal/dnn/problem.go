// Package dnn runs package core's convolutions through cuDNN. It turns a
// geom.Conv into the arguments of cuDNN's descriptors for voxtrain's
// channels-last (NDHWC) tensors, chooses an algorithm per shape by timing
// them at first use (what PyTorch's cudnn.benchmark does), remembers the
// choice in memory and on disk per GPU model and cuDNN version, and sizes
// the workspace.
//
// It is pure Go over the Lib interface, so all of it is tested without a
// GPU: package gpu implements Lib with the real library (opened with
// dlopen), and the tests of package core with a fake that checks every
// argument as cuDNN does and computes with the CPU device.
package dnn

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// DataType is cuDNN's cudnnDataType_t.
type DataType int32

// The data types used (cudnn_graph.h; the values are stable since cuDNN 8).
const (
	Float    DataType = 0 // CUDNN_DATA_FLOAT
	BFloat16 DataType = 9 // CUDNN_DATA_BFLOAT16
)

// Size returns the bytes of one element.
func (t DataType) Size() int {
	if t == BFloat16 {
		return 2
	}
	return 4
}

func (t DataType) String() string {
	switch t {
	case Float:
		return "float"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("cudnnDataType %d", int32(t))
}

// MathType is cuDNN's cudnnMathType_t.
type MathType int32

// The math types (cudnn_graph.h).
const (
	// DefaultMath lets cuDNN use tensor cores where the data type allows;
	// for float data on Ampere and later that means TF32.
	DefaultMath MathType = 0
	// TensorOpMath asks for tensor cores (bf16 data).
	TensorOpMath MathType = 1
	// FMAMath forbids tensor cores: float data computed in float32.
	FMAMath MathType = 3
)

// Layout and mode constants (cudnn_graph.h, cudnn_cnn.h).
const (
	FormatNHWC       int32 = 1 // CUDNN_TENSOR_NHWC: channels last
	CrossCorrelation int32 = 1 // CUDNN_CROSS_CORRELATION: no kernel flip, as nn's (and PyTorch's) convolutions
)

// Precision is how the convolutions compute.
type Precision int

const (
	// FP32: float32 data and arithmetic, no tensor cores.
	FP32 Precision = iota
	// TF32: float32 data, TF32 tensor cores (10-bit mantissa inputs,
	// float32 accumulation), PyTorch's default for convolutions.
	TF32
	// BF16: bfloat16 data on tensor cores, float32 accumulation
	// (PyTorch's autocast).
	BF16
)

// ElemSize returns the bytes of one tensor element in precision p.
func (p Precision) ElemSize() int {
	if p == BF16 {
		return 2
	}
	return 4
}

func (p Precision) String() string {
	switch p {
	case TF32:
		return "tf32"
	case BF16:
		return "bf16"
	}
	return "fp32"
}

// Tensor holds cudnnSetTensorNdDescriptor's arguments for a 5-D tensor:
// the data type, and dimensions and strides in cuDNN's order (N, C, D, H,
// W) whatever the memory layout.
type Tensor struct {
	Type          DataType
	Dims, Strides [5]int32
}

// Filter holds cudnnSetFilterNdDescriptor's arguments: the data type, the
// format, and the dimensions (K, C, D, H, W). With FormatNHWC the memory
// is K, D, H, W, C — nn's (O, kD, kH, kW, I) weights as they are.
type Filter struct {
	Type   DataType
	Format int32
	Dims   [5]int32
}

// Convolution holds the arguments of cudnnSetConvolutionNdDescriptor
// (padding, stride, dilation per spatial axis, mode, compute type) and of
// cudnnSetConvolutionMathType.
type Convolution struct {
	Pad, Stride, Dilation [3]int32
	Mode                  int32
	Compute               DataType
	Math                  MathType
}

// Problem is one convolution as cuDNN sees it: the input x, the filter w,
// the output y and the convolution. The backward passes use the same
// descriptors (dx like x, dy like y, dw like w). It is comparable, so it
// keys maps.
type Problem struct {
	X, Y Tensor
	W    Filter
	Conv Convolution
}

// NewProblem describes g's convolution in precision p for NDHWC tensors
// packed without gaps, as nn's are. It fails when a dimension or a
// stride does not fit cuDNN's int.
func NewProblem(g geom.Conv, p Precision) (Problem, error) {
	if err := g.Validate(); err != nil {
		return Problem{}, err
	}
	dt, compute, mt := Float, Float, FMAMath
	switch p {
	case TF32:
		mt = DefaultMath
	case BF16:
		dt, mt = BFloat16, TensorOpMath
	}
	x, err := ndhwc(dt, g.N, g.InC, g.InD, g.InH, g.InW)
	if err != nil {
		return Problem{}, fmt.Errorf("input of %+v: %w", g, err)
	}
	y, err := ndhwc(dt, g.N, g.OutC, g.OutD(), g.OutH(), g.OutW())
	if err != nil {
		return Problem{}, fmt.Errorf("output of %+v: %w", g, err)
	}
	if int64(g.WeightLen()) > math.MaxInt32 {
		return Problem{}, fmt.Errorf("weights of %+v: %d elements exceed cuDNN's int", g, g.WeightLen())
	}
	return Problem{
		X: x, Y: y,
		W: Filter{Type: dt, Format: FormatNHWC, Dims: [5]int32{int32(g.OutC), int32(g.InC), int32(g.KD), int32(g.KH), int32(g.KW)}},
		Conv: Convolution{
			Pad:      [3]int32{int32(g.PD), int32(g.PH), int32(g.PW)},
			Stride:   [3]int32{int32(g.SD), int32(g.SH), int32(g.SW)},
			Dilation: [3]int32{1, 1, 1},
			Mode:     CrossCorrelation,
			Compute:  compute,
			Math:     mt,
		},
	}, nil
}

// ndhwc returns the descriptor of an (n, d, h, w, c) channels-last tensor:
// dimensions in cuDNN's (N, C, D, H, W) order with the strides of that
// memory layout — C varies fastest (stride 1), then W (stride c), H, D, N.
func ndhwc(dt DataType, n, c, d, h, w int) (Tensor, error) {
	if total := int64(n) * int64(c) * int64(d) * int64(h) * int64(w); total > math.MaxInt32 {
		return Tensor{}, fmt.Errorf("%d elements exceed cuDNN's int strides", total)
	}
	return Tensor{
		Type:    dt,
		Dims:    [5]int32{int32(n), int32(c), int32(d), int32(h), int32(w)},
		Strides: [5]int32{int32(d * h * w * c), 1, int32(h * w * c), int32(w * c), int32(c)},
	}, nil
}

// Elems returns the number of elements the tensor spans.
func (t Tensor) Elems() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// Elems returns the number of elements of the filter.
func (f Filter) Elems() int {
	n := 1
	for _, d := range f.Dims {
		n *= int(d)
	}
	return n
}

// String describes the problem compactly, for messages and the disk cache.
func (p Problem) String() string {
	d := p.X.Dims
	return fmt.Sprintf("x %dx%dx%dx%dx%d w %dx%dx%dx%d pad %d,%d,%d stride %d,%d,%d %s math %d",
		d[0], d[2], d[3], d[4], d[1], p.W.Dims[0], p.W.Dims[2], p.W.Dims[3], p.W.Dims[4],
		p.Conv.Pad[0], p.Conv.Pad[1], p.Conv.Pad[2], p.Conv.Stride[0], p.Conv.Stride[1], p.Conv.Stride[2],
		p.X.Type, p.Conv.Math)
}
