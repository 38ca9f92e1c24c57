// The data-movement and elementwise ops: fills, copies, arithmetic, layout
// transposes, concat/split, channel bias and its gradient, label
// resampling.

package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// Fill sets every element of t to v.
func (d *Device[B]) Fill(t nn.Tensor, v float32) {
	d.begin("Fill")
	ct := d.f32(t)
	d.check("Fill", d.ops.Fill(ct.ptr, ct.elems, v))
}

// Copy copies src into dst (same length).
func (d *Device[B]) Copy(dst, src nn.Tensor) {
	d.begin("Copy")
	s := d.f32(src)
	d.check("Copy", d.ops.Copy(d.mustLen("Copy", dst, s.elems), s.ptr, s.elems))
}

// Add computes dst += src. Both may be bf16 activation gradients (the
// U-Net's sum of a deep-supervision head's and the decoder's gradients):
// the sums are rounded to bf16; a bf16/float32 mix panics.
func (d *Device[B]) Add(dst, src nn.Tensor) {
	const op = "Add"
	d.begin(op)
	if dt, st := d.Tensor(dst), d.Tensor(src); dt.bf16 && st.bf16 {
		d.sameLen(op, dst, st.elems)
		d.check(op, d.ops.AddBF16(dt.ptr, st.ptr, st.elems))
		return
	}
	s := d.f32(src)
	d.check(op, d.ops.Add(d.mustLen(op, dst, s.elems), s.ptr, s.elems))
}

// Scale computes t *= alpha.
func (d *Device[B]) Scale(t nn.Tensor, alpha float32) {
	d.begin("Scale")
	ct := d.f32(t)
	d.check("Scale", d.ops.Scale(ct.ptr, ct.elems, alpha))
}

// NCDHWToNDHWC converts a channels-first tensor to channels-last.
func (d *Device[B]) NCDHWToNDHWC(src, dst nn.Tensor) {
	const op = "NCDHWToNDHWC"
	d.begin(op)
	n, c, dd, h, w := d.dims5(op, src)
	dp := d.mustShape(op, dst, nn.Shape{n, dd, h, w, c})
	d.check(op, d.ops.NCDHWToNDHWC(d.ptr(src), dp, n, c, dd*h*w))
}

// NDHWCToNCDHW converts a channels-last tensor to channels-first.
func (d *Device[B]) NDHWCToNCDHW(src, dst nn.Tensor) {
	const op = "NDHWCToNCDHW"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, src)
	dp := d.mustShape(op, dst, nn.Shape{n, c, dd, h, w})
	d.check(op, d.ops.NDHWCToNCDHW(d.ptr(src), dp, n, c, dd*h*w))
}

// ConcatChannels writes dst = concat(a, b) along the channel axis. Any of
// them may be bf16 activations: all three bf16 (the U-Net's skip
// connections) copy the bf16 values directly, other mixes go through
// float32 copies.
func (d *Device[B]) ConcatChannels(a, b, dst nn.Tensor) {
	const op = "ConcatChannels"
	d.begin(op)
	n, dd, h, w, ca := d.dims5(op, a)
	cb := d.lastDim(op, b)
	at := d.Tensor(a)
	bt := d.shaped(op, b, nn.Shape{n, dd, h, w, cb})
	dt := d.shaped(op, dst, nn.Shape{n, dd, h, w, ca + cb})
	if at.bf16 && bt.bf16 && dt.bf16 {
		d.check(op, d.ops.ConcatChannelsBF16(at.ptr, bt.ptr, dt.ptr, n*dd*h*w, ca, cb))
		return
	}
	ap, ok := d.wideIn(op, at, &d.wideA)
	if !ok {
		return
	}
	bp, ok := d.wideIn(op, bt, &d.wideB)
	if !ok {
		return
	}
	dp, ok := d.wideOut(op, dt, &d.wideC)
	if !ok {
		return
	}
	d.check(op, d.ops.ConcatChannels(ap, bp, dp, n*dd*h*w, ca, cb))
	d.narrow(op, dt, dp)
}

// SplitChannels writes the first channels of src to a and the rest to b.
// Any of them may be bf16 activation gradients: all three bf16 (a
// concat's gradient split into its parts') copy the bf16 values
// directly, other mixes go through float32 copies.
func (d *Device[B]) SplitChannels(src, a, b nn.Tensor) {
	const op = "SplitChannels"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, src)
	ca := d.lastDim(op, a)
	cb := c - ca
	st := d.Tensor(src)
	at := d.shaped(op, a, nn.Shape{n, dd, h, w, ca})
	bt := d.shaped(op, b, nn.Shape{n, dd, h, w, cb})
	if st.bf16 && at.bf16 && bt.bf16 {
		d.check(op, d.ops.SplitChannelsBF16(st.ptr, at.ptr, bt.ptr, n*dd*h*w, ca, cb))
		return
	}
	sp, ok := d.wideIn(op, st, &d.wideA)
	if !ok {
		return
	}
	ap, ok := d.wideOut(op, at, &d.wideB)
	if !ok {
		return
	}
	bp, ok := d.wideOut(op, bt, &d.wideC)
	if !ok {
		return
	}
	d.check(op, d.ops.SplitChannels(sp, ap, bp, n*dd*h*w, ca, cb))
	d.narrow(op, at, ap)
	d.narrow(op, bt, bp)
}

