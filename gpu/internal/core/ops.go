package core

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// need returns a reused buffer of at least n bytes, or false after
// recording an allocation failure.
func (d *Device[B]) need(op string, b *buffer[B], n int) (B, bool) {
	p, err := b.ensure(&d.cache, max(n, 8))
	if err != nil {
		d.fail(op, err)
		return p, false
	}
	return p, true
}

// write copies host values to device memory on the compute stream.
func (d *Device[B]) write(op string, dst B, src []byte) bool {
	if err := d.be.Write(dst, src); err != nil {
		d.fail(op, fmt.Errorf("copy %d bytes to the device: %w", len(src), err))
		return false
	}
	return true
}

// read copies device memory to the host once the compute stream is there.
func (d *Device[B]) read(op string, dst []byte, src B) bool {
	if err := d.be.Read(dst, src); err != nil {
		d.fail(op, fmt.Errorf("copy %d bytes from the device: %w", len(dst), err))
		return false
	}
	return true
}

// f32Bytes returns the little-endian bytes of float32s (CUDA devices are
// little-endian, as are the hosts voxtrain supports).
func f32Bytes(xs ...[]float32) []byte {
	n := 0
	for _, x := range xs {
		n += len(x)
	}
	b := make([]byte, 0, 4*n)
	for _, x := range xs {
		for _, v := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

func f64s(b []byte) []float64 {
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func i32At(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }

// Fill sets every element of t to v.
func (d *Device[B]) Fill(t nn.Tensor, v float32) {
	d.begin("Fill")
	ct := d.T(t)
	d.check("Fill", d.ops.Fill(ct.ptr, ct.n, v))
}

// Copy copies src into dst (same length).
func (d *Device[B]) Copy(dst, src nn.Tensor) {
	d.begin("Copy")
	s := d.T(src)
	d.check("Copy", d.ops.Copy(d.mustLen("Copy", dst, s.n), s.ptr, s.n))
}

// Add computes dst += src.
func (d *Device[B]) Add(dst, src nn.Tensor) {
	d.begin("Add")
	s := d.T(src)
	d.check("Add", d.ops.Add(d.mustLen("Add", dst, s.n), s.ptr, s.n))
}

// Scale computes t *= alpha.
func (d *Device[B]) Scale(t nn.Tensor, alpha float32) {
	d.begin("Scale")
	ct := d.T(t)
	d.check("Scale", d.ops.Scale(ct.ptr, ct.n, alpha))
}

// NCDHWToNDHWC converts a channels-first tensor to channels-last.
func (d *Device[B]) NCDHWToNDHWC(src, dst nn.Tensor) {
	const op = "NCDHWToNDHWC"
	d.begin(op)
	n, c, dd, h, w := d.dims5(op, src)
	dp := d.mustShape(op, dst, nn.Shape{n, dd, h, w, c})
	d.check(op, d.ops.NCDHWToNDHWC(d.p(src), dp, n, c, dd*h*w))
}

// NDHWCToNCDHW converts a channels-last tensor to channels-first.
func (d *Device[B]) NDHWCToNCDHW(src, dst nn.Tensor) {
	const op = "NDHWCToNCDHW"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, src)
	dp := d.mustShape(op, dst, nn.Shape{n, c, dd, h, w})
	d.check(op, d.ops.NDHWCToNCDHW(d.p(src), dp, n, c, dd*h*w))
}

// ConcatChannels writes dst = concat(a, b) along the channel axis.
func (d *Device[B]) ConcatChannels(a, b, dst nn.Tensor) {
	const op = "ConcatChannels"
	d.begin(op)
	n, dd, h, w, ca := d.dims5(op, a)
	cb := d.lastDim(op, b)
	bp := d.mustShape(op, b, nn.Shape{n, dd, h, w, cb})
	dp := d.mustShape(op, dst, nn.Shape{n, dd, h, w, ca + cb})
	d.check(op, d.ops.ConcatChannels(d.p(a), bp, dp, n*dd*h*w, ca, cb))
}

// SplitChannels writes the first channels of src to a and the rest to b.
func (d *Device[B]) SplitChannels(src, a, b nn.Tensor) {
	const op = "SplitChannels"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, src)
	ca := d.lastDim(op, a)
	cb := c - ca
	ap := d.mustShape(op, a, nn.Shape{n, dd, h, w, ca})
	bp := d.mustShape(op, b, nn.Shape{n, dd, h, w, cb})
	d.check(op, d.ops.SplitChannels(d.p(src), ap, bp, n*dd*h*w, ca, cb))
}

// AddChannelBias adds bias[c] to every element of channel c of t.
func (d *Device[B]) AddChannelBias(t, bias nn.Tensor) {
	const op = "AddChannelBias"
	d.begin(op)
	ct := d.T(t)
	c := d.lastDim(op, t)
	bp := d.mustLen(op, bias, c)
	d.check(op, d.ops.AddChannelBias(ct.ptr, bp, ct.n/c, c))
}

// ChannelSum writes dst[c] = Σ over all other axes of t[..., c].
func (d *Device[B]) ChannelSum(t, dst nn.Tensor) {
	const op = "ChannelSum"
	d.begin(op)
	ct := d.T(t)
	c := d.lastDim(op, t)
	dp := d.mustLen(op, dst, c)
	rows := ct.n / c
	if rows == 0 {
		d.check(op, d.ops.Fill(dp, c, 0))
		return
	}
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(1, rows, c))
	if !ok {
		return
	}
	d.check(op, d.ops.ChannelSum(ct.ptr, dp, sc, rows, c))
}

