// The multi-label ops (nn.MultiLabelLossDevice): sigmoid outputs against
// bit-packed labels (bit c set where the voxel is in class c, 255 the
// ignore byte), for loss dice_bce.

package core

import (
	"encoding/binary"
	"fmt"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// The CUDA device trains multi-label sigmoid outputs.
var _ nn.MultiLabelLossDevice = (*Device[int])(nil)

// badBits turns a bad-label cell of the multi-label kernels into the CPU
// device's error message (cpu's firstBadBits), reading the offending label
// back (c channels).
func (d *Device[B]) badBits(op string, cell int32, labels nn.Tensor, c int, ignore bool) error {
	l, err := d.labelAt(op, cell, labels)
	if err != nil || cell == kernels.NoBadLabel {
		return err
	}
	ig := ""
	if ignore {
		ig = " or 255 (ignore)"
	}
	return fmt.Errorf("%s: label %v at flat voxel %d is not a bit-packed byte of %d classes (bits 0..%d%s)", op, l, cell, c, c-1, ig)
}

// SigmoidMultiLabelLoss writes probs = σ(logits) and returns the
// multi-label loss sums against bit-packed labels (nn.MultiLabelLossDevice).
func (d *Device[B]) SigmoidMultiLabelLoss(logits, labels, probs nn.Tensor, ignore bool) (nn.SegStats, error) {
	const op = "SigmoidMultiLabelLoss"
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	pp := d.mustLen(op, probs, n*v*c)
	outLen := kernels.SigmoidMultiLabelLossOutLen(n, c)
	// out (float64s) and the bad-label cell in one buffer: one download.
	small, ok := d.need(op, &d.small, 8*outLen+8)
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	sc, ok := d.need(op, &d.scratch, d.ops.SigmoidMultiLabelLossScratchBytes(n, v, c))
	if !ok {
		return nn.SegStats{}, d.Err()
	}
	bad := d.machine.Offset(small, 8*outLen)
	d.check(op, d.ops.SigmoidMultiLabelLoss(d.ptr(logits), d.ptr(labels), pp, small, bad, sc, n, v, c, ignore))
	host := make([]byte, 8*outLen+4)
	if !d.read(op, host, small) {
		return nn.SegStats{}, d.Err()
	}
	if err := d.badBits(op, i32At(host, 2*outLen), labels, c, ignore); err != nil {
		return nn.SegStats{}, err
	}
	if err := d.Err(); err != nil {
		return nn.SegStats{}, err
	}
	st, err := kernels.MultiLabelStatsFromOut(f64s(host[:8*outLen]), n, v, c)
	d.check(op, err)
	return st, nil
}

// SigmoidMultiLabelLossBackward writes dlogits for the multi-label loss
// (nn.MultiLabelLossDevice); zero at ignored voxels.
func (d *Device[B]) SigmoidMultiLabelLossBackward(probs, labels nn.Tensor, bceScale, alpha, beta []float32, dlogits nn.Tensor, ignore bool) {
	const op = "SigmoidMultiLabelLossBackward"
	d.begin(op)
	n, v, c := d.labelDims(op, probs, labels)
	dp := d.mustLen(op, dlogits, n*v*c)
	if len(bceScale) != n*c || len(alpha) != n*c || len(beta) != n*c {
		panic(fmt.Sprintf("%s.%s: coefficient lengths %d, %d, %d for N=%d C=%d", d.prefix, op, len(bceScale), len(alpha), len(beta), n, c))
	}
	small, ok := d.need(op, &d.small, 4*3*n*c)
	if !ok || !d.write(op, small, f32Bytes(bceScale, alpha, beta)) {
		return
	}
	ap := d.machine.Offset(small, 4*n*c)
	bp := d.machine.Offset(small, 4*2*n*c)
	d.check(op, d.ops.SigmoidMultiLabelLossBackward(d.ptr(probs), d.ptr(labels), small, ap, bp, dp, n, v, c, ignore))
}

// SegCountsMultiLabel returns TP, FP and FN counts of σ(logits) > 0.5
// against the labels' bits per sample and channel
// (nn.MultiLabelLossDevice).
func (d *Device[B]) SegCountsMultiLabel(logits, labels nn.Tensor, ignore bool) (tp, fp, fn []int64, err error) {
	const op = "SegCountsMultiLabel"
	d.begin(op)
	n, v, c := d.labelDims(op, logits, labels)
	cnt := kernels.SegCountsMultiLabelLen(n, c)
	small, ok := d.need(op, &d.small, 8*cnt+8)
	if !ok {
		return nil, nil, nil, d.Err()
	}
	bad := d.machine.Offset(small, 8*cnt)
	d.check(op, d.ops.SegCountsMultiLabel(d.ptr(logits), d.ptr(labels), small, bad, n, v, c, ignore))
	host := make([]byte, 8*cnt+4)
	if !d.read(op, host, small) {
		return nil, nil, nil, d.Err()
	}
	if err := d.badBits(op, i32At(host, 2*cnt), labels, c, ignore); err != nil {
		return nil, nil, nil, err
	}
	if err := d.Err(); err != nil {
		return nil, nil, nil, err
	}
	u := func(i int) int64 { return int64(binary.LittleEndian.Uint64(host[8*i:])) }
	tp, fp, fn = make([]int64, n*c), make([]int64, n*c), make([]int64, n*c)
	for b := 0; b < n; b++ {
		for j := 0; j < c; j++ {
			k := 3*c*b + j
			tp[b*c+j], fp[b*c+j], fn[b*c+j] = u(k), u(k+c), u(k+2*c)
		}
	}
	return tp, fp, fn, nil
}
