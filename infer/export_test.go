package infer

import (
	"math"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/volume"
)

// TestExportPredictionResamplesOutputs: a prediction on a resampled grid
// is mapped back as nnU-Net exports one — the logits resampled, the
// labels their argmax — not the labels resampled. Between a voxel of
// class 1 and one of class 2 whose logits both leave background a close
// second, the interpolated logits make background win: a label no
// resampling of the labels can give.
func TestExportPredictionResamplesOutputs(t *testing.T) {
	v := &data.Volume{Shape: [3]int{1, 1, 2}, SourceShape: [3]int{1, 1, 4}, Spacing: [3]float64{1, 1, 2}}
	// Channel-major: class 0, 1, 2 logits of the two voxels.
	logits := []float32{6, 6, 7, 0, 0, 7}
	onGrid := logitLabels(logits, 3, 2)
	if !slices.Equal(onGrid, []uint8{1, 2}) {
		t.Fatalf("labels on v's grid %v", onGrid)
	}
	byLabels, err := v.LabelsOnSourceGrid(onGrid)
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := func(x []float32, n int) []uint8 { return logitLabels(x, 3, n) }
	x, err := exportPrediction(v, slices.Clone(logits), 3, labelsOf, softmaxActivate, false, true)
	if err != nil {
		t.Fatal(err)
	}
	// Linear interpolation from 2 to 4 samples (half-voxel centres): A,
	// ¾A+¼B, ¼A+¾B, B: class 1, then (6, 5.25, 1.75) → 0, then 0, class 2.
	if want := []uint8{1, 0, 0, 2}; !slices.Equal(x.labels, want) {
		t.Errorf("exported labels %v, want %v (labels resampled themselves: %v)", x.labels, want, byLabels)
	}
	if slices.Contains(byLabels, 0) {
		t.Errorf("resampled labels %v hold background: the case does not tell the two rules apart", byLabels)
	}
	// The probabilities are the softmax of the resampled logits.
	if x.shape != v.SourceShape || len(x.probs) != 12 {
		t.Fatalf("shape %v, %d probabilities", x.shape, len(x.probs))
	}
	e := func(a float64) float64 { return math.Exp(a) }
	if p0 := float64(x.probs[1]); math.Abs(p0-e(6)/(e(6)+e(5.25)+e(1.75))) > 1e-5 {
		t.Errorf("background probability at voxel 1: %v", p0)
	}
}

// TestExportPredictionPastesACrop: a cropped case's labels and
// probabilities are pasted into the whole grid, background outside the
// box (probability 1 of class 0; 0 in every sigmoid channel).
func TestExportPredictionPastesACrop(t *testing.T) {
	v := &data.Volume{Shape: [3]int{1, 1, 2}, SourceShape: [3]int{1, 1, 4},
		Crop: volume.Box{Lo: [3]int{0, 0, 1}, Hi: [3]int{1, 1, 3}}}
	labelsOf := func(x []float32, n int) []uint8 { return logitLabels(x, 2, n) }
	x, err := exportPrediction(v, []float32{0, 3, 3, 0}, 2, labelsOf, softmaxActivate, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint8{0, 1, 0, 0}; !slices.Equal(x.labels, want) {
		t.Errorf("labels %v, want %v", x.labels, want)
	}
	if x.probs[0] != 1 || x.probs[3] != 1 || x.probs[4] != 0 || x.probs[7] != 0 || x.probs[1] > 0.1 || x.probs[5] < 0.9 {
		t.Errorf("probabilities %v", x.probs)
	}
	sig, err := exportPrediction(v, []float32{0.9, 0.2}, 1, func(x []float32, n int) []uint8 { return ProbabilityLabels(x, 1, n, false, nil) }, nil, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sig.labels, []uint8{0, 1, 0, 0}) || !slices.Equal(sig.probs, []float32{0, 0.9, 0.2, 0}) {
		t.Errorf("one sigmoid channel: labels %v, probabilities %v", sig.labels, sig.probs)
	}
}

func softmaxActivate(x []float32, c, n int) { Softmax(x, c, n) }
