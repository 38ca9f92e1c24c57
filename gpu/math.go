//go:build cuda

// The GEMMs' precision modes (Options.Math).

package gpu

import (
	"fmt"
	"strings"
)

// Math selects how cuBLAS computes the convolutions' float32 GEMMs.
type Math int

const (
	// MathFP32 computes in float32 (CUBLAS_DEFAULT_MATH): the results
	// match the CPU device to float32 rounding.
	MathFP32 Math = iota
	// MathTF32 lets cuBLAS use TF32 tensor cores (Ampere and later):
	// inputs rounded to a 10-bit mantissa, float32 accumulation, several
	// times the FP32 throughput. PyTorch enables it for convolutions by
	// default (torch.backends.cudnn.allow_tf32).
	MathTF32
	// MathBF16 is bf16 mixed precision: the convolutions' GEMMs take
	// bfloat16 operands (8-bit mantissa) on tensor cores and accumulate in
	// float32; activations and their gradients are stored as bfloat16
	// (unless Options.FloatActivations, FloatGradients), weights,
	// parameter gradients and optimiser state stay float32 (see
	// core.Options.BF16, BF16Activations, BF16Gradients). bf16 has
	// float32's exponent range, so no loss scaling is needed.
	MathBF16
)

// String returns the mode's name as ParseMath reads it.
func (m Math) String() string {
	switch m {
	case MathTF32:
		return "tf32"
	case MathBF16:
		return "bf16"
	}
	return "fp32"
}

// ParseMath parses "fp32", "tf32" or "bf16".
func ParseMath(s string) (Math, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "":
		return MathFP32, nil
	case "tf32":
		return MathTF32, nil
	case "bf16":
		return MathBF16, nil
	}
	return 0, fmt.Errorf("gpu: math mode %q, want fp32, tf32 or bf16", s)
}

// Conv selects who computes the convolutions (Options.Conv).
type Conv int

const (
	// ConvAuto uses cuDNN with tf32 and bf16 when it is found, and
	// voxtrain's own convolutions (vol2col and cuBLAS) otherwise — in
	// fp32 always, where they are the faster (docs/GPU.md). Without
	// cuDNN it says so once.
	ConvAuto Conv = iota
	// ConvOwn uses voxtrain's own convolutions even where cuDNN is found.
	ConvOwn
	// ConvCuDNN uses cuDNN and fails to open the device without it.
	ConvCuDNN
)

// String returns the choice's name as ParseConv reads it.
func (c Conv) String() string {
	switch c {
	case ConvOwn:
		return "own"
	case ConvCuDNN:
		return "cudnn"
	}
	return "auto"
}

// ParseConv parses "auto", "own" or "cudnn".
func ParseConv(s string) (Conv, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return ConvAuto, nil
	case "own":
		return ConvOwn, nil
	case "cudnn":
		return ConvCuDNN, nil
	}
	return 0, fmt.Errorf("gpu: convolutions %q, want auto, own or cudnn", s)
}
