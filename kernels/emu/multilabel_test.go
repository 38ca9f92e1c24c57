//go:build cgo

package emu

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// mlShape is a volume the multi-label kernels run on, with the launch
// recipes to run them by: the tests' usual one (2×3×5×7, 105 voxels per
// sample: less than a block, three 37-voxel chunks, one short), and one of
// 396 voxels per sample (a block and a half) in chunks of 300 voxels (more
// than a block, so threads stride; the second chunk short). Blocks with
// barriers are slow to emulate: the chunks are few, and the large shape
// runs one channel count.
type mlShape struct {
	n, d, h, w int
	ops        kernels.Ops[*Buffer]
	channels   []int
}

var mlShapes = []mlShape{
	{tn, td, th, tw, ops, []int{1, 3, 7}},
	{3, 4, 9, 11, kernels.Ops[*Buffer]{Launcher: &launcher, Chunk: 300, FlatChunk: 1000}, []int{6}},
}

func (s mlShape) v() int             { return s.d * s.h * s.w }
func (s mlShape) act(c int) nn.Shape { return nn.Shape{s.n, s.d, s.h, s.w, c} }
func (s mlShape) lab() nn.Shape      { return nn.Shape{s.n, s.d, s.h, s.w} }
func (s mlShape) name(c int) string {
	return fmt.Sprintf("%dx%dx%dx%d, %d channels", s.n, s.d, s.h, s.w, c)
}
func (s mlShape) tag(c int, ig bool) string { return fmt.Sprintf("%s, ignore %v", s.name(c), ig) }

// multiLabels returns n·v random bit-packed labels of c classes (any
// subset of the c bits, so classes overlap); with ignore about a quarter
// of them and every voxel of the last sample are 255.
func multiLabels(r *rand.Rand, n, v, c int, ignore bool) []float32 {
	x := make([]float32, n*v)
	for i := range x {
		x[i] = float32(r.IntN(1 << c))
		if ignore && (r.IntN(4) == 0 || i >= (n-1)*v) {
			x[i] = 255
		}
	}
	return x
}

