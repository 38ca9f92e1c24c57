// Launch recipes of loss.cu (and one-hot from elementwise.cu): softmax, the
// segmentation loss sums and their backward, sigmoid BCE, the multi-label
// sigmoid loss and its backward, TP/FP/FN counts.

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
// scratch holds ScratchBytes(n, v, c) bytes.
func (o Ops[B]) SoftmaxLoss(logits, labels, probs, out, bad, scratch B, n, v, c int) error {
	var none B
	return o.softmaxLoss("SoftmaxLoss", logits, labels, probs, out, bad, scratch, none, n, v, c, -1)
}

// SoftmaxLossIgnoreOutLen is the float64s SoftmaxLossIgnore writes to out:
// SoftmaxLossOutLen's, then the counted voxels per sample (n).
func SoftmaxLossIgnoreOutLen(n, c int) int { return SoftmaxLossOutLen(n, c) + n }

// SoftmaxLossIgnoreScratchBytes is the scratch SoftmaxLossIgnore needs:
// ScratchBytes plus the per-chunk counts of counted voxels.
func (o Ops[B]) SoftmaxLossIgnoreScratchBytes(n, v, c int) int {
	return o.ScratchBytes(n, v, c) + 8*n*o.nChunks(v)
}

// SoftmaxLossIgnore is SoftmaxLoss leaving the voxels labelled ignore (≥ 0)
// out of every sum (nn.IgnoreLossDevice): out has
// SoftmaxLossIgnoreOutLen float64s, the last n the counted voxels per
// sample; scratch holds SoftmaxLossIgnoreScratchBytes.
func (o Ops[B]) SoftmaxLossIgnore(logits, labels, probs, out, bad, scratch B, n, v, c, ignore int) error {
	const op = "SoftmaxLossIgnore"
	if ignore < 0 {
		return fmt.Errorf("kernels.%s: ignore label %d, want >= 0", op, ignore)
	}
	cntpart := o.Launcher.Offset(scratch, 8*n*o.nChunks(v)*(3*c+1))
	if err := o.softmaxLoss(op, logits, labels, probs, out, bad, scratch, cntpart, n, v, c, ignore); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, n, cntpart, o.Launcher.Offset(out, 8*SoftmaxLossOutLen(n, c)), i32(n), i32(o.nChunks(v)), int32(1))
}

// softmaxLoss launches SoftmaxLoss's kernels; cntpart (B's zero value: none)
// receives the per-chunk counted voxels.
func (o Ops[B]) softmaxLoss(op string, logits, labels, probs, out, bad, scratch, cntpart B, n, v, c, ignore int) error {
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	cepart := scratch
	part := o.Launcher.Offset(scratch, 8*n*nch)
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSoftmaxFwd, o.chunkGrid(n, v), logits, labels, probs, cepart, cntpart, bad, i32(v), i32(c), i32(o.chunk(v)), i32(ignore)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSegStatsPartial, o.chunkGrid(n, v), probs, labels, part, i32(v), i32(c), i32(o.chunk(v)), i32(ignore)); err != nil {
		return err
	}
	if err := o.launchBlocks(kReduceChunksF64, n, cepart, out, i32(n), i32(nch), int32(1)); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, n*3*c, part, o.Launcher.Offset(out, 8*n), i32(n), i32(nch), i32(3*c))
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

// SegStatsIgnoreFromOut turns SoftmaxLossIgnore's out (downloaded) into
// nn.SegStats with Counted.
func SegStatsIgnoreFromOut(out []float64, n, v, c int) (nn.SegStats, error) {
	if len(out) != SoftmaxLossIgnoreOutLen(n, c) {
		return nn.SegStats{}, fmt.Errorf("kernels.SegStatsIgnoreFromOut: %d values, want %d for n=%d c=%d", len(out), SoftmaxLossIgnoreOutLen(n, c), n, c)
	}
	m := SoftmaxLossOutLen(n, c)
	st, err := SegStatsFromOut(out[:m], n, v, c)
	if err != nil {
		return nn.SegStats{}, err
	}
	st.Counted = append([]float64(nil), out[m:]...)
	return st, nil
}

