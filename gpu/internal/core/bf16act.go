package core

// bf16 activation storage (Options.BF16Activations): the tensors of
// AllocActivation hold bfloat16, and with Options.BF16Gradients so do the
// tensors of AllocActivationGradient (the gradients of those
// activations). The ops nn applies to them accept them where nn passes
// them:
//
//   - activations: Conv3DForward (x, y), Conv3DBackwardData (dy, dx: the
//     transposed convolution's forward), Conv3DBackwardWeight (x; dy in
//     the transposed convolution's backward), AddChannelBias,
//     ConcatChannels, InstanceNormActForward (x, y),
//     InstanceNormActBackward (x), ActForward (x, y), ActBackward (y);
//   - activation gradients: Add (dst and src), InstanceNormActBackward
//     (dy, dx), ActBackward (dy, dx), Conv3DBackwardWeight (dy; x in the
//     transposed convolution's backward), Conv3DBackwardData (dx, from a
//     bf16 dy or a head's float32 dlogits), Conv3DForward (x and y: the
//     transposed convolution's backward), SplitChannels (src, a, b) and
//     ChannelSum (t).
//
// Every other operand, and every other op, takes float32 only (Device.f32
// panics otherwise).
//
// The convolutions read and write bf16 tensors as they are where cuDNN
// or the bf16 GEMMs take bf16 anyway (conv_dnn.go, conv_bf16.go: a larger
// kernel's bf16 input through vol2col_bf16x, its bf16 backward-data
// output through col2vol_bf16). The instance norm and the activation
// (forward: x and y both bf16; backward: x bf16 with dy, dx float32, or
// all three bf16), the channel bias, the concatenation and the split of
// three bf16 tensors, the sum of two and a bf16 tensor's channel sums
// have bf16 kernels (the _bf16 and _bf16g twins in kernels/norm.cu,
// elementwise.cu and reduce.cu), which read and write bf16 once and
// compute in float32. So as nn passes them no op widens a bf16 tensor
// into a float32 copy. Only the other mixes of element types, which nn
// does not pass, go through float32 copies (wideIn, wideOut, widened
// below): their bf16 operands are widened (exact), the float32 op runs,
// and their bf16 outputs are rounded once from the float32 result. Both
// give the float32 op's result on the bf16 values, rounded to bf16 (to
// nearest even), bit for bit.

// wideIn returns a float32 pointer to t's values: t's own for a float32
// tensor, a widened copy in buf for a bf16 one.
func (d *Device[B]) wideIn(op string, t *Tensor[B], buf *buffer[B]) (B, bool) {
	if !t.bf16 {
		return t.ptr, true
	}
	p, ok := d.need(op, buf, 4*t.elems)
	if ok {
		d.check(op, d.ops.BF16ToF32(t.ptr, p, t.elems))
	}
	return p, ok
}

// wideOut returns where an op writes t's values in float32: t itself for a
// float32 tensor, buf for a bf16 one (then narrow rounds them into t).
func (d *Device[B]) wideOut(op string, t *Tensor[B], buf *buffer[B]) (B, bool) {
	if !t.bf16 {
		return t.ptr, true
	}
	return d.need(op, buf, 4*t.elems)
}

// narrow rounds the float32 values at p (from wideOut) into t when t is
// bf16.
func (d *Device[B]) narrow(op string, t *Tensor[B], p B) {
	if t.bf16 {
		d.check(op, d.ops.F32ToBF16(p, t.ptr, t.elems))
	}
}

// widened runs f, an op's float32 kernel reading x and writing y, on
// float32 views of them (wideIn, wideOut; x's in wideA, y's in wideC) and
// rounds y back when it is bf16: the path of an op given a bf16/float32
// mix its bf16 kernel does not take.
func (d *Device[B]) widened(op string, xt, yt *Tensor[B], f func(xp, yp B)) {
	xp, ok := d.wideIn(op, xt, &d.wideA)
	if !ok {
		return
	}
	yp, ok := d.wideOut(op, yt, &d.wideC)
	if !ok {
		return
	}
	f(xp, yp)
	d.narrow(op, yt, yp)
}
