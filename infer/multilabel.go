package infer

import (
	"math"
)

// Multi-label models (model.targets multi_label) have one sigmoid channel
// per class: their probabilities are σ of each channel's logits, averaged
// over mirrors and ensemble members like softmax probabilities, and a
// voxel belongs to class c where channel c's probability is > 0.5 (nnU-Net's
// region threshold). Their label map is one of two:
//
//   - nnU-Net regions (a dataset.json with regions_class_order): a label
//     map, nnU-Net's LabelManager.convert_probabilities_to_segmentation —
//     region r paints regions_class_order[r] where it is > 0.5, later
//     regions over earlier ones;
//   - anything else (a manifest's per-class crops): bit-packed bytes, bit c
//     set where class c is > 0.5, the encoding the training labels use;
//     `train predict --probabilities` keeps the per-class probabilities.

// Sigmoid turns logits into σ(logits) in place, every channel alone.
func Sigmoid(x []float32) {
	for i, z := range x {
		x[i] = float32(1 / (1 + math.Exp(-float64(z))))
	}
}

// activate turns m's logits (c channels of n voxels, channel-major) into
// probabilities: σ per channel for a multi-label model, else Softmax.
func (m *Model) activate(logits []float32, c, n int) {
	if m.Config != nil && m.Config.Model.MultiLabel() {
		Sigmoid(logits[:c*n])
		return
	}
	Softmax(logits, c, n)
}

// MultiLabelLabels returns the label map of multi-label probabilities (c
// channels of n voxels, channel-major): with order (regions_class_order),
// region r's value order[r] where its probability is > 0.5, later regions
// painted over earlier ones, 0 where none is; without, the bit-packed byte
// of the classes > 0.5.
func MultiLabelLabels(probs []float32, c, n int, order []int) []uint8 {
	out := make([]uint8, n)
	for r := 0; r < c; r++ {
		ch := probs[r*n : (r+1)*n]
		for i, p := range ch {
			if p <= 0.5 {
				continue
			}
			if order != nil {
				out[i] = uint8(order[r])
			} else {
				out[i] |= 1 << r
			}
		}
	}
	return out
}