// TestSigmoidMultiLabelLoss compares sigmoid_multi_label_loss (+
// reduce_chunks_f64) with cpu.Device.SigmoidMultiLabelLoss. Both evaluate
// σ, exp and log1p in float64 (glibc vs Go, each within an ulp): σ agrees
// to an ulp of float32 (1e-7 absolute), the BCE sums (per sample and
// channel on both, in another order) to 1e-12 relative, the σ sums to
// 1e-6 relative (an ulp per term); counts and Σt are exact.
func TestSigmoidMultiLabelLoss(t *testing.T) {
	r := rng(50)
	for si, s := range mlShapes {
		for _, c := range s.channels {
			for _, ignore := range []bool{false, true} {
				tag := s.tag(c, ignore)
				n, v := s.n, s.v()
				logits := uniform(r, n*v*c, -6, 6)
				labels := multiLabels(r, n, v, c, ignore)
				probs := scratch(t, 4*len(logits))
				out := scratch(t, 8*kernels.SigmoidMultiLabelLossOutLen(n, c))
				bad := scratch(t, 4)
				sc := scratch(t, s.ops.SigmoidMultiLabelLossScratchBytes(n, v, c))
				lb := buf(t, labels)
				must(t, s.ops.SigmoidMultiLabelLoss(buf(t, logits), lb, probs, out, bad, sc, n, v, c, ignore))
				got, err := kernels.MultiLabelStatsFromOut(out.F64(), n, v, c)
				if err != nil {
					t.Fatal(err)
				}
				pRef := tensor(s.act(c), make([]float32, len(logits)))
				want, err := dev.SigmoidMultiLabelLoss(tensor(s.act(c), logits), tensor(s.lab(), labels), pRef, ignore)
				if err != nil {
					t.Fatal(err)
				}
				k := "sigmoid_multi_label_loss+reduce_chunks_f64 (" + tag + ")"
				ref := "cpu.Device.SigmoidMultiLabelLoss"
				compare(t, "sigmoid_multi_label_loss ("+tag+")", ref+" (probs)", probs.F32(), pRef.Data(), 1e-7, 0)
				if len(got.CE) != n*c || len(want.CE) != n*c {
					t.Fatalf("%s: %d and %d BCE sums, want one per sample and channel (%d)", tag, len(got.CE), len(want.CE), n*c)
				}
				compare(t, k, ref+" (BCE per sample and channel)", got.CE, want.CE, 0, 1e-12)
				compare(t, k, ref+" (Counted)", got.Counted, want.Counted, 0, 0)
				compare(t, k, ref+" (Intersect)", got.Intersect, want.Intersect, 1e-9, 1e-6)
				compare(t, k, ref+" (PredSum)", got.PredSum, want.PredSum, 1e-9, 1e-6)
				compare(t, k, ref+" (TargetSum)", got.TargetSum, want.TargetSum, 0, 0)
				checkBad(t, "sigmoid_multi_label_loss ("+tag+")", bad, -1)
				if got.N != n || got.C != c || got.Voxels != v {
					t.Errorf("%s: SegStats header %d/%d/%d, want %d/%d/%d", tag, got.N, got.C, got.Voxels, n, c, v)
				}
				last := n - 1
				if ignore && (got.Counted[last] != 0 || got.CE[last*c] != 0 || got.PredSum[last*c] != 0 || got.TargetSum[last*c] != 0) {
					t.Errorf("%s: all-ignored sample has Counted %v, BCE %v, PredSum %v, TargetSum %v; want zeros", tag, got.Counted[last], got.CE[last*c], got.PredSum[last*c], got.TargetSum[last*c])
				}
				if ignore && (got.Counted[0] == 0 || got.Counted[0] == float64(v)) {
					t.Errorf("%s: sample 0 counts %v of %d voxels; the test wants some ignored, some not", tag, got.Counted[0], v)
				}

				// Bad labels: a bit ≥ c, a fraction, and 255 without
				// ignore; the first in flat order is reported, as the CPU
				// device names it. (On the first shape: one more run
				// each.)
				if si > 0 {
					continue
				}
				first := v + 5
				labels[v+40] = 0.5
				labels[first] = float32(int(1) << c)
				if !ignore {
					labels[v+20] = 255
				}
				must(t, s.ops.SigmoidMultiLabelLoss(buf(t, logits), buf(t, labels), probs, out, bad, sc, n, v, c, ignore))
				checkBad(t, "sigmoid_multi_label_loss ("+tag+")", bad, first)
				_, err = dev.SigmoidMultiLabelLoss(tensor(s.act(c), logits), tensor(s.lab(), labels), pRef, ignore)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("flat voxel %d ", first)) {
					t.Errorf("%s: CPU device error %v, want one naming voxel %d", tag, err, first)
				}
			}
		}
	}
	if err := ops.SigmoidMultiLabelLoss(nil, nil, nil, nil, nil, nil, 1, 8, 0, false); err == nil {
		t.Error("SigmoidMultiLabelLoss accepted 0 channels")
	}
}

// TestSigmoidMultiLabelLossBackward: the kernel repeats the CPU's float32
// arithmetic (bit-exact on amd64); ignored and badly labelled voxels get
// zero on both devices, and so does every voxel of a (sample, channel)
// whose three coefficients are zero (a class the sample's crop does not
// annotate).
func TestSigmoidMultiLabelLossBackward(t *testing.T) {
	r := rng(51)
	atol, rtol := exact()
	for _, s := range mlShapes {
		for _, c := range s.channels {
			for _, ignore := range []bool{false, true} {
				tag := s.tag(c, ignore)
				n, v := s.n, s.v()
				probs := uniform(r, n*v*c, 0.001, 0.999)
				labels := multiLabels(r, n, v, c, ignore)
				labels[7] = float32(int(1) << c) // bad: zero gradient on both devices
				bceScale := uniform(r, n*c, 0.1, 1)
				alpha := uniform(r, n*c, -1, 1)
				beta := uniform(r, n*c, -1, 1)
				// With more than one channel sample 0's last channel and
				// sample 1's first are unknown.
				unknown := map[int]bool{}
				if c > 1 {
					unknown[c-1], unknown[c] = true, true
				}
				for i := range unknown {
					bceScale[i], alpha[i], beta[i] = 0, 0, 0
				}
				dl := buf(t, uniform(r, len(probs), 5, 6)) // stale values must be overwritten
				must(t, ops.SigmoidMultiLabelLossBackward(buf(t, probs), buf(t, labels), buf(t, bceScale), buf(t, alpha), buf(t, beta), dl, n, v, c, ignore))
				ref := tensor(s.act(c), make([]float32, len(probs)))
				dev.SigmoidMultiLabelLossBackward(tensor(s.act(c), probs), tensor(s.lab(), labels), bceScale, alpha, beta, ref, ignore)
				got := dl.F32()
				compare(t, "sigmoid_multi_label_loss_bwd ("+tag+")", "cpu.Device.SigmoidMultiLabelLossBackward", got, ref.Data(), atol, rtol)
				zeros, nonzero := 0, 0
				for vox, l := range labels {
					for j := 0; j < c; j++ {
						switch {
						case vox == 7 || (ignore && l == 255) || unknown[vox/v*c+j]:
							if got[vox*c+j] != 0 {
								t.Fatalf("%s: voxel %d (label %v) channel %d has dlogits %v, want 0", tag, vox, l, j, got[vox*c+j])
							}
							zeros++
						case got[vox*c+j] != 0:
							nonzero++
						}
					}
				}
				if nonzero == 0 || (ignore && zeros <= c) || (c > 1 && zeros < 2*v) {
					t.Errorf("%s: %d zero and %d non-zero gradients; the test wants both kinds", tag, zeros, nonzero)
				}
			}
		}
	}
}

