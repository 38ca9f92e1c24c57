//go:build cgo

package emu

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// TestSoftmaxLoss compares softmax and the SegStats sums with the CPU
// device. Both evaluate exp and log in float64 (the kernel with glibc's,
// the CPU with Go's; each within an ulp) and round to float32, so
// probabilities agree to an ulp (1e-7 absolute, p <= 1). CE sums float64
// terms in different orders: 1e-12 relative. The class sums add float32
// probabilities in float64: 1e-6 relative covers an ulp per probability.
func TestSoftmaxLoss(t *testing.T) {
	r := rng(40)
	for _, c := range []int{2, 3, 7} {
		logits := uniform(r, tn*tv*c, -4, 4)
		labels := labelsOf(r, tn*tv, c)
		lb := buf(t, labels)
		probs := scratch(t, 4*len(logits))
		out := scratch(t, 8*kernels.SoftmaxLossOutLen(tn, c))
		bad := scratch(t, 4)
		sc := scratch(t, ops.ScratchBytes(tn, tv, c))
		must(t, ops.SoftmaxLoss(buf(t, logits), lb, probs, out, bad, sc, tn, tv, c))
		got, err := kernels.SegStatsFromOut(out.F64(), tn, tv, c)
		if err != nil {
			t.Fatal(err)
		}
		pRef := tensor(shape5(c), make([]float32, len(logits)))
		want, err := dev.SoftmaxLoss(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels), pRef)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, "softmax_fwd", "cpu.Device.SoftmaxLoss (probs)", probs.F32(), pRef.Data(), 1e-7, 0)
		compare(t, "softmax_fwd+reduce_chunks_f64", "cpu.Device.SoftmaxLoss (CE per sample)", got.CE, want.CE, 0, 1e-12)
		compare(t, "seg_stats_partial+reduce_chunks_f64", "cpu.Device.SoftmaxLoss (Intersect)", got.Intersect, want.Intersect, 1e-9, 1e-6)
		compare(t, "seg_stats_partial+reduce_chunks_f64", "cpu.Device.SoftmaxLoss (PredSum)", got.PredSum, want.PredSum, 1e-9, 1e-6)
		compare(t, "seg_stats_partial+reduce_chunks_f64", "cpu.Device.SoftmaxLoss (TargetSum)", got.TargetSum, want.TargetSum, 0, 0)
		checkBad(t, "softmax_fwd", bad, -1)
		if got.Voxels != want.Voxels || got.N != want.N || got.C != want.C {
			t.Errorf("SegStats header %d/%d/%d, want %d/%d/%d", got.N, got.C, got.Voxels, want.N, want.C, want.Voxels)
		}

		// In place (probs over the logits) gives the same probabilities.
		inPlace := buf(t, logits)
		must(t, ops.SoftmaxLoss(inPlace, lb, inPlace, out, bad, sc, tn, tv, c))
		compare(t, "softmax_fwd", "cpu.Device.SoftmaxLoss (probs, computed in place)", inPlace.F32(), pRef.Data(), 1e-7, 0)
	}

	// Softmax alone (nn.Device.Softmax), over all voxels, in place.
	c := 5
	logits := uniform(r, tn*tv*c, -6, 6)
	pb := buf(t, logits)
	must(t, ops.Softmax(pb, pb, tn*tv, c))
	pRef := tensor(shape5(c), make([]float32, len(logits)))
	dev.Softmax(tensor(shape5(c), logits), pRef)
	compare(t, "softmax", "cpu.Device.Softmax", pb.F32(), pRef.Data(), 1e-7, 0)

	// Invalid labels.
	c = 3
	logits = uniform(r, tn*tv*c, -4, 4)
	labels := labelsOf(r, tn*tv, c)
	labels[170], labels[130] = 3, 0.5
	bad := scratch(t, 4)
	must(t, ops.SoftmaxLoss(buf(t, logits), buf(t, labels), scratch(t, 4*len(logits)), scratch(t, 8*kernels.SoftmaxLossOutLen(tn, c)), bad, scratch(t, ops.ScratchBytes(tn, tv, c)), tn, tv, c))
	checkBad(t, "softmax_fwd", bad, 130)
	_, err := dev.SoftmaxLoss(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels), tensor(shape5(c), make([]float32, len(logits))))
	if err == nil || !strings.Contains(err.Error(), "voxel 130") {
		t.Errorf("CPU device error %v, want one naming voxel 130", err)
	}
}

