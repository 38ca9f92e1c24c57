package infer

import (
	"context"

	"github.com/voxtrain/voxtrain/config"
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
// outside a crop (data.crop_to_nonzero). vals are one model's logits
// when activate is set (it turns them into probabilities in place, after
// resampling, as nnU-Net applies the softmax or sigmoid to the resampled
// logits), else probabilities — an ensemble's mean, which voxtrain
// averages where nnU-Net averages logits (see Ensemble); sigmoid says the
// channels are independent (multi-label, or one foreground channel). The
// probabilities are returned when wantProbs. vals may be overwritten.
//
// Memory: a resampled case holds c float32 channels on the crop box
// besides those on v's grid (nnU-Net holds the same), where resampling
// the label map would hold bytes.
func exportPrediction(v *data.Volume, vals []float32, c int, labelsOf func([]float32, int) []uint8,
	activate func([]float32, int, int), sigmoid, wantProbs bool) (exported, error) {
	crop, err := v.ResampleToCropBox(vals, c)
	if err != nil {
		return exported{}, err
	}
	cn := len(crop) / c
	labels := labelsOf(crop, cn)
	if wantProbs && activate != nil {
		activate(crop, c, cn)
	}
	return exportFromCrop(v, labels, crop, c, sigmoid, wantProbs)
}

// exportFromCrop pastes labels and, when wantProbs, probs (c channels),
// both on v's crop box on the files' grid, into that whole grid:
// background outside the box (data.Volume.PasteLabels,
// PasteProbabilities).
func exportFromCrop(v *data.Volume, labels []uint8, probs []float32, c int, sigmoid, wantProbs bool) (exported, error) {
	out := exported{shape: v.SourceShape}
	if out.shape == ([3]int{}) {
		out.shape = v.Shape
	}
	var err error
	if out.labels, err = v.PasteLabels(labels); err != nil {
		return exported{}, err
	}
	if wantProbs {
		if out.probs, err = v.PasteProbabilities(probs, c, sigmoid); err != nil {
			return exported{}, err
		}
	}
	return out, nil
}

// exportMean predicts v with every member and maps their mean onto the
// grid of v's files: each member's prediction as nnU-Net exports one (its
// logits resampled to the crop box, then softmax or sigmoid), the mean of
// those probabilities, labels from the mean (Labels), pasted into the
// whole grid. An ensemble of one is its member's prediction, and the
// mean is that of what each member's own --save-probabilities writes.
func (e *Ensemble) exportMean(ctx context.Context, v *data.Volume, vc config.Validation, wantProbs bool) (exported, error) {
	mean, err := e.mean(func(m *Model) ([]float32, error) {
		logits, err := m.logits(ctx, v, vc)
		if err != nil {
			return nil, err
		}
		crop, err := v.ResampleToCropBox(logits, e.Classes)
		if err != nil {
			return nil, err
		}
		m.activate(crop, e.Classes, len(crop)/e.Classes)
		return crop, nil
	})
	if err != nil {
		return exported{}, err
	}
	return exportFromCrop(v, e.Labels(mean, len(mean)/e.Classes), mean, e.Classes, e.MultiLabel, wantProbs)
}