// DownsampleLabels resamples a label map to dst's size (nearest-exact).
func (d *Device[B]) DownsampleLabels(src, dst nn.Tensor) {
	const op = "DownsampleLabels"
	d.begin(op)
	ss, ds := d.T(src).shape, d.T(dst).shape
	if len(ss) != 4 || len(ds) != 4 || ss[0] != ds[0] {
		panic(fmt.Sprintf("%s.%s: shapes %v -> %v", d.prefix, op, ss, ds))
	}
	d.check(op, d.ops.DownsampleLabels(d.p(src), d.p(dst), ss[0], ss[1], ss[2], ss[3], ds[1], ds[2], ds[3]))
}

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
	d.check(op, d.ops.InstanceNormActForward(d.p(x), d.p(gamma), d.p(beta), yp, d.p(stats), sc, n, v, c, eps, slope))
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
	d.check(op, d.ops.InstanceNormActBackward(d.p(x), d.p(gamma), d.p(beta), d.p(stats), dyp, dxp, dgp, dbp, sc, n, v, c, slope))
}

// ActForward computes y = max(x, slope·x) (y may alias x).
func (d *Device[B]) ActForward(x, y nn.Tensor, slope float32) {
	const op = "ActForward"
	d.begin(op)
	d.checkSlope(op, slope)
	xt := d.T(x)
	d.check(op, d.ops.ActForward(xt.ptr, d.mustLen(op, y, xt.n), xt.n, slope))
}

// ActBackward computes dx = dy where y > 0 and slope·dy elsewhere.
func (d *Device[B]) ActBackward(y, dy, dx nn.Tensor, slope float32) {
	const op = "ActBackward"
	d.begin(op)
	d.checkSlope(op, slope)
	yt := d.T(y)
	d.check(op, d.ops.ActBackward(yt.ptr, d.mustLen(op, dy, yt.n), d.mustLen(op, dx, yt.n), yt.n, slope))
}

// Softmax writes probs = softmax(logits) over the channel axis.
func (d *Device[B]) Softmax(logits, probs nn.Tensor) {
	const op = "Softmax"
	d.begin(op)
	lt := d.T(logits)
	c := d.lastDim(op, logits)
	d.check(op, d.ops.Softmax(lt.ptr, d.mustLen(op, probs, lt.n), lt.n/c, c))
}

// labelDims checks a channels-last t (N, D, H, W, C) against labels
// (N, D, H, W) and returns (N, voxels per sample, C).
func (d *Device[B]) labelDims(op string, t, labels nn.Tensor) (n, v, c int) {
	n, dd, h, w, c := d.dims5(op, t)
	d.mustShape(op, labels, nn.Shape{n, dd, h, w})
	return n, dd * h * w, c
}