// AddChannelBias adds bias[c] to every element of channel c of t; t may
// be a bf16 activation (the transposed convolution's output).
func (d *Device[B]) AddChannelBias(t, bias nn.Tensor) {
	const op = "AddChannelBias"
	d.begin(op)
	c := d.lastDim(op, t)
	d.addBias(op, d.Tensor(t), d.mustLen(op, bias, c))
}

// addBias adds bias[c] (float32 at bp) to every element of channel c of
// t, of either element type (a bf16 t in place, each sum rounded).
func (d *Device[B]) addBias(op string, t *Tensor[B], bp B) {
	c := t.shape[len(t.shape)-1]
	if t.bf16 {
		d.check(op, d.ops.AddChannelBiasBF16(t.ptr, bp, t.elems/c, c))
		return
	}
	d.check(op, d.ops.AddChannelBias(t.ptr, bp, t.elems/c, c))
}

// ChannelSum writes dst[c] = Σ over all other axes of t[..., c]. t may be
// a bf16 activation gradient (a transposed convolution's bias gradient),
// read as it is; dst is float32.
func (d *Device[B]) ChannelSum(t, dst nn.Tensor) {
	const op = "ChannelSum"
	d.begin(op)
	c := d.lastDim(op, t)
	d.channelSum(op, d.Tensor(t), d.mustLen(op, dst, c), c)
}

// channelSum writes the float32 sums of t's c channels (t of either
// element type) to dp.
func (d *Device[B]) channelSum(op string, t *Tensor[B], dp B, c int) {
	rows := t.elems / c
	if rows == 0 {
		d.check(op, d.ops.Fill(dp, c, 0))
		return
	}
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(1, rows, c))
	if !ok {
		return
	}
	if t.bf16 {
		d.check(op, d.ops.ChannelSumBF16(t.ptr, dp, sc, rows, c))
		return
	}
	d.check(op, d.ops.ChannelSum(t.ptr, dp, sc, rows, c))
}

// DownsampleLabels resamples a label map to dst's size (nearest-exact).
func (d *Device[B]) DownsampleLabels(src, dst nn.Tensor) {
	const op = "DownsampleLabels"
	d.begin(op)
	ss, ds := d.f32(src).shape, d.f32(dst).shape
	if len(ss) != 4 || len(ds) != 4 || ss[0] != ds[0] {
		panic(fmt.Sprintf("%s.%s: shapes %v -> %v", d.prefix, op, ss, ds))
	}
	d.check(op, d.ops.DownsampleLabels(d.ptr(src), d.ptr(dst), ss[0], ss[1], ss[2], ss[3], ds[1], ds[2], ds[3]))
}

// AvgPool writes y = the mean of each k-window of x (nn.Device.AvgPool).
// x and y both bf16 (activations) run the bf16 kernel; a bf16/float32 mix
// goes through float32 copies.
func (d *Device[B]) AvgPool(x, y nn.Tensor, k [3]int) {
	d.pool("AvgPool", x, y, x, y, k, d.ops.AvgPool)
}

// AvgPoolBackward writes dx = AvgPool's input gradient from dy
// (nn.Device.AvgPoolBackward); both bf16 (activation gradients) run the
// bf16 kernel, a mix goes through float32 copies.
func (d *Device[B]) AvgPoolBackward(dy, dx nn.Tensor, k [3]int) {
	d.pool("AvgPoolBackward", dy, dx, dx, dy, k, d.ops.AvgPoolBackward)
}

// pool runs a pooling kernel, AvgPool's or its adjoint's, reading src and
// writing dst, which are full (n, dd, h, w, c) and pooled (by windows k)
// in one order or the other; on bf16 directly when both are bf16.
func (d *Device[B]) pool(op string, src, dst, full, pooled nn.Tensor, k [3]int, kernel func(src, dst B, n, dd, h, w, c int, k [3]int, bf16 bool) error) {
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, full)
	d.poolShaped(op, pooled, n, dd, h, w, c, k)
	st, dt := d.Tensor(src), d.Tensor(dst)
	if st.bf16 && dt.bf16 {
		d.check(op, kernel(st.ptr, dt.ptr, n, dd, h, w, c, k, true))
		return
	}
	d.widened(op, st, dt, func(sp, dp B) {
		d.check(op, kernel(sp, dp, n, dd, h, w, c, k, false))
	})
}

// poolShaped checks that windows k fit an (n, dd, h, w, c) tensor and
// that y has its pooled shape.
func (d *Device[B]) poolShaped(op string, y nn.Tensor, n, dd, h, w, c int, k [3]int) {
	for a, s := range [3]int{dd, h, w} {
		if k[a] < 1 || k[a] > s {
			panic(fmt.Sprintf("%s.%s: window %v does not fit the spatial size (%d, %d, %d)", d.prefix, op, k, dd, h, w))
		}
	}
	d.shaped(op, y, nn.Shape{n, dd / k[0], h / k[1], w / k[2], c})
}
