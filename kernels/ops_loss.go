// Launch recipes of loss.cu (and one-hot from elementwise.cu): softmax, the
// segmentation loss sums and their backward, sigmoid BCE, TP/FP/FN counts.

package kernels

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// OneHot writes dst (nvox, c) = [labels = j]. bad is one int32 cell that
// receives NoBadLabel or the first voxel whose label is not a class index.
func (o Ops[B]) OneHot(labels, dst, bad B, nvox, c int) error {
	if err := checkSizes("OneHot", []int{nvox, c}); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kOneHot, nvox, labels, dst, bad, i32(nvox), i32(c))
}

// Softmax writes probs = softmax(logits) over the c channels of nvox
// voxels (probs may be logits).
func (o Ops[B]) Softmax(logits, probs B, nvox, c int) error {
	if err := checkSizes("Softmax", []int{nvox, c}); err != nil {
		return err
	}
	if c <= 0 {
		return fmt.Errorf("kernels.Softmax: %d channels", c)
	}
	return o.launch1(kSoftmax, nvox, logits, probs, i32(nvox), i32(c))
}

// SoftmaxLossOutLen is the float64s SoftmaxLoss writes to out: CE per
// sample (n), then per sample the class sums Intersect (c), PredSum (c),
// TargetSum (c).
func SoftmaxLossOutLen(n, c int) int { return n + 3*n*c }

// SoftmaxLoss writes probs = softmax(logits) over channels and, in out
// (SoftmaxLossOutLen float64s), the sums of nn.SegStats against labels
// (n, v). bad is one int32 cell: NoBadLabel or the first invalid voxel.
func (o Ops[B]) SoftmaxLoss(logits, labels, probs, out, bad, scratch B, n, v, c int) error {
	const op = "SoftmaxLoss"
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	cepart := scratch
	part := o.Launcher.Offset(scratch, 8*n*nch)
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSoftmaxFwd, o.chunkGrid(n, v), logits, labels, probs, cepart, bad, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSegStatsPartial, o.chunkGrid(n, v), probs, labels, part, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.launch1(kReduceChunksF64, n, cepart, out, i32(n), i32(nch), int32(1)); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, n*3*c, part, o.Launcher.Offset(out, 8*n), i32(n), i32(nch), i32(3*c))
}

// SegStatsFromOut turns SoftmaxLoss's out (downloaded) into nn.SegStats.
func SegStatsFromOut(out []float64, n, v, c int) (nn.SegStats, error) {
	if len(out) != SoftmaxLossOutLen(n, c) {
		return nn.SegStats{}, fmt.Errorf("kernels.SegStatsFromOut: %d values, want %d for n=%d c=%d", len(out), SoftmaxLossOutLen(n, c), n, c)
	}
	st := nn.SegStats{N: n, C: c, Voxels: v,
		CE: append([]float64(nil), out[:n]...), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c)}
	for b := 0; b < n; b++ {
		s := out[n+b*3*c:]
		copy(st.Intersect[b*c:(b+1)*c], s[:c])
		copy(st.PredSum[b*c:(b+1)*c], s[c:2*c])
		copy(st.TargetSum[b*c:(b+1)*c], s[2*c:3*c])
	}
	return st, nil
}

// SoftmaxLossBackward writes dlogits from probs and labels (see
// nn.Device.SoftmaxLossBackward) with device arrays ceScale (n) and alpha,
// beta (n·c floats); extra may be B's zero value. dlogits may be probs.
func (o Ops[B]) SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits B, n, v, c int) error {
	if err := checkSizes("SoftmaxLossBackward", []int{n, v, c}); err != nil {
		return err
	}
	return o.launch1(kSoftmaxLossBwd, n*v, probs, labels, ceScale, alpha, beta, extra, dlogits, i32(n), i32(v), i32(c))
}

// SigmoidBCE writes out[b] (float64) = Σ BCEWithLogits(pos_weight) of
// sample b of one-channel logits (n, v) against binary labels, and
// dlogits = gradScale·∂(sum)/∂logits; bad as in OneHot.
func (o Ops[B]) SigmoidBCE(logits, labels, dlogits, out, bad, scratch B, n, v int, posWeight, gradScale float32) error {
	if err := o.checkChunked("SigmoidBCE", n, v, 1); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSigmoidBCE, o.chunkGrid(n, v), logits, labels, dlogits, scratch, bad, i32(v), i32(o.chunk()), posWeight, gradScale); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, n, scratch, out, i32(n), i32(o.nChunks(v)), int32(1))
}

// SegCountsLen is the uint64 counters SegCounts writes for c channels:
// TP, FP, FN for each of max(c, 2) classes.
func SegCountsLen(c int) int { return 3 * max(c, 2) }

// SegCounts writes counts (SegCountsLen(c) uint64s: TP[k], FP[k], FN[k])
// of argmax(logits) (nvox voxels, c channels; one channel thresholded at 0)
// against labels; bad as in OneHot.
func (o Ops[B]) SegCounts(logits, labels, counts, bad B, nvox, c int) error {
	if err := checkSizes("SegCounts", []int{nvox, c}); err != nil {
		return err
	}
	k := max(c, 2)
	if err := o.Launcher.Launch(kFillI32, gridFor(2*3*k), counts, i32(2*3*k), int32(0)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kSegCounts, nvox, logits, labels, counts, bad, i32(nvox), i32(c), i32(k))
}
