// The U-Net's layers: a convolution's parameters and geometry, the
// conv → norm → activation block, and their forward and backward passes
// on a Device, including the transposed convolution.

package nn

import "github.com/voxtrain/voxtrain/internal/geom"

// conv is a Conv3d (or, with transposed set, a ConvTranspose3d) layer's
// parameters and hyper-parameters.
type conv struct {
	weight, bias        *Param // bias is nil in a layer without one
	inC, outC           int
	kernel, stride, pad [3]int
	transposed          bool
}

// geometry returns the convolution's geometry for a batch of n inputs of
// spatial size in.
func (c *conv) geometry(n int, in [3]int) geom.Conv {
	return geom.Conv{N: n, InD: in[0], InH: in[1], InW: in[2], InC: c.inC, OutC: c.outC,
		KD: c.kernel[0], KH: c.kernel[1], KW: c.kernel[2], SD: c.stride[0], SH: c.stride[1], SW: c.stride[2], PD: c.pad[0], PH: c.pad[1], PW: c.pad[2]}
}

// adjointGeometry returns, for a transposed conv whose output has spatial
// size out, the geometry of its adjoint: the convolution that maps the
// transposed conv's output (c.outC channels) back to its input (c.inC
// channels), in whose terms ConvTransposeForward and ConvTransposeBackward
// are written.
func (c *conv) adjointGeometry(n int, out [3]int) geom.Conv {
	g := c.geometry(n, out)
	g.InC, g.OutC = c.outC, c.inC
	return g
}

// biasW and biasG return the bias and its gradient, nil in a layer
// without a bias.
func (c *conv) biasW() Tensor {
	if c.bias == nil {
		return nil
	}
	return c.bias.W
}

func (c *conv) biasG() Tensor {
	if c.bias == nil {
		return nil
	}
	return c.bias.G
}

// params returns the layer's parameters (weight, then bias if any), for
// the backward pass's ready hook.
func (c *conv) params() []*Param {
	if c.bias == nil {
		return []*Param{c.weight}
	}
	return []*Param{c.weight, c.bias}
}

// block is one conv → instance norm → nonlinearity unit; a linear block
// (a residual block's conv2 and skip projection) has no nonlinearity.
type block struct {
	conv        conv
	gamma, beta *Param // nil without norm
	linear      bool
}

// blockSlope returns the slope of the block's nonlinearity: the model's, or 1
// (the identity) for a linear block.
func (m *UNet) blockSlope(b *block) float32 {
	if b.linear {
		return 1
	}
	return m.slope
}

// params returns the block's parameters: the conv's, then the norm's.
func (b *block) params() []*Param {
	ps := b.conv.params()
	if b.gamma != nil {
		ps = append(ps, b.gamma, b.beta)
	}
	return ps
}

// A convolution's bias right before instance norm changes nothing: the
// norm subtracts each (sample, channel)'s mean, the bias with it, so its
// output is the same without the bias, and the bias's gradient is exactly
// 0 (the norm's input gradient sums to 0 over each sample and channel).
// nnU-Net's networks have it (conv_bias), so it stays a parameter —
// checkpoints, imports and ONNX exports keep it, and weight decay acts on
// it as in PyTorch — but blockForward does not add it and blockBackward
// does not sum its gradient, which NewUNet sets to 0 once (normedBias):
// two passes over every normalised activation saved per step.

// normedBias returns the block's conv bias when an instance norm follows
// it (so that it is not applied), else nil.
func (b *block) normedBias() *Param {
	if b.gamma == nil {
		return nil
	}
	return b.conv.bias
}

// blockForward runs conv → norm → activation.
func (m *UNet) blockForward(b *block, bb *blockBuf, in Tensor) {
	slope := m.blockSlope(b)
	if b.gamma != nil {
		m.dev.Conv3DForward(bb.geom, in, b.conv.weight.W, nil, bb.convOut) // the norm cancels the bias
		m.dev.InstanceNormActForward(bb.convOut, b.gamma.W, b.beta.W, bb.out, bb.stats, m.eps, slope)
		return
	}
	m.dev.Conv3DForward(bb.geom, in, b.conv.weight.W, b.conv.biasW(), bb.out)
	if slope != 1 {
		m.dev.ActForward(bb.out, bb.out, slope)
	}
}

