// The U-Net's layers: a convolution's parameters and geometry, the
// conv → norm → activation block, and their forward and backward passes
// on a Device, including the transposed convolution.

package nn

import "github.com/voxtrain/voxtrain/internal/geom"

// conv is a Conv3d (or, with transposed set, a ConvTranspose3d) layer's
// parameters and hyper-parameters.
type conv struct {
	w, b       *Param // b is nil without bias
	inC, outC  int
	k, s, p    [3]int
	transposed bool
}

// geom returns the layer's geometry for a batch of n inputs of spatial size
// in. For a transposed conv it is the geometry of the adjoint convolution,
// which maps the transposed conv's output (size out) back to its input.
func (c *conv) geom(n int, in [3]int) geom.Conv {
	return geom.Conv{N: n, InD: in[0], InH: in[1], InW: in[2], InC: c.inC, OutC: c.outC,
		KD: c.k[0], KH: c.k[1], KW: c.k[2], SD: c.s[0], SH: c.s[1], SW: c.s[2], PD: c.p[0], PH: c.p[1], PW: c.p[2]}
}

// tgeom returns a transposed conv's adjoint geometry for output size out.
func (c *conv) tgeom(n int, out [3]int) geom.Conv {
	return geom.Conv{N: n, InD: out[0], InH: out[1], InW: out[2], InC: c.outC, OutC: c.inC,
		KD: c.k[0], KH: c.k[1], KW: c.k[2], SD: c.s[0], SH: c.s[1], SW: c.s[2], PD: c.p[0], PH: c.p[1], PW: c.p[2]}
}

// block is one conv → instance norm → nonlinearity unit.
type block struct {
	conv        conv
	gamma, beta *Param // nil without norm
}

// blockForward runs conv → norm → activation.
func (m *UNet) blockForward(b *block, bb *blockBuf, in Tensor) {
	var bias Tensor
	if b.conv.b != nil {
		bias = b.conv.b.W
	}
	if b.gamma != nil {
		m.dev.Conv3DForward(bb.g, in, b.conv.w.W, bias, bb.z)
		m.dev.InstanceNormActForward(bb.z, b.gamma.W, b.beta.W, bb.a, bb.stats, m.eps, m.slope)
		return
	}
	m.dev.Conv3DForward(bb.g, in, b.conv.w.W, bias, bb.a)
	if m.slope != 1 {
		m.dev.ActForward(bb.a, bb.a, m.slope)
	}
}

// blockBackward takes the gradient of the block's output in da (which it
// overwrites), accumulates nothing, sets the block's parameter gradients
// and, when dx is not nil, writes the gradient of the block's input to dx.
func (m *UNet) blockBackward(b *block, bb *blockBuf, in, da, dx Tensor) {
	if b.gamma != nil {
		m.dev.InstanceNormActBackward(bb.z, b.gamma.W, b.beta.W, bb.stats, da, da, b.gamma.G, b.beta.G, m.slope)
	} else if m.slope != 1 {
		m.dev.ActBackward(bb.a, da, da, m.slope)
	}
	convBackward(m.dev, &b.conv, bb.g, in, da, dx)
}

// convForward runs a plain conv layer.
func convForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	var bias Tensor
	if c.b != nil {
		bias = c.b.W
	}
	dev.Conv3DForward(g, in, c.w.W, bias, out)
}

// convBackward sets a plain conv layer's gradients from dy and writes the
// input gradient to dx when it is not nil.
func convBackward(dev Device, c *conv, g geom.Conv, in, dy, dx Tensor) {
	var db Tensor
	if c.b != nil {
		db = c.b.G
	}
	dev.Conv3DBackwardWeight(g, in, dy, c.w.G, db)
	if dx != nil {
		dev.Conv3DBackwardData(g, dy, c.w.W, dx)
	}
}

// convTForward runs a transposed conv layer.
func convTForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	var b Tensor
	if c.b != nil {
		b = c.b.W
	}
	ConvTransposeForward(dev, g, in, c.w.W, b, out)
}

// convTBackward sets a transposed conv layer's gradients.
func convTBackward(dev Device, c *conv, g geom.Conv, in, dy, dx Tensor) {
	var db Tensor
	if c.b != nil {
		db = c.b.G
	}
	ConvTransposeBackward(dev, g, in, dy, c.w.W, dx, c.w.G, db)
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