// TestSoftmaxLossBackward: the kernel repeats the CPU's float32 arithmetic
// (bit-exact on amd64).
func TestSoftmaxLossBackward(t *testing.T) {
	r := rng(41)
	c := 4
	probs := make([]float32, tn*tv*c)
	for v := 0; v < tn*tv; v++ { // rows that sum to ~1
		s := float32(0)
		row := uniform(r, c, 0.01, 1)
		for _, x := range row {
			s += x
		}
		for j := range row {
			probs[v*c+j] = row[j] / s
		}
	}
	labels := labelsOf(r, tn*tv, c)
	labels[33] = 9 // invalid labels get no label term on either device
	ceScale := uniform(r, tn, 0.1, 1)
	alpha := uniform(r, tn*c, -1, 1)
	beta := uniform(r, tn*c, -1, 1)
	extra := uniform(r, tn*tv*c, -0.5, 0.5)
	atol, rtol := exact()
	for _, withExtra := range []bool{false, true} {
		var eb *Buffer
		var et nn.Tensor
		name := "without extra"
		if withExtra {
			eb, et, name = buf(t, extra), tensor(shape5(c), extra), "with extra"
		}
		dl := scratch(t, 4*len(probs))
		must(t, ops.SoftmaxLossBackward(buf(t, probs), buf(t, labels), buf(t, ceScale), buf(t, alpha), buf(t, beta), eb, dl, tn, tv, c))
		ref := tensor(shape5(c), make([]float32, len(probs)))
		dev.SoftmaxLossBackward(tensor(shape5(c), probs), tensor(nn.Shape{tn, td, th, tw}, labels), ceScale, alpha, beta, et, ref)
		compare(t, "softmax_loss_bwd", "cpu.Device.SoftmaxLossBackward ("+name+")", dl.F32(), ref.Data(), atol, rtol)
	}
}

// TestSigmoidBCE: float64 exp/log1p on both sides (glibc vs Go, each within
// an ulp), so dlogits agree to an ulp of float32 (1e-7 absolute for
// |dlogits| <= pw·gradScale) and the loss sums to 1e-12 relative.
func TestSigmoidBCE(t *testing.T) {
	r := rng(42)
	logits := uniform(r, tn*tv, -6, 6)
	labels := labelsOf(r, tn*tv, 2)
	const pw, gs = 2.5, 0.3
	dl := scratch(t, 4*tn*tv)
	out := scratch(t, 8*tn)
	bad := scratch(t, 4)
	sc := scratch(t, ops.ScratchBytes(tn, tv, 1))
	must(t, ops.SigmoidBCE(buf(t, logits), buf(t, labels), dl, out, bad, sc, tn, tv, pw, gs))
	ref := tensor(nn.Shape{tn, td, th, tw, 1}, make([]float32, tn*tv))
	want, err := dev.SigmoidBCE(tensor(nn.Shape{tn, td, th, tw, 1}, logits), tensor(nn.Shape{tn, td, th, tw}, labels), pw, gs, ref)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "sigmoid_bce", "cpu.Device.SigmoidBCE (dlogits)", dl.F32(), ref.Data(), 1e-7, 0)
	compare(t, "sigmoid_bce+reduce_chunks_f64", "cpu.Device.SigmoidBCE (loss per sample)", out.F64(), want, 0, 1e-12)
	checkBad(t, "sigmoid_bce", bad, -1)

	labels[77], labels[12] = 2, -0.5
	must(t, ops.SigmoidBCE(buf(t, logits), buf(t, labels), dl, out, bad, sc, tn, tv, pw, gs))
	checkBad(t, "sigmoid_bce", bad, 12)
	if _, err := dev.SigmoidBCE(tensor(nn.Shape{tn, td, th, tw, 1}, logits), tensor(nn.Shape{tn, td, th, tw}, labels), pw, gs, ref); err == nil {
		t.Error("CPU device accepted label -0.5")
	}
}