// badLabel turns a bad-label cell into the CPU device's error message,
// reading the offending label back (k classes).
func (d *Device[B]) badLabel(op string, cell int32, labels nn.Tensor, k int) error {
	if cell == kernels.NoBadLabel {
		return nil
	}
	lt := d.T(labels)
	if cell < 0 || int(cell) >= lt.n {
		return fmt.Errorf("%s: the kernel reported an invalid label at voxel %d of %d", op, cell, lt.n)
	}
	var b [4]byte
	if !d.read(op, b[:], d.be.Offset(lt.ptr, 4*int(cell))) {
		return d.Err()
	}
	l := math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
	return fmt.Errorf("%s: label %v at flat voxel %d is not a class index in [0, %d)", op, l, cell, k)
}

// SoftmaxLoss computes probs = softmax(logits) and the SegStats sums.
func (d *Device[B]) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	const op = "SoftmaxLoss"
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	pp := d.mustLen(op, probs, n*v*c)
	outLen := kernels.SoftmaxLossOutLen(n, c)
	// out (float64s) and the bad-label cell in one buffer: one download.
	small, ok := d.need(op, &d.small, 8*outLen+8)
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	bad := d.be.Offset(small, 8*outLen)
	d.check(op, d.ops.SoftmaxLoss(d.p(logits), d.p(labels), pp, small, bad, sc, n, v, c))
	host := make([]byte, 8*outLen+4)
	if !d.read(op, host, small) {
		return nn.SegStats{}, d.Err()
	}
	if err := d.badLabel(op, i32At(host, 2*outLen), labels, c); err != nil {
		return nn.SegStats{}, err
	}
	if err := d.Err(); err != nil {
		return nn.SegStats{}, err
	}
	st, err := kernels.SegStatsFromOut(f64s(host[:8*outLen]), n, v, c)
	d.check(op, err)
	return st, nil
}

// SoftmaxLossBackward writes dlogits (see nn.Device).
func (d *Device[B]) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	const op = "SoftmaxLossBackward"
	d.begin(op)
	n, v, c := d.labelDims(op, probs, labels)
	dp := d.mustLen(op, dlogits, n*v*c)
	var ep B
	if extra != nil {
		ep = d.mustLen(op, extra, n*v*c)
	}
	if len(ceScale) != n || len(alpha) != n*c || len(beta) != n*c {
		panic(fmt.Sprintf("%s.%s: coefficient lengths %d, %d, %d for N=%d C=%d", d.prefix, op, len(ceScale), len(alpha), len(beta), n, c))
	}
	small, ok := d.need(op, &d.small, 4*(n+2*n*c))
	if !ok || !d.write(op, small, f32Bytes(ceScale, alpha, beta)) {
		return
	}
	ap := d.be.Offset(small, 4*n)
	bp := d.be.Offset(small, 4*(n+n*c))
	d.check(op, d.ops.SoftmaxLossBackward(d.p(probs), d.p(labels), small, ap, bp, ep, dp, n, v, c))
}

// SigmoidBCE computes the per-sample BCE-with-logits sums and dlogits.
func (d *Device[B]) SigmoidBCE(logits, labels nn.Tensor, posWeight, gradScale float32, dlogits nn.Tensor) ([]float64, error) {
	const op = "SigmoidBCE"
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	if c != 1 {
		panic(fmt.Sprintf("%s.%s: logits have %d channels, want 1", d.prefix, op, c))
	}
	dp := d.mustLen(op, dlogits, n*v)
	small, ok := d.need(op, &d.small, 8*n+8)
	if !ok {
		return nil, d.Err()
	}
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, 1))
	if !ok {
		return nil, d.Err()
	}
	bad := d.be.Offset(small, 8*n)
	d.check(op, d.ops.SigmoidBCE(d.p(logits), d.p(labels), dp, small, bad, sc, n, v, posWeight, gradScale))
	host := make([]byte, 8*n+4)
	if !d.read(op, host, small) {
		return nil, d.Err()
	}
	if err := d.badLabel(op, i32At(host, 2*n), labels, 2); err != nil {
		return nil, err
	}
	return f64s(host[:8*n]), d.Err()
}