// SoftmaxLossBackward writes dlogits from probs and labels (see
// nn.Device.SoftmaxLossBackward) with device arrays ceScale (n) and alpha,
// beta (n·c floats); extra may be B's zero value. dlogits may be probs.
func (o Ops[B]) SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits B, n, v, c int) error {
	return o.softmaxLossBackward("SoftmaxLossBackward", probs, labels, ceScale, alpha, beta, extra, dlogits, n, v, c, -1)
}

// SoftmaxLossBackwardIgnore is SoftmaxLossBackward with dlogits zero at
// the voxels labelled ignore (≥ 0).
func (o Ops[B]) SoftmaxLossBackwardIgnore(probs, labels, ceScale, alpha, beta, extra, dlogits B, n, v, c, ignore int) error {
	const op = "SoftmaxLossBackwardIgnore"
	if ignore < 0 {
		return fmt.Errorf("kernels.%s: ignore label %d, want >= 0", op, ignore)
	}
	return o.softmaxLossBackward(op, probs, labels, ceScale, alpha, beta, extra, dlogits, n, v, c, ignore)
}

func (o Ops[B]) softmaxLossBackward(op string, probs, labels, ceScale, alpha, beta, extra, dlogits B, n, v, c, ignore int) error {
	if err := checkSizes(op, []int{n, v, c}); err != nil {
		return err
	}
	return o.launch1(kSoftmaxLossBwd, n*v, probs, labels, ceScale, alpha, beta, extra, dlogits, i32(n), i32(v), i32(c), i32(ignore))
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
	if err := o.Launcher.Launch(kSigmoidBCE, o.chunkGrid(n, v), logits, labels, dlogits, scratch, bad, i32(v), i32(o.chunk(v)), posWeight, gradScale); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, n, scratch, out, i32(n), i32(o.nChunks(v)), int32(1))
}

// SegCountsLen is the uint64 counters SegCounts writes for c channels:
// TP, FP, FN for each of max(c, 2) classes.
func SegCountsLen(c int) int { return 3 * max(c, 2) }

// SegCounts writes counts (SegCountsLen(c) uint64s: TP[k], FP[k], FN[k])
// of argmax(logits) (nvox voxels, c channels; one channel thresholded at 0)
// against labels; bad as in OneHot.
func (o Ops[B]) SegCounts(logits, labels, counts, bad B, nvox, c int) error {
	return o.segCounts("SegCounts", logits, labels, counts, bad, nvox, c, -1)
}

// SegCountsIgnore is SegCounts leaving the voxels labelled ignore (≥ 0) out
// of every count.
func (o Ops[B]) SegCountsIgnore(logits, labels, counts, bad B, nvox, c, ignore int) error {
	const op = "SegCountsIgnore"
	if ignore < 0 {
		return fmt.Errorf("kernels.%s: ignore label %d, want >= 0", op, ignore)
	}
	return o.segCounts(op, logits, labels, counts, bad, nvox, c, ignore)
}

func (o Ops[B]) segCounts(op string, logits, labels, counts, bad B, nvox, c, ignore int) error {
	if err := checkSizes(op, []int{nvox, c}); err != nil {
		return err
	}
	k := max(c, 2)
	if err := o.Launcher.Launch(kFillI32, gridFor(2*3*k), counts, i32(2*3*k), int32(0)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kSegCounts, nvox, logits, labels, counts, bad, i32(nvox), i32(c), i32(k), i32(ignore))
}

// b2i is a kernel's int flag (0 or 1).
func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// SigmoidMultiLabelLossOutLen is the float64s SigmoidMultiLabelLoss writes
// to out: per sample, five sums per channel (BCE, counted voxels, Σσ·t, Σσ,
// Σt), each block of c channels in that order.
func SigmoidMultiLabelLossOutLen(n, c int) int { return 5 * n * c }

// SigmoidMultiLabelLossScratchBytes is the scratch SigmoidMultiLabelLoss
// needs: five float64 partial sums per sample, chunk and channel.
func (o Ops[B]) SigmoidMultiLabelLossScratchBytes(n, v, c int) int {
	return 8 * 5 * n * o.nChunks(v) * c
}

