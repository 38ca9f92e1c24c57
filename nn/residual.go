// The residual encoder: nnU-Net's ResidualEncoderUNet (the encoder of its
// ResEnc presets, dynamic_network_architectures' ResidualEncoder and
// BasicBlockD), its residual block and the block's forward and backward
// passes.

package nn

// resBlock is nnU-Net's BasicBlockD (ResNet-D):
//
//	out = act(norm(conv2(act(norm(conv1(x))))) + skip(x))
//
// conv1 carries the block's stride, conv2 has stride 1 and no
// nonlinearity of its own; skip is the identity, or — when the block
// strides or changes the channels — an average pool of window = stride
// (pool) followed by a 1×1×1 conv without bias and a norm (proj, no
// nonlinearity) when the channels change.
type resBlock struct {
	conv1, conv2 *block
	pool         [3]int // the skip's AvgPool window; {1, 1, 1}: none
	proj         *block // nil when the channels are unchanged
}

// pooled reports whether the skip averages over windows.
func (r *resBlock) pooled() bool { return r.pool != [3]int{1, 1, 1} }

// params returns the block's parameters in state-dict order: conv1's,
// conv2's, the projection's.
func (r *resBlock) params() []*Param {
	ps := append(r.conv1.params(), r.conv2.params()...)
	if r.proj != nil {
		ps = append(ps, r.proj.params()...)
	}
	return ps
}

// resBuf is a residual block's memory for one batch shape. The block's
// output is conv2.out, where the skip is added and the nonlinearity
// applied in place.
type resBuf struct {
	conv1, conv2 blockBuf
	proj         blockBuf // proj != nil
	pooled       Tensor   // the skip's pooled input (pooled())
	// Backward scratch (training), gradients: poolGrad receives the
	// skip's input gradient (the block's input's shape: the pool's, or an
	// unpooled projection's), projGrad the projection's input gradient
	// when the skip pools first (the pooled shape).
	poolGrad, projGrad Tensor
}

// out returns the block's output.
func (rb *resBuf) out() Tensor { return rb.conv2.out }

// newResBlock builds a residual block of in → out channels with kernel k
// and stride s, its parameters named prefix.conv1.*, prefix.conv2.* and
// prefix.skip.* (the 1×1×1 conv .0, its norm .1).
func newResBlock(newBlock func(prefix string, in, out int, k, s [3]int, bias bool) *block, prefix string, in, out int, k, s [3]int, bias bool) *resBlock {
	r := &resBlock{pool: s}
	r.conv1 = newBlock(prefix+".conv1", in, out, k, s, bias)
	r.conv2 = newBlock(prefix+".conv2", out, out, k, [3]int{1, 1, 1}, bias)
	r.conv2.linear = true
	if r.conv2.gamma != nil {
		// nnU-Net's init_last_bn_before_add_to_0: conv2's norm starts at
		// γ = β = 0, so that each block starts as its skip alone.
		r.conv2.gamma.initOne = false
	}
	if in != out {
		// nnU-Net's skip conv has no bias, whatever conv_bias says.
		r.proj = newBlock(prefix+".skip", in, out, [3]int{1, 1, 1}, [3]int{1, 1, 1}, false)
		r.proj.linear = true
	}
	return r
}

// resForward runs the block on in, leaving its output in rb.out().
func (m *UNet) resForward(r *resBlock, rb *resBuf, in Tensor) {
	dev := m.dev
	m.blockForward(r.conv1, &rb.conv1, in)
	m.blockForward(r.conv2, &rb.conv2, rb.conv1.out)
	res := in
	if r.pooled() {
		dev.AvgPool(in, rb.pooled, r.pool)
		res = rb.pooled
	}
	if r.proj != nil {
		m.blockForward(r.proj, &rb.proj, res)
		res = rb.proj.out
	}
	dev.Add(rb.conv2.out, res)
	if m.slope != 1 {
		dev.ActForward(rb.conv2.out, rb.conv2.out, m.slope)
	}
}

// resBackward takes the gradient of the block's output in da (left
// holding the gradient of the sum before the nonlinearity), sets the
// block's parameter gradients and writes the gradient of its input to
// dx. r1 and r2 are scratch gradients of the output's shape.
func (m *UNet) resBackward(r *resBlock, rb *resBuf, in, da, dx, r1, r2 Tensor) {
	dev := m.dev
	if m.slope != 1 {
		dev.ActBackward(rb.conv2.out, da, da, m.slope)
	}
	// Both branches read da: conv2's norm writes its input gradient to
	// r1, not over da (blockBackwardVia).
	m.blockBackwardVia(r.conv2, &rb.conv2, rb.conv1.out, da, r1, r2)
	m.blockBackward(r.conv1, &rb.conv1, in, r2, dx)
	switch {
	case r.proj == nil && !r.pooled():
		dev.Add(dx, da)
	case r.proj == nil:
		dev.AvgPoolBackward(da, rb.poolGrad, r.pool)
		dev.Add(dx, rb.poolGrad)
	case !r.pooled():
		m.blockBackwardVia(r.proj, &rb.proj, in, da, r1, rb.poolGrad)
		dev.Add(dx, rb.poolGrad)
	default:
		m.blockBackwardVia(r.proj, &rb.proj, rb.pooled, da, r1, rb.projGrad)
		dev.AvgPoolBackward(rb.projGrad, rb.poolGrad, r.pool)
		dev.Add(dx, rb.poolGrad)
	}
}

// newResBuf allocates a residual block's buffers for inputs of spatial
// size in and outputs at level lo (spatial size out), with the
// workspace's allocators. poolGrad is the scratch for the skip's input
// gradient (the block's input's shape) when the block has a skip other
// than the identity and trains; see newWorkspace.
func newResBuf(r *resBlock, newBuf func(b *block, in [3]int, l int) blockBuf, act, grad func(l, c int) Tensor, in, out [3]int, lo int, train bool, poolGrad Tensor) resBuf {
	rb := resBuf{conv1: newBuf(r.conv1, in, lo), conv2: newBuf(r.conv2, out, lo)}
	if r.pooled() {
		rb.pooled = act(lo, r.conv1.conv.inC)
	}
	if r.proj != nil {
		rb.proj = newBuf(r.proj, out, lo)
	}
	if train && (r.pooled() || r.proj != nil) {
		rb.poolGrad = poolGrad
		if r.pooled() && r.proj != nil {
			rb.projGrad = grad(lo, r.conv1.conv.inC)
		}
	}
	return rb
}
