// Package geom holds the one description of a 3D convolution's geometry
// that every layer of voxtrain shares: the U-Net (package nn) builds it,
// the devices (cpu, gpu) check it once at their op boundary, and the
// kernels (cpu/kern, kernels) index with it. It imports nothing of
// voxtrain's, so every package can use it.
package geom

import "fmt"

// Conv describes one 3D convolution over a batch of channels-last
// activations:
//
//	input  (N, InD, InH, InW, InC)
//	weight (OutC, KD, KH, KW, InC)
//	output (N, OutD(), OutH(), OutW(), OutC)
//
// Padding is zero padding applied on both sides of an axis. A transposed
// convolution is described by its adjoint: the Conv that maps the
// transposed convolution's output back to its input.
type Conv struct {
	N                  int // batch size
	InD, InH, InW, InC int // input spatial size and channels
	OutC               int // output channels
	KD, KH, KW         int // kernel size
	SD, SH, SW         int // stride
	PD, PH, PW         int // padding
}

// OutD returns the output depth.
func (g Conv) OutD() int { return (g.InD+2*g.PD-g.KD)/g.SD + 1 }

// OutH returns the output height.
func (g Conv) OutH() int { return (g.InH+2*g.PH-g.KH)/g.SH + 1 }

// OutW returns the output width.
func (g Conv) OutW() int { return (g.InW+2*g.PW-g.KW)/g.SW + 1 }

// InShape returns the input's dimensions (N, InD, InH, InW, InC). It is a
// plain []int, so it can be passed wherever an nn.Shape is expected.
func (g Conv) InShape() []int { return []int{g.N, g.InD, g.InH, g.InW, g.InC} }

// OutShape returns the output's dimensions (N, OutD, OutH, OutW, OutC).
func (g Conv) OutShape() []int { return []int{g.N, g.OutD(), g.OutH(), g.OutW(), g.OutC} }

// WeightShape returns the weight's dimensions (OutC, KD, KH, KW, InC).
func (g Conv) WeightShape() []int { return []int{g.OutC, g.KD, g.KH, g.KW, g.InC} }

// InLen is the number of float32s in the input tensor.
func (g Conv) InLen() int { return g.N * g.InD * g.InH * g.InW * g.InC }

// OutLen is the number of float32s in the output tensor.
func (g Conv) OutLen() int { return g.N * g.OutD() * g.OutH() * g.OutW() * g.OutC }

// WeightLen is the number of float32s in the weight tensor.
func (g Conv) WeightLen() int { return g.OutC * g.KD * g.KH * g.KW * g.InC }

// OutVoxels is the number of output voxels of the whole batch
// (N·OutD·OutH·OutW): the rows of the convolution as a GEMM.
func (g Conv) OutVoxels() int { return g.N * g.OutD() * g.OutH() * g.OutW() }

// PatchLen is the number of inputs one output value reads
// (KD·KH·KW·InC): the reduction length of the convolution as a GEMM, one
// row of its vol2col matrix, one output channel's weights.
func (g Conv) PatchLen() int { return g.KD * g.KH * g.KW * g.InC }

// MACs returns the multiply-accumulates of the forward convolution.
func (g Conv) MACs() int64 {
	return int64(g.N) * int64(g.OutD()*g.OutH()*g.OutW()) * int64(g.OutC) * int64(g.KD*g.KH*g.KW*g.InC)
}

// Validate reports whether the geometry is usable: positive sizes, kernel
// and stride, non-negative padding, and a kernel that fits the padded
// input.
func (g Conv) Validate() error {
	if g.N <= 0 || g.InD <= 0 || g.InH <= 0 || g.InW <= 0 || g.InC <= 0 || g.OutC <= 0 {
		return fmt.Errorf("conv geometry %+v: sizes must be positive", g)
	}
	if g.KD <= 0 || g.KH <= 0 || g.KW <= 0 || g.SD <= 0 || g.SH <= 0 || g.SW <= 0 {
		return fmt.Errorf("conv geometry %+v: kernel and stride must be positive", g)
	}
	if g.PD < 0 || g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("conv geometry %+v: padding must be non-negative", g)
	}
	if g.OutD() <= 0 || g.OutH() <= 0 || g.OutW() <= 0 {
		return fmt.Errorf("conv geometry %+v: kernel larger than padded input", g)
	}
	return nil
}
