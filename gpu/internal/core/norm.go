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

// InstanceNormActForward normalises x per sample and channel, applies the
// affine gamma, beta and max(z, slope·z), writing y and stats.
func (d *Device[B]) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	const op = "InstanceNormActForward"
	d.begin(op)
	d.checkSlope(op, slope)
	n, v, c := d.normDims(op, x, gamma, beta, stats)
	yp := d.mustLen(op, y, n*v*c)
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return
	}
	d.check(op, d.ops.InstanceNormActForward(d.ptr(x), d.ptr(gamma), d.ptr(beta), yp, d.ptr(stats), sc, n, v, c, eps, slope))
}

// InstanceNormActBackward computes dx, dgamma and dbeta from dy.
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
	d.check(op, d.ops.InstanceNormActBackward(d.ptr(x), d.ptr(gamma), d.ptr(beta), d.ptr(stats), dyp, dxp, dgp, dbp, sc, n, v, c, slope))
}

// ActForward computes y = max(x, slope·x) (y may alias x).
func (d *Device[B]) ActForward(x, y nn.Tensor, slope float32) {
	const op = "ActForward"
	d.begin(op)
	d.checkSlope(op, slope)
	xt := d.Tensor(x)
	d.check(op, d.ops.ActForward(xt.ptr, d.mustLen(op, y, xt.elems), xt.elems, slope))
}

// ActBackward computes dx = dy where y > 0 and slope·dy elsewhere.
func (d *Device[B]) ActBackward(y, dy, dx nn.Tensor, slope float32) {
	const op = "ActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	yt := d.Tensor(y)
	d.check(op, d.ops.ActBackward(yt.ptr, d.mustLen(op, dy, yt.elems), d.mustLen(op, dx, yt.elems), yt.elems, slope))
}