// TestSegCounts: integer counts, exact.
func TestSegCounts(t *testing.T) {
	r := rng(43)
	for _, c := range []int{1, 3} {
		k := max(c, 2)
		logits := uniform(r, tn*tv*c, -1, 1)
		for i := 0; i+1 < len(logits) && c > 1; i += 17 {
			logits[i+1] = logits[i] // ties go to the lower class on both devices
		}
		labels := labelsOf(r, tn*tv, k)
		counts := scratch(t, 8*kernels.SegCountsLen(c))
		bad := scratch(t, 4)
		must(t, ops.SegCounts(buf(t, logits), buf(t, labels), counts, bad, tn*tv, c))
		tp, fp, fn, err := dev.SegCounts(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels))
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for _, s := range [][]int64{tp, fp, fn} {
			for _, v := range s {
				want = append(want, float64(v))
			}
		}
		var got []float64
		for _, v := range counts.U64() {
			got = append(got, float64(v))
		}
		compare(t, "seg_counts", "cpu.Device.SegCounts (TP, FP, FN)", got, want, 0, 0)
		checkBad(t, "seg_counts", bad, -1)
	}
}

// TestChannelDot: float64 sums in different orders, 1e-12 relative.
func TestChannelDot(t *testing.T) {
	r := rng(44)
	for _, c := range []int{1, 4, 257} {
		a := uniform(r, tn*tv*c, -1, 1)
		b := uniform(r, tn*tv*c, -1, 1)
		out := scratch(t, 8*tn*c)
		sc := scratch(t, ops.ScratchBytes(tn, tv, c))
		must(t, ops.ChannelDot(buf(t, a), buf(t, b), out, sc, tn, tv, c))
		want := dev.ChannelDot(tensor(shape5(c), a), tensor(shape5(c), b))
		compare(t, "channel_sum_partial+reduce_chunks_f64", "cpu.Device.ChannelDot (a·b)", out.F64(), want, 1e-12, 1e-12)
		must(t, ops.ChannelDot(buf(t, a), nil, out, sc, tn, tv, c))
		want = dev.ChannelDot(tensor(shape5(c), a), nil)
		compare(t, "channel_sum_partial+reduce_chunks_f64", "cpu.Device.ChannelDot (plain sums)", out.F64(), want, 1e-12, 1e-12)
	}
}

// ignoredLabels returns n·v random labels in [0, c) with about a third of
// them the ignore label, and every voxel of the last sample ignored (its
// sums must come out zero, its Counted 0).
func ignoredLabels(r *rand.Rand, n, v, c, ignore int) []float32 {
	labels := labelsOf(r, n*v, c+1)
	for i, l := range labels {
		if int(l) == c || i >= (n-1)*v {
			labels[i] = float32(ignore)
		}
	}
	return labels
}