// SigmoidMultiLabelLoss writes probs = σ(logits) (n, v, c; probs must not
// be logits) and, in out (SigmoidMultiLabelLossOutLen float64s), the
// multi-label loss sums against bit-packed labels (n, v) of
// nn.MultiLabelLossDevice; with ignore, voxels labelled 255 add to no sum.
// bad is one int32 cell: NoBadLabel or the first voxel whose label is not
// a byte of c bits. scratch holds SigmoidMultiLabelLossScratchBytes.
func (o Ops[B]) SigmoidMultiLabelLoss(logits, labels, probs, out, bad, scratch B, n, v, c int, ignore bool) error {
	const op = "SigmoidMultiLabelLoss"
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	if err := checkSizes(op, []int{n, nch, 5 * c}); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kSigmoidMultiLabelLoss, o.chunkGrid(n, v), logits, labels, probs, scratch, bad, i32(v), i32(c), i32(o.chunk(v)), b2i(ignore)); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, n*5*c, scratch, out, i32(n), i32(nch), i32(5*c))
}

// MultiLabelStatsFromOut turns SigmoidMultiLabelLoss's out (downloaded)
// into nn.SegStats: CE[n·C+c] the BCE of sample n and channel c,
// Counted[n] the voxels counted (the same in every channel).
func MultiLabelStatsFromOut(out []float64, n, v, c int) (nn.SegStats, error) {
	if len(out) != SigmoidMultiLabelLossOutLen(n, c) {
		return nn.SegStats{}, fmt.Errorf("kernels.MultiLabelStatsFromOut: %d values, want %d for n=%d c=%d", len(out), SigmoidMultiLabelLossOutLen(n, c), n, c)
	}
	st := nn.SegStats{N: n, C: c, Voxels: v,
		CE: make([]float64, n*c), Counted: make([]float64, n), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c)}
	for b := 0; b < n; b++ {
		s := out[b*5*c : (b+1)*5*c]
		copy(st.CE[b*c:(b+1)*c], s[:c])
		st.Counted[b] = s[c]
		copy(st.Intersect[b*c:(b+1)*c], s[2*c:3*c])
		copy(st.PredSum[b*c:(b+1)*c], s[3*c:4*c])
		copy(st.TargetSum[b*c:(b+1)*c], s[4*c:5*c])
	}
	return st, nil
}

// SigmoidMultiLabelLossBackward writes dlogits (n, v, c) from probs and
// bit-packed labels (see nn.MultiLabelLossDevice) with device arrays
// bceScale, alpha and beta (n·c floats each: per sample and channel);
// zero at ignored voxels.
// dlogits may be probs.
func (o Ops[B]) SigmoidMultiLabelLossBackward(probs, labels, bceScale, alpha, beta, dlogits B, n, v, c int, ignore bool) error {
	if err := checkSizes("SigmoidMultiLabelLossBackward", []int{n, v, c}); err != nil {
		return err
	}
	return o.launch1(kSigmoidMultiLabelLossBwd, n*v*c, probs, labels, bceScale, alpha, beta, dlogits, i32(n), i32(v), i32(c), b2i(ignore))
}

// SegCountsMultiLabelLen is the uint64 counters SegCountsMultiLabel writes
// for n samples of c channels: TP, FP, FN of each channel, per sample.
func SegCountsMultiLabelLen(n, c int) int { return 3 * n * c }

// SegCountsMultiLabel writes counts (SegCountsMultiLabelLen(n, c) uint64s:
// per sample TP[c], FP[c], FN[c]) of logits > 0 (n samples of v voxels, c
// channels) against the bits of bit-packed labels, leaving out voxels
// labelled 255 with ignore; bad as in SigmoidMultiLabelLoss.
func (o Ops[B]) SegCountsMultiLabel(logits, labels, counts, bad B, n, v, c int, ignore bool) error {
	const op = "SegCountsMultiLabel"
	if err := checkSizes(op, []int{n, v, c}); err != nil {
		return err
	}
	if c <= 0 || v <= 0 {
		return fmt.Errorf("kernels.%s: %d channels of %d voxels", op, c, v)
	}
	m := SegCountsMultiLabelLen(n, c)
	if err := o.Launcher.Launch(kFillI32, gridFor(2*m), counts, i32(2*m), int32(0)); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kSegCountsMultiLabel, n*v, logits, labels, counts, bad, i32(n*v), i32(v), i32(c), b2i(ignore))
}
