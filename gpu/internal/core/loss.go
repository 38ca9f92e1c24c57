// The loss ops: softmax and the segmentation loss sums, sigmoid BCE,
// one-hot labels, clDice's soft skeleton, the per-channel sums the losses
// combine on the host, and the TP/FP/FN counts of validation.

package core

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// Softmax writes probs = softmax(logits) over the channel axis.
func (d *Device[B]) Softmax(logits, probs nn.Tensor) {
	const op = "Softmax"
	d.begin(op)
	lt := d.f32(logits)
	c := d.lastDim(op, logits)
	d.check(op, d.ops.Softmax(lt.ptr, d.mustLen(op, probs, lt.elems), lt.elems/c, c))
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
	l, err := d.labelAt(op, cell, labels)
	if err != nil || cell == kernels.NoBadLabel {
		return err
	}
	return fmt.Errorf("%s: label %v at flat voxel %d is not a class index in [0, %d)", op, l, cell, k)
}

// labelAt reads back the label at a kernel's bad-label cell; no error
// and no read for kernels.NoBadLabel, an error for a cell outside
// labels or a failed read.
func (d *Device[B]) labelAt(op string, cell int32, labels nn.Tensor) (float32, error) {
	if cell == kernels.NoBadLabel {
		return 0, nil
	}
	lt := d.f32(labels)
	if cell < 0 || int(cell) >= lt.elems {
		return 0, fmt.Errorf("%s: the kernel reported an invalid label at voxel %d of %d", op, cell, lt.elems)
	}
	var b [4]byte
	if !d.read(op, b[:], d.machine.Offset(lt.ptr, 4*int(cell))) {
		return 0, d.Err()
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[:])), nil
}

// The CUDA device leaves an ignore label out of the loss and the counts.
var _ nn.IgnoreLossDevice = (*Device[int])(nil)

// SoftmaxLoss computes probs = softmax(logits) and the SegStats sums.
func (d *Device[B]) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	return d.softmaxLoss("SoftmaxLoss", logits, labels, probs, -1)
}

// SoftmaxLossIgnore is SoftmaxLoss leaving the voxels labelled ignore out
// of every sum (nn.IgnoreLossDevice); their probabilities are still
// written.
func (d *Device[B]) SoftmaxLossIgnore(logits, labels, probs nn.Tensor, ignore int) (nn.SegStats, error) {
	return d.softmaxLoss("SoftmaxLossIgnore", logits, labels, probs, ignore)
}

func (d *Device[B]) softmaxLoss(op string, logits, labels, probs nn.Tensor, ignore int) (nn.SegStats, error) {
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	pp := d.mustLen(op, probs, n*v*c)
	outLen := kernels.SoftmaxLossOutLen(n, c)
	scBytes := d.ops.ScratchBytes(n, v, c)
	if ignore >= 0 {
		outLen = kernels.SoftmaxLossIgnoreOutLen(n, c)
		scBytes = d.ops.SoftmaxLossIgnoreScratchBytes(n, v, c)
	}
	// out (float64s) and the bad-label cell in one buffer: one download.
	small, ok := d.need(op, &d.small, 8*outLen+8)
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	sc, ok := d.need(op, &d.scratch, scBytes)
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	bad := d.machine.Offset(small, 8*outLen)
	if ignore >= 0 {
		d.check(op, d.ops.SoftmaxLossIgnore(d.ptr(logits), d.ptr(labels), pp, small, bad, sc, n, v, c, ignore))
	} else {
		d.check(op, d.ops.SoftmaxLoss(d.ptr(logits), d.ptr(labels), pp, small, bad, sc, n, v, c))
	}
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
	fromOut := kernels.SegStatsFromOut
	if ignore >= 0 {
		fromOut = kernels.SegStatsIgnoreFromOut
	}
	st, err := fromOut(f64s(host[:8*outLen]), n, v, c)
	d.check(op, err)
	return st, nil
}

// SoftmaxLossBackward writes dlogits (see nn.Device).
func (d *Device[B]) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	d.softmaxLossBackward("SoftmaxLossBackward", probs, labels, ceScale, alpha, beta, extra, dlogits, -1)
}