// TestSoftmaxLossIgnore compares the ignore-label sums (softmax_fwd's and
// seg_stats_partial's ignore argument, SegStats.Counted) with the CPU
// device's SoftmaxLossIgnore; tolerances as TestSoftmaxLoss, Counted exact.
func TestSoftmaxLossIgnore(t *testing.T) {
	r := rng(45)
	for _, tc := range []struct{ c, ignore int }{{2, 2}, {3, 255}} {
		c := tc.c
		logits := uniform(r, tn*tv*c, -4, 4)
		labels := ignoredLabels(r, tn, tv, c, tc.ignore)
		probs := scratch(t, 4*len(logits))
		out := scratch(t, 8*kernels.SoftmaxLossIgnoreOutLen(tn, c))
		bad := scratch(t, 4)
		sc := scratch(t, ops.SoftmaxLossIgnoreScratchBytes(tn, tv, c))
		must(t, ops.SoftmaxLossIgnore(buf(t, logits), buf(t, labels), probs, out, bad, sc, tn, tv, c, tc.ignore))
		got, err := kernels.SegStatsIgnoreFromOut(out.F64(), tn, tv, c)
		if err != nil {
			t.Fatal(err)
		}
		pRef := tensor(shape5(c), make([]float32, len(logits)))
		want, err := dev.SoftmaxLossIgnore(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels), pRef, tc.ignore)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, "softmax_fwd (ignore)", "cpu.Device.SoftmaxLossIgnore (probs)", probs.F32(), pRef.Data(), 1e-7, 0)
		compare(t, "softmax_fwd+reduce_chunks_f64 (ignore)", "cpu.Device.SoftmaxLossIgnore (CE per sample)", got.CE, want.CE, 0, 1e-12)
		compare(t, "softmax_fwd+reduce_chunks_f64 (ignore)", "cpu.Device.SoftmaxLossIgnore (Counted)", got.Counted, want.Counted, 0, 0)
		compare(t, "seg_stats_partial+reduce_chunks_f64 (ignore)", "cpu.Device.SoftmaxLossIgnore (Intersect)", got.Intersect, want.Intersect, 1e-9, 1e-6)
		compare(t, "seg_stats_partial+reduce_chunks_f64 (ignore)", "cpu.Device.SoftmaxLossIgnore (PredSum)", got.PredSum, want.PredSum, 1e-9, 1e-6)
		compare(t, "seg_stats_partial+reduce_chunks_f64 (ignore)", "cpu.Device.SoftmaxLossIgnore (TargetSum)", got.TargetSum, want.TargetSum, 0, 0)
		checkBad(t, "softmax_fwd (ignore)", bad, -1)
		// The all-ignored last sample: nothing counted, every sum zero.
		last := tn - 1
		if got.Counted[last] != 0 || got.CE[last] != 0 || got.PredSum[last*c] != 0 || got.TargetSum[last*c] != 0 {
			t.Errorf("c=%d: all-ignored sample has Counted %v, CE %v, PredSum %v, TargetSum %v; want zeros", c, got.Counted[last], got.CE[last], got.PredSum[last*c], got.TargetSum[last*c])
		}
		if got.Counted[0] == 0 || got.Counted[0] == float64(tv) {
			t.Errorf("c=%d: sample 0 counts %v of %d voxels; the test wants some ignored, some not", c, got.Counted[0], tv)
		}

		// A label that is neither a class nor the ignore label is still bad.
		labels[40] = float32(tc.ignore + 1)
		must(t, ops.SoftmaxLossIgnore(buf(t, logits), buf(t, labels), probs, out, bad, sc, tn, tv, c, tc.ignore))
		checkBad(t, "softmax_fwd (ignore)", bad, 40)
		if _, err := dev.SoftmaxLossIgnore(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels), pRef, tc.ignore); err == nil {
			t.Errorf("c=%d: CPU device accepted label %d with ignore %d", c, tc.ignore+1, tc.ignore)
		}
	}
	if err := ops.SoftmaxLossIgnore(nil, nil, nil, nil, nil, nil, tn, tv, 2, -1); err == nil {
		t.Error("SoftmaxLossIgnore accepted ignore label -1")
	}
}

