package core

// bf16 activation storage (Options.BF16Activations): the tensors of
// AllocActivation hold bfloat16, and the ops nn applies to activations
// accept them where nn passes them — Conv3DForward (x, y),
// Conv3DBackwardData (dy, dx: the transposed convolution's forward),
// Conv3DBackwardWeight (x, dy: the transposed convolution's input),
// AddChannelBias, ConcatChannels, InstanceNormActForward (x, y),
// InstanceNormActBackward (x), ActForward (x, y) and ActBackward (y).
// Every other operand, and every other op, takes float32 only (Device.f32
// panics otherwise).
//
// The convolutions read and write bf16 activations as they are where
// cuDNN or the bf16 GEMMs take bf16 anyway (conv_dnn.go, conv_bf16.go).
// The instance norm (x and y both bf16, or x for the backward), the
// activation (likewise), the channel bias and the concatenation of three
// bf16 tensors have bf16 kernels (the _bf16 twins in kernels/norm.cu and
// elementwise.cu), which read and write bf16 once and compute in float32.
// Where an op has no bf16 kernel — the other mixes of element types, and
// a bf16 dy's bias gradient in Conv3DBackwardWeight — its bf16 operands
// are widened into a float32 copy (exact), the float32 op runs, and its
// bf16 outputs are rounded once from the float32 result. Both give the
// float32 op's result on the bf16 values, rounded to bf16 (to nearest
// even), bit for bit.

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