// TestSegCountsMultiLabel: integer counts per sample and channel, exact;
// logits of exactly 0 (σ = 0.5) are not positive on either device; ignored
// voxels are in no count. The last shape has more counters (40 samples × 7
// channels × 3) than the kernel keeps in shared memory.
func TestSegCountsMultiLabel(t *testing.T) {
	r := rng(52)
	shapes := append(mlShapes[:len(mlShapes):len(mlShapes)], mlShape{40, 1, 2, 3, ops, []int{7}})
	for si, s := range shapes {
		for _, c := range s.channels {
			for _, ignore := range []bool{false, true} {
				tag := s.tag(c, ignore)
				nvox := s.n * s.v()
				logits := uniform(r, nvox*c, -1, 1)
				for i := 0; i < len(logits); i += 13 {
					logits[i] = 0
				}
				labels := multiLabels(r, s.n, s.v(), c, ignore)
				counts := scratch(t, 8*kernels.SegCountsMultiLabelLen(s.n, c))
				bad := scratch(t, 4)
				must(t, s.ops.SegCountsMultiLabel(buf(t, logits), buf(t, labels), counts, bad, s.n, s.v(), c, ignore))
				tp, fp, fn, err := dev.SegCountsMultiLabel(tensor(s.act(c), logits), tensor(s.lab(), labels), ignore)
				if err != nil {
					t.Fatal(err)
				}
				if len(tp) != s.n*c {
					t.Fatalf("%s: CPU device gave %d counts, want one per sample and channel", tag, len(tp))
				}
				var want, got []float64
				for b := 0; b < s.n; b++ {
					for _, x := range [][]int64{tp, fp, fn} {
						want = append(want, f64s64(x[b*c:(b+1)*c])...)
					}
				}
				for _, x := range counts.U64() {
					got = append(got, float64(x))
				}
				compare(t, "seg_counts_multi_label ("+tag+")", "cpu.Device.SegCountsMultiLabel (TP, FP, FN)", got, want, 0, 0)
				checkBad(t, "seg_counts_multi_label ("+tag+")", bad, -1)
				// TP + FN of sample 0's channel 0 is its counted voxels in
				// class 0.
				inClass := 0
				for _, l := range labels[:s.v()] {
					if l != 255 && int(l)&1 != 0 {
						inClass++
					}
				}
				if got[0]+got[2*c] != float64(inClass) {
					t.Errorf("%s: sample 0's channel 0 TP+FN %v, want its %d labelled voxels", tag, got[0]+got[2*c], inClass)
				}

				if si > 0 {
					continue // one bad-label run is enough
				}
				labels[9], labels[4] = float32(int(1)<<c), 2.5
				must(t, s.ops.SegCountsMultiLabel(buf(t, logits), buf(t, labels), counts, bad, s.n, s.v(), c, ignore))
				checkBad(t, "seg_counts_multi_label ("+tag+")", bad, 4)
				if _, _, _, err := dev.SegCountsMultiLabel(tensor(s.act(c), logits), tensor(s.lab(), labels), ignore); err == nil || !strings.Contains(err.Error(), "flat voxel 4 ") {
					t.Errorf("%s: CPU device error %v, want one naming voxel 4", tag, err)
				}
			}
		}
	}
}

// f64s64 converts counts to float64s.
func f64s64(x []int64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