// OneHot writes dst (N, D, H, W, C) = [labels = c].
func (d *Device[B]) OneHot(labels, dst nn.Tensor) error {
	const op = "OneHot"
	d.begin(op)
	n, v, c := d.labelDims(op, dst, labels)
	bad, ok := d.need(op, &d.small, 8)
	if !ok {
		return d.Err()
	}
	d.check(op, d.ops.OneHot(d.p(labels), d.p(dst), bad, n*v, c))
	var host [4]byte
	if !d.read(op, host[:], bad) {
		return d.Err()
	}
	if err := d.badLabel(op, i32At(host[:], 0), labels, c); err != nil {
		return err
	}
	return d.Err()
}

// skelDims checks a soft-skeleton call.
func (d *Device[B]) skelDims(op string, x, y nn.Tensor, iters, fromC int) (n, dd, h, w, c int) {
	n, dd, h, w, c = d.dims5(op, x)
	d.mustShape(op, y, d.T(x).shape)
	if iters < 0 || fromC < 0 {
		panic(fmt.Sprintf("%s.%s: iters %d, fromC %d must be non-negative", d.prefix, op, iters, fromC))
	}
	return n, dd, h, w, c
}

// SoftSkeleton computes clDice's soft skeleton of channels >= fromC.
func (d *Device[B]) SoftSkeleton(x, skel nn.Tensor, iters, fromC int) {
	const op = "SoftSkeleton"
	d.begin(op)
	n, dd, h, w, c := d.skelDims(op, x, skel, iters, fromC)
	sc, ok := d.need(op, &d.scratch, 3*4*n*dd*h*w*c)
	if !ok {
		return
	}
	d.check(op, d.ops.SoftSkeleton(d.p(x), d.p(skel), sc, n, dd, h, w, c, iters, fromC))
}

// SoftSkeletonBackward adds the soft skeleton's gradient to dx.
func (d *Device[B]) SoftSkeletonBackward(x, dskel, dx nn.Tensor, iters, fromC int) {
	const op = "SoftSkeletonBackward"
	d.begin(op)
	n, dd, h, w, c := d.skelDims(op, x, dskel, iters, fromC)
	d.mustShape(op, dx, d.T(x).shape)
	sc, ok := d.need(op, &d.scratch, kernels.SkeletonScratchBytes(n*dd*h*w*c, iters))
	if !ok {
		return
	}
	d.check(op, d.ops.SoftSkeletonBackward(d.p(x), d.p(dskel), d.p(dx), sc, n, dd, h, w, c, iters, fromC))
}

// ChannelDot returns Σ over voxels of a·b per sample and channel.
func (d *Device[B]) ChannelDot(a, b nn.Tensor) []float64 {
	const op = "ChannelDot"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, a)
	var bp B
	if b != nil {
		bp = d.mustShape(op, b, d.T(a).shape)
	}
	out := make([]float64, n*c)
	v := dd * h * w
	if n*v*c == 0 {
		return out
	}
	small, ok := d.need(op, &d.small, 8*n*c)
	if !ok {
		return out
	}
	sc, ok := d.need(op, &d.scratch, d.ops.ScratchBytes(n, v, c))
	if !ok {
		return out
	}
	d.check(op, d.ops.ChannelDot(d.p(a), bp, small, sc, n, v, c))
	host := make([]byte, 8*n*c)
	if d.read(op, host, small) {
		copy(out, f64s(host))
	}
	return out
}

