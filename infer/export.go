package infer

import (
	"github.com/voxtrain/voxtrain/data"
)

// exported is a prediction on the grid of the files a volume was read
// from.
type exported struct {
	labels []uint8
	probs  []float32 // nil unless asked for
	shape  [3]int    // the files' grid
}

// exportPrediction maps a prediction on v's grid onto the grid of the
// files v was read from, as nnU-Net exports one
// (convert_predicted_logits_to_segmentation_with_correct_shape): when v
// was resampled (data.target_spacing) the network's outputs vals, c
// channels on v's grid (channel-major), are resampled back by linear
// interpolation (data.Volume.ResampleToCropBox) and the labels taken
// there with labelsOf, rather than the labels themselves resampled; then
// labels and probabilities are pasted into the whole grid with background
// outside a crop (data.crop_to_nonzero). vals are logits when activate is
// set (it turns them into probabilities in place, after resampling, as
// nnU-Net applies the softmax to the resampled logits), else already
// probabilities; sigmoid says the channels are independent (multi-label,
// or one foreground channel). The probabilities are returned when
// wantProbs. vals may be overwritten.
func exportPrediction(v *data.Volume, vals []float32, c int, labelsOf func([]float32, int) []uint8,
	activate func([]float32, int, int), sigmoid, wantProbs bool) (exported, error) {
	crop, err := v.ResampleToCropBox(vals, c)
	if err != nil {
		return exported{}, err
	}
	cn := len(crop) / c
	out := exported{labels: labelsOf(crop, cn), shape: v.SourceShape}
	if out.shape == ([3]int{}) {
		out.shape = v.Shape
	}
	if out.labels, err = v.PasteLabels(out.labels); err != nil {
		return exported{}, err
	}
	if wantProbs {
		if activate != nil {
			activate(crop, c, cn)
		}
		if out.probs, err = v.PasteProbabilities(crop, c, sigmoid); err != nil {
			return exported{}, err
		}
	}
	return out, nil
}
