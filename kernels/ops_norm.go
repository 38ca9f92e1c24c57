// Launch recipes of norm.cu: instance norm fused with the activation.

package kernels

// InstanceNormActForward normalises x (n, v, c) per (sample, channel),
// applies gamma, beta (c) and max(z, slope·z), writing y and stats
// (n, c, 2) = (mean, 1/sqrt(var + eps)).
func (o Ops[B]) InstanceNormActForward(x, gamma, beta, y, stats, scratch B, n, v, c int, eps, slope float32) error {
	const op = "InstanceNormActForward"
	if err := checkSlope(op, slope); err != nil {
		return err
	}
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	if err := o.Launcher.Launch(kINFwdPartial, o.chunkGrid(n, v), x, scratch, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.launch1(kINFwdStats, n*c, scratch, stats, i32(n), i32(v), i32(c), i32(nch), eps); err != nil {
		return err
	}
	return o.launch1(kINFwdApply, n*v*c, x, gamma, beta, stats, y, i32(n), i32(v), i32(c), slope)
}

// InstanceNormActBackward computes dx and, overwriting them, dgamma and
// dbeta from dy, given the forward's input x, gamma, beta and stats (the
// activation's derivative comes from the recomputed pre-activation). dx
// may be dy.
func (o Ops[B]) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
	const op = "InstanceNormActBackward"
	if err := checkSlope(op, slope); err != nil {
		return err
	}
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	part := scratch
	tot := o.Launcher.Offset(scratch, 8*n*nch*2*c)
	coef := o.Launcher.Offset(tot, 8*n*2*c)
	if err := o.Launcher.Launch(kINBwdPartial, o.chunkGrid(n, v), x, gamma, beta, dy, stats, part, i32(v), i32(c), i32(o.chunk()), slope); err != nil {
		return err
	}
	if err := o.launch1(kINBwdFinish, n*c, part, stats, gamma, tot, coef, i32(n), i32(v), i32(c), i32(nch)); err != nil {
		return err
	}
	if err := o.launch1(kINBwdAffine, c, tot, dgamma, dbeta, i32(n), i32(c)); err != nil {
		return err
	}
	return o.launch1(kINBwdApply, n*v*c, x, gamma, beta, dy, stats, coef, dx, i32(n), i32(v), i32(c), slope)
}