// blockBackward takes the gradient of the block's output in da (which it
// overwrites), accumulates nothing, sets the block's parameter gradients
// and, when dx is not nil, writes the gradient of the block's input to dx.
func (m *UNet) blockBackward(b *block, bb *blockBuf, in, da, dx Tensor) {
	m.blockBackwardVia(b, bb, in, da, da, dx)
}

// blockBackwardVia is blockBackward with the gradient of the conv's output
// written to dz: da itself (blockBackward), or — so that da stays as it
// is, as a residual block's two branches need — another tensor of its
// shape, used when the block has a norm (a linear block without one
// reads da only).
func (m *UNet) blockBackwardVia(b *block, bb *blockBuf, in, da, dz, dx Tensor) {
	slope := m.blockSlope(b)
	if b.gamma != nil {
		m.dev.InstanceNormActBackward(bb.convOut, b.gamma.W, b.beta.W, bb.stats, da, dz, b.gamma.G, b.beta.G, slope)
		// The bias's gradient is 0 (normedBias), set once.
		convBackward(m.dev, &b.conv, bb.geom, in, dz, dx, nil)
		return
	}
	if slope != 1 {
		m.dev.ActBackward(bb.out, da, dz, slope)
		da = dz
	}
	convBackward(m.dev, &b.conv, bb.geom, in, da, dx, b.conv.biasG())
}

// convForward runs a plain conv layer.
func convForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	dev.Conv3DForward(g, in, c.weight.W, c.biasW(), out)
}

// convBackward sets a conv layer's weight gradient from dy, and its bias
// gradient into db unless db is nil, and writes the input gradient to dx
// when it is not nil.
func convBackward(dev Device, c *conv, g geom.Conv, in, dy, dx, db Tensor) {
	dev.Conv3DBackwardWeight(g, in, dy, c.weight.G, db)
	if dx != nil {
		dev.Conv3DBackwardData(g, dy, c.weight.W, dx)
	}
}

// convTForward runs a transposed conv layer.
func convTForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	ConvTransposeForward(dev, g, in, c.weight.W, c.biasW(), out)
}

// convTBackward sets a transposed conv layer's gradients.
func convTBackward(dev Device, c *conv, g geom.Conv, in, dy, dx Tensor) {
	ConvTransposeBackward(dev, g, in, dy, c.weight.W, dx, c.weight.G, c.biasG())
}

// ConvTransposeForward computes a ConvTranspose3d, y = convT(x, w) + b, as
// the data gradient of its adjoint convolution g: g maps the transposed
// conv's output (g.InShape(): (N, D, H, W, Cout)) to its input
// (g.OutShape(): (N, d, h, w, Cin)), and w has g.WeightShape() = (Cin, kD,
// kH, kW, Cout), PyTorch's (Cin, Cout, kD, kH, kW) with Cout moved last.
// b may be nil.
func ConvTransposeForward(dev Device, g geom.Conv, x, w, b, y Tensor) {
	dev.Conv3DBackwardData(g, x, w, y)
	if b != nil {
		dev.AddChannelBias(y, b)
	}
}

// ConvTransposeBackward computes the gradients of ConvTransposeForward from
// dy: dw (overwritten) is the adjoint conv's weight gradient with input and
// output swapped, db (overwritten, may be nil) the channel sums of dy, and
// dx (overwritten, skipped when nil) the adjoint's forward applied to dy.
func ConvTransposeBackward(dev Device, g geom.Conv, x, dy, w, dx, dw, db Tensor) {
	dev.Conv3DBackwardWeight(g, dy, x, dw, nil)
	if db != nil {
		dev.ChannelSum(dy, db)
	}
	if dx != nil {
		dev.Conv3DForward(g, dy, w, nil, dx)
	}
}
