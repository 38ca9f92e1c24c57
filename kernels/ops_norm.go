// Launch recipes of norm.cu: instance norm fused with the activation.

package kernels

// InstanceNormActForward normalises x (n, v, c) per (sample, channel),
// applies gamma, beta (c) and max(z, slope·z), writing y and stats
// (n, c, 2) = (mean, 1/sqrt(var + eps)).
func (o Ops[B]) InstanceNormActForward(x, gamma, beta, y, stats, scratch B, n, v, c int, eps, slope float32) error {
	return o.instNormFwd("InstanceNormActForward", kINFwdPartial, kINFwdApply, x, gamma, beta, y, stats, scratch, n, v, c, eps, slope)
}

// InstanceNormActForwardBF16 is InstanceNormActForward for bfloat16 x and
// y (n·v·c uint16s each; y may be x), the other operands float32: the
// float32 recipe's result on x's values with y rounded to nearest even,
// reading and writing the bf16 tensors directly.
func (o Ops[B]) InstanceNormActForwardBF16(x, gamma, beta, y, stats, scratch B, n, v, c int, eps, slope float32) error {
	return o.instNormFwd("InstanceNormActForwardBF16", kINFwdPartialBF16, kINFwdApplyBF16, x, gamma, beta, y, stats, scratch, n, v, c, eps, slope)
}

// instNormFwd is the forward recipe with the kernels that read x (and
// write y) of one element type.
func (o Ops[B]) instNormFwd(op string, kPartial, kApply Kernel, x, gamma, beta, y, stats, scratch B, n, v, c int, eps, slope float32) error {
	if err := checkSlope(op, slope); err != nil {
		return err
	}
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	if err := o.Launcher.Launch(kPartial, o.chunkGrid(n, v), x, scratch, i32(v), i32(c), i32(o.chunk(v))); err != nil {
		return err
	}
	if err := o.launchBlocks(kINFwdStats, n*c, scratch, stats, i32(n), i32(v), i32(c), i32(nch), eps); err != nil {
		return err
	}
	return o.launch1(kApply, n*v*c, x, gamma, beta, stats, y, i32(n), i32(v), i32(c), slope)
}

// InstanceNormActBackward computes dx and, overwriting them, dgamma and
// dbeta from dy, given the forward's input x, gamma, beta and stats (the
// activation's derivative comes from the recomputed pre-activation). dx
// may be dy.
func (o Ops[B]) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
	return o.instNormBwd("InstanceNormActBackward", kINBwdPartial, kINBwdApply, x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch, n, v, c, slope)
}

// InstanceNormActBackwardBF16 is InstanceNormActBackward for a bfloat16 x
// (n·v·c uint16s), every other operand float32: the float32 recipe's
// result on x's values, reading x directly.
func (o Ops[B]) InstanceNormActBackwardBF16(x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
	return o.instNormBwd("InstanceNormActBackwardBF16", kINBwdPartialBF16, kINBwdApplyBF16, x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch, n, v, c, slope)
}

// InstanceNormActBackwardBF16G is InstanceNormActBackward for bfloat16 x,
// dy and dx (n·v·c uint16s each; dx may be dy), the other operands
// float32: the float32 recipe's result on x's and dy's values, dx rounded
// to nearest even.
func (o Ops[B]) InstanceNormActBackwardBF16G(x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
	return o.instNormBwd("InstanceNormActBackwardBF16G", kINBwdPartialBF16G, kINBwdApplyBF16G, x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch, n, v, c, slope)
}

// instNormBwd is the backward recipe with the kernels that read x (and
// dy, and write dx) of one element type.
func (o Ops[B]) instNormBwd(op string, kPartial, kApply Kernel, x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
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
	if err := o.Launcher.Launch(kPartial, o.chunkGrid(n, v), x, gamma, beta, dy, stats, part, i32(v), i32(c), i32(o.chunk(v)), slope); err != nil {
		return err
	}
	if err := o.launchBlocks(kINBwdFinish, n*c, part, stats, gamma, tot, coef, i32(n), i32(v), i32(c), i32(nch)); err != nil {
		return err
	}
	if err := o.launch1(kINBwdAffine, c, tot, dgamma, dbeta, i32(n), i32(c)); err != nil {
		return err
	}
	return o.launch1(kApply, n*v*c, x, gamma, beta, dy, stats, coef, dx, i32(n), i32(v), i32(c), slope)
}
