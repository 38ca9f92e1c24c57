// Instance norm fused with the activation, and the activation alone.

package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// checkSlope panics for slopes outside [0, 1], as the CPU device does.
func (d *Device[B]) checkSlope(op string, slope float32) {
	if !(slope >= 0 && slope <= 1) {
		panic(fmt.Sprintf("%s.%s: slope %v outside [0, 1]", d.prefix, op, slope))
	}
}

// normDims checks an instance-norm call's tensors and returns (N, voxels
// per sample, C).
func (d *Device[B]) normDims(op string, x, gamma, beta, stats nn.Tensor) (n, v, c int) {
	n, dd, h, w, c := d.dims5(op, x)
	d.mustLen(op, gamma, c)
	d.mustLen(op, beta, c)
	d.mustShape(op, stats, nn.Shape{n, c, 2})
	return n, dd * h * w, c
}

// sameLen returns the tensor behind t, of either element type, panicking
// unless it has n elements.
func (d *Device[B]) sameLen(op string, t nn.Tensor, n int) *Tensor[B] {
	ct := d.Tensor(t)
	if ct.elems != n {
		panic(fmt.Sprintf("%s.%s: tensor %v has %d elements, want %d", d.prefix, op, ct.shape, ct.elems, n))
	}
	return ct
}

// InstanceNormActForward normalises x per sample and channel, applies the
// affine gamma, beta and max(z, slope·z), writing y and stats. x and y may
// be bf16 activations (y may alias x); stats are float32. Both bf16 (as nn
// passes them) run the bf16 kernels, which read x and write y as they are;
// one of them bf16 goes through float32 copies (bf16act.go).
func (d *Device[B]) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	const op = "InstanceNormActForward"
	d.begin(op)
	d.checkSlope(op, slope)
	n, v, c := d.normDims(op, x, gamma, beta, stats)
	xt := d.Tensor(x)
	yt := d.sameLen(op, y, n*v*c)
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return
	}
	if xt.bf16 && yt.bf16 {
		d.check(op, d.ops.InstanceNormActForwardBF16(xt.ptr, d.ptr(gamma), d.ptr(beta), yt.ptr, d.ptr(stats), sc, n, v, c, eps, slope))
		return
	}
	d.widened(op, xt, yt, func(xp, yp B) {
		d.check(op, d.ops.InstanceNormActForward(xp, d.ptr(gamma), d.ptr(beta), yp, d.ptr(stats), sc, n, v, c, eps, slope))
	})
}

// InstanceNormActBackward computes dx, dgamma and dbeta from dy. x may be
// a bf16 activation, which the bf16 kernels read as it is; dy and dx are
// float32.
func (d *Device[B]) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	const op = "InstanceNormActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	n, v, c := d.normDims(op, x, gamma, beta, stats)
	dyp := d.mustLen(op, dy, n*v*c)
	dxp := d.mustLen(op, dx, n*v*c)
	dgp := d.mustLen(op, dgamma, c)
	dbp := d.mustLen(op, dbeta, c)
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return
	}
	if xt := d.Tensor(x); xt.bf16 {
		d.check(op, d.ops.InstanceNormActBackwardBF16(xt.ptr, d.ptr(gamma), d.ptr(beta), d.ptr(stats), dyp, dxp, dgp, dbp, sc, n, v, c, slope))
		return
	}
	d.check(op, d.ops.InstanceNormActBackward(d.ptr(x), d.ptr(gamma), d.ptr(beta), d.ptr(stats), dyp, dxp, dgp, dbp, sc, n, v, c, slope))
}

// ActForward computes y = max(x, slope·x) (y may alias x). x and y may be
// bf16 activations: both bf16 (as nn passes them) run the bf16 kernel, one
// of them goes through a float32 copy.
func (d *Device[B]) ActForward(x, y nn.Tensor, slope float32) {
	const op = "ActForward"
	d.begin(op)
	d.checkSlope(op, slope)
	xt := d.Tensor(x)
	yt := d.sameLen(op, y, xt.elems)
	if xt.bf16 && yt.bf16 {
		d.check(op, d.ops.ActForwardBF16(xt.ptr, yt.ptr, xt.elems, slope))
		return
	}
	d.widened(op, xt, yt, func(xp, yp B) {
		d.check(op, d.ops.ActForward(xp, yp, xt.elems, slope))
	})
}

// ActBackward computes dx = dy where y > 0 and slope·dy elsewhere. y may
// be a bf16 activation (read as it is by the bf16 kernel); dy and dx are
// float32.
func (d *Device[B]) ActBackward(y, dy, dx nn.Tensor, slope float32) {
	const op = "ActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	yt := d.Tensor(y)
	dyp, dxp := d.mustLen(op, dy, yt.elems), d.mustLen(op, dx, yt.elems)
	if yt.bf16 {
		d.check(op, d.ops.ActBackwardBF16(yt.ptr, dyp, dxp, yt.elems, slope))
		return
	}
	d.check(op, d.ops.ActBackward(yt.ptr, dyp, dxp, yt.elems, slope))
}