// TestSoftmaxLossBackwardIgnore: exact as TestSoftmaxLossBackward, with
// dlogits zero at the ignored voxels on both devices.
func TestSoftmaxLossBackwardIgnore(t *testing.T) {
	r := rng(46)
	const c, ignore = 3, 4
	probs := make([]float32, tn*tv*c)
	for v := 0; v < tn*tv; v++ {
		s := float32(0)
		row := uniform(r, c, 0.01, 1)
		for _, x := range row {
			s += x
		}
		for j := range row {
			probs[v*c+j] = row[j] / s
		}
	}
	labels := ignoredLabels(r, tn, tv, c, ignore)
	ceScale := uniform(r, tn, 0.1, 1)
	alpha := uniform(r, tn*c, -1, 1)
	beta := uniform(r, tn*c, -1, 1)
	extra := uniform(r, tn*tv*c, -0.5, 0.5)
	atol, rtol := exact()
	for _, withExtra := range []bool{false, true} {
		var eb *Buffer
		var et nn.Tensor
		name := "without extra"
		if withExtra {
			eb, et, name = buf(t, extra), tensor(shape5(c), extra), "with extra"
		}
		dl := buf(t, uniform(r, len(probs), 5, 6)) // stale values must be overwritten
		must(t, ops.SoftmaxLossBackwardIgnore(buf(t, probs), buf(t, labels), buf(t, ceScale), buf(t, alpha), buf(t, beta), eb, dl, tn, tv, c, ignore))
		ref := tensor(shape5(c), make([]float32, len(probs)))
		dev.SoftmaxLossBackwardIgnore(tensor(shape5(c), probs), tensor(nn.Shape{tn, td, th, tw}, labels), ceScale, alpha, beta, et, ref, ignore)
		compare(t, "softmax_loss_bwd (ignore)", "cpu.Device.SoftmaxLossBackwardIgnore ("+name+")", dl.F32(), ref.Data(), atol, rtol)
		got := dl.F32()
		for v, l := range labels {
			if l == ignore && (got[v*c] != 0 || got[v*c+c-1] != 0) {
				t.Fatalf("%s: ignored voxel %d has dlogits %v", name, v, got[v*c:(v+1)*c])
			}
		}
	}
}

// TestSegCountsIgnore: integer counts, exact; the ignored voxels (a whole
// sample among them) are in no count.
func TestSegCountsIgnore(t *testing.T) {
	r := rng(47)
	for _, c := range []int{1, 3} {
		k := max(c, 2)
		ignore := k + 2
		logits := uniform(r, tn*tv*c, -1, 1)
		labels := ignoredLabels(r, tn, tv, k, ignore)
		counts := scratch(t, 8*kernels.SegCountsLen(c))
		bad := scratch(t, 4)
		must(t, ops.SegCountsIgnore(buf(t, logits), buf(t, labels), counts, bad, tn*tv, c, ignore))
		tp, fp, fn, err := dev.SegCountsIgnore(tensor(shape5(c), logits), tensor(nn.Shape{tn, td, th, tw}, labels), ignore)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for _, s := range [][]int64{tp, fp, fn} {
			for _, v := range s {
				want = append(want, float64(v))
			}
		}
		var got []float64
		var total float64
		for i, v := range counts.U64() {
			got = append(got, float64(v))
			if i < 2*k { // TP + FP: one per counted voxel
				total += float64(v)
			}
		}
		compare(t, "seg_counts (ignore)", "cpu.Device.SegCountsIgnore (TP, FP, FN)", got, want, 0, 0)
		checkBad(t, "seg_counts (ignore)", bad, -1)
		counted := 0
		for _, l := range labels {
			if l != float32(ignore) {
				counted++
			}
		}
		if total != float64(counted) {
			t.Errorf("c=%d: TP+FP count %v voxels, want the %d not ignored", c, total, counted)
		}
		labels[3] = float32(k) // neither a class nor the ignore label
		must(t, ops.SegCountsIgnore(buf(t, logits), buf(t, labels), counts, bad, tn*tv, c, ignore))
		checkBad(t, "seg_counts (ignore)", bad, 3)
	}
}