// ChannelAffineAdd computes dst += alpha·a + beta per sample and channel.
func (d *Device[B]) ChannelAffineAdd(dst, a nn.Tensor, alpha, beta []float32) {
	const op = "ChannelAffineAdd"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, dst)
	var ap B
	if a != nil {
		ap = d.mustShape(op, a, d.T(dst).shape)
		if len(alpha) != n*c {
			panic(fmt.Sprintf("%s.%s: alpha has %d values for N=%d C=%d", d.prefix, op, len(alpha), n, c))
		}
	} else {
		alpha = nil
	}
	if beta != nil && len(beta) != n*c {
		panic(fmt.Sprintf("%s.%s: beta has %d values for N=%d C=%d", d.prefix, op, len(beta), n, c))
	}
	if a == nil && beta == nil {
		return
	}
	small, ok := d.need(op, &d.small, 4*(len(alpha)+len(beta)))
	if !ok || !d.write(op, small, f32Bytes(alpha, beta)) {
		return
	}
	var alp, bep B
	if alpha != nil {
		alp = small
	}
	if beta != nil {
		bep = d.be.Offset(small, 4*len(alpha))
	}
	d.check(op, d.ops.ChannelAffineAdd(d.p(dst), ap, alp, bep, n, dd*h*w, c))
}

// SegCounts returns per-class TP, FP and FN counts of argmax(logits).
func (d *Device[B]) SegCounts(logits, labels nn.Tensor) (tp, fp, fn []int64, err error) {
	const op = "SegCounts"
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	k := max(c, 2)
	cnt := kernels.SegCountsLen(c)
	small, ok := d.need(op, &d.small, 8*cnt+8)
	if !ok {
		return nil, nil, nil, d.Err()
	}
	bad := d.be.Offset(small, 8*cnt)
	d.check(op, d.ops.SegCounts(d.p(logits), d.p(labels), small, bad, n*v, c))
	host := make([]byte, 8*cnt+4)
	if !d.read(op, host, small) {
		return nil, nil, nil, d.Err()
	}
	if err := d.badLabel(op, i32At(host, 2*cnt), labels, k); err != nil {
		return nil, nil, nil, err
	}
	if err := d.Err(); err != nil {
		return nil, nil, nil, err
	}
	u := func(i int) int64 { return int64(binary.LittleEndian.Uint64(host[8*i:])) }
	tp, fp, fn = make([]int64, k), make([]int64, k), make([]int64, k)
	for j := 0; j < k; j++ {
		tp[j], fp[j], fn[j] = u(j), u(k+j), u(2*k+j)
	}
	return tp, fp, fn, nil
}

// SumSquares returns Σ t² for each tensor, with one download for all.
func (d *Device[B]) SumSquares(ts []nn.Tensor) []float64 {
	const op = "SumSquares"
	d.begin(op)
	out := make([]float64, len(ts))
	if len(ts) == 0 {
		return out
	}
	need := 0
	for _, t := range ts {
		need = max(need, d.ops.FlatScratchBytes(d.T(t).n))
	}
	small, ok := d.need(op, &d.small, 8*len(ts))
	if !ok {
		return out
	}
	sc, ok := d.need(op, &d.scratch, need)
	if !ok {
		return out
	}
	for i, t := range ts {
		ct := d.T(t)
		d.check(op, d.ops.SumSquares(ct.ptr, d.be.Offset(small, 8*i), sc, ct.n))
	}
	host := make([]byte, 8*len(ts))
	if d.read(op, host, small) {
		copy(out, f64s(host))
	}
	return out
}

// SGDUpdate applies one SGD step.
func (d *Device[B]) SGDUpdate(w, g, buf nn.Tensor, a nn.SGDArgs) {
	const op = "SGDUpdate"
	d.begin(op)
	wt := d.T(w)
	gp := d.mustLen(op, g, wt.n)
	var bp B
	if a.Momentum != 0 {
		bp = d.mustLen(op, buf, wt.n)
	}
	d.check(op, d.ops.SGDUpdate(wt.ptr, gp, bp, wt.n, a))
}

// AdamWUpdate applies one AdamW step.
func (d *Device[B]) AdamWUpdate(w, g, m, v nn.Tensor, a nn.AdamWArgs) {
	const op = "AdamWUpdate"
	d.begin(op)
	if a.Step < 1 {
		panic(fmt.Sprintf("%s.%s: step %d, want >= 1", d.prefix, op, a.Step))
	}
	wt := d.T(w)
	d.check(op, d.ops.AdamWUpdate(wt.ptr, d.mustLen(op, g, wt.n), d.mustLen(op, m, wt.n), d.mustLen(op, v, wt.n), wt.n, a))
}
