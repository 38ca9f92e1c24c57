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
// a bf16 activation, and dy and dx bf16 activation gradients (dx may
// alias dy; dgamma, dbeta float32): x bf16 with dy and dx float32, or all
// three bf16 (as nn passes them), run bf16 kernels that read and write
// them as they are; other mixes go through float32 copies of dy and dx.
func (d *Device[B]) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	const op = "InstanceNormActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	n, v, c := d.normDims(op, x, gamma, beta, stats)
	xt := d.Tensor(x)
	dyt, dxt := d.sameLen(op, dy, n*v*c), d.sameLen(op, dx, n*v*c)
	dgp := d.mustLen(op, dgamma, c)
	dbp := d.mustLen(op, dbeta, c)
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return
	}
	gp, bp, sp := d.ptr(gamma), d.ptr(beta), d.ptr(stats)
	if xt.bf16 && dyt.bf16 && dxt.bf16 {
		d.check(op, d.ops.InstanceNormActBackwardBF16G(xt.ptr, gp, bp, sp, dyt.ptr, dxt.ptr, dgp, dbp, sc, n, v, c, slope))
		return
	}
	// dy is widened into wideA and dx written to wideC (then rounded into
	// dx), so dx may alias dy here too.
	d.widened(op, dyt, dxt, func(dyp, dxp B) {
		if xt.bf16 {
			d.check(op, d.ops.InstanceNormActBackwardBF16(xt.ptr, gp, bp, sp, dyp, dxp, dgp, dbp, sc, n, v, c, slope))
			return
		}
		d.check(op, d.ops.InstanceNormActBackward(xt.ptr, gp, bp, sp, dyp, dxp, dgp, dbp, sc, n, v, c, slope))
	})
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
// be a bf16 activation and dy, dx bf16 activation gradients (dx may alias
// dy): y bf16 with dy and dx float32, or all three bf16 (as nn passes
// them), run bf16 kernels that read and write them as they are; other
// mixes go through float32 copies of dy and dx.
func (d *Device[B]) ActBackward(y, dy, dx nn.Tensor, slope float32) {
	const op = "ActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	yt := d.Tensor(y)
	dyt, dxt := d.sameLen(op, dy, yt.elems), d.sameLen(op, dx, yt.elems)
	if yt.bf16 && dyt.bf16 && dxt.bf16 {
		d.check(op, d.ops.ActBackwardBF16G(yt.ptr, dyt.ptr, dxt.ptr, yt.elems, slope))
		return
	}
	d.widened(op, dyt, dxt, func(dyp, dxp B) {
		if yt.bf16 {
			d.check(op, d.ops.ActBackwardBF16(yt.ptr, dyp, dxp, yt.elems, slope))
			return
		}
		d.check(op, d.ops.ActBackward(yt.ptr, dyp, dxp, yt.elems, slope))
	})
}