// SoftmaxLossBackwardIgnore is SoftmaxLossBackward with dlogits zero at
// the voxels labelled ignore (nn.IgnoreLossDevice).
func (d *Device[B]) SoftmaxLossBackwardIgnore(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor, ignore int) {
	d.softmaxLossBackward("SoftmaxLossBackwardIgnore", probs, labels, ceScale, alpha, beta, extra, dlogits, ignore)
}

func (d *Device[B]) softmaxLossBackward(op string, probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor, ignore int) {
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
	ap := d.machine.Offset(small, 4*n)
	bp := d.machine.Offset(small, 4*(n+n*c))
	if ignore >= 0 {
		d.check(op, d.ops.SoftmaxLossBackwardIgnore(d.ptr(probs), d.ptr(labels), small, ap, bp, ep, dp, n, v, c, ignore))
	} else {
		d.check(op, d.ops.SoftmaxLossBackward(d.ptr(probs), d.ptr(labels), small, ap, bp, ep, dp, n, v, c))
	}
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
	bad := d.machine.Offset(small, 8*n)
	d.check(op, d.ops.SigmoidBCE(d.ptr(logits), d.ptr(labels), dp, small, bad, sc, n, v, posWeight, gradScale))
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
	d.check(op, d.ops.OneHot(d.ptr(labels), d.ptr(dst), bad, n*v, c))
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
	d.mustShape(op, y, d.f32(x).shape)
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
	d.check(op, d.ops.SoftSkeleton(d.ptr(x), d.ptr(skel), sc, n, dd, h, w, c, iters, fromC))
}

// SoftSkeletonBackward adds the soft skeleton's gradient to dx.
func (d *Device[B]) SoftSkeletonBackward(x, dskel, dx nn.Tensor, iters, fromC int) {
	const op = "SoftSkeletonBackward"
	d.begin(op)
	n, dd, h, w, c := d.skelDims(op, x, dskel, iters, fromC)
	d.mustShape(op, dx, d.f32(x).shape)
	sc, ok := d.need(op, &d.scratch, kernels.SkeletonScratchBytes(n*dd*h*w*c, iters))
	if !ok {
		return
	}
	d.check(op, d.ops.SoftSkeletonBackward(d.ptr(x), d.ptr(dskel), d.ptr(dx), sc, n, dd, h, w, c, iters, fromC))
}

// ChannelDot returns Σ over voxels of a·b per sample and channel.
func (d *Device[B]) ChannelDot(a, b nn.Tensor) []float64 {
	const op = "ChannelDot"
	d.begin(op)
	n, dd, h, w, c := d.dims5(op, a)
	var bp B
	if b != nil {
		bp = d.mustShape(op, b, d.f32(a).shape)
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
	d.check(op, d.ops.ChannelDot(d.ptr(a), bp, small, sc, n, v, c))
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
		ap = d.mustShape(op, a, d.f32(dst).shape)
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
		bep = d.machine.Offset(small, 4*len(alpha))
	}
	d.check(op, d.ops.ChannelAffineAdd(d.ptr(dst), ap, alp, bep, n, dd*h*w, c))
}

// SegCounts returns per-class TP, FP and FN counts of argmax(logits).
func (d *Device[B]) SegCounts(logits, labels nn.Tensor) (tp, fp, fn []int64, err error) {
	return d.segCounts("SegCounts", logits, labels, -1)
}

// SegCountsIgnore is SegCounts without the voxels labelled ignore
// (nn.IgnoreLossDevice).
func (d *Device[B]) SegCountsIgnore(logits, labels nn.Tensor, ignore int) (tp, fp, fn []int64, err error) {
	return d.segCounts("SegCountsIgnore", logits, labels, ignore)
}

func (d *Device[B]) segCounts(op string, logits, labels nn.Tensor, ignore int) (tp, fp, fn []int64, err error) {
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	k := max(c, 2)
	cnt := kernels.SegCountsLen(c)
	small, ok := d.need(op, &d.small, 8*cnt+8)
	if !ok {
		return nil, nil, nil, d.Err()
	}
	bad := d.machine.Offset(small, 8*cnt)
	if ignore >= 0 {
		d.check(op, d.ops.SegCountsIgnore(d.ptr(logits), d.ptr(labels), small, bad, n*v, c, ignore))
	} else {
		d.check(op, d.ops.SegCounts(d.ptr(logits), d.ptr(labels), small, bad, n*v, c))
	}
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
