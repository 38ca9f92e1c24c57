package infer

import (
	"context"
	"fmt"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
)

// Segment predicts the label map of a preprocessed volume with net: a
// sliding window with Gaussian weighting (and mirroring when v.Mirror),
// then argmax, or a threshold at 0 for a one-channel sigmoid output.
func Segment(ctx context.Context, net *DeviceNet, vol *data.Volume, v config.Validation) ([]uint8, error) {
	if len(vol.Image) != net.inC {
		return nil, fmt.Errorf("the model takes %d channels, the volume has %d", net.inC, len(vol.Image))
	}
	w := Window{Patch: net.patch, Overlap: v.Overlap, BatchSize: net.batch}
	if v.Mirror {
		w.MirrorAxes = mirrorAxes(net.patch)
	}
	logits, err := Predict(ctx, net, vol.Image, vol.Shape, net.outC, w)
	if err != nil {
		return nil, err
	}
	return logitLabels(logits, net.outC, vol.Shape[0]*vol.Shape[1]*vol.Shape[2]), nil
}

// logitLabels is the label map of c channels of n logits: argmax, or a
// threshold at 0 for one sigmoid channel.
func logitLabels(logits []float32, c, n int) []uint8 {
	if c == 1 {
		out := make([]uint8, n)
		for i, z := range logits[:n] {
			if z > 0 {
				out[i] = 1
			}
		}
		return out
	}
	return Argmax(logits, c, n)
}

// outputs predicts v with m, as nnU-Net's predictor does before its
// export: the sliding-window logits, c channels on v's grid
// (channel-major), with the function that takes labels from them (argmax,
// a threshold at 0 for one channel, or for a multi-label model each
// channel's logit above 0 — σ above ½ — painted in regions_class_order)
// and activate, which turns them into probabilities in place (softmax,
// sigmoid). Labels from the logits, not from rounded float32
// probabilities (argmax of those can break a near tie the other way), do
// not change with --save-probabilities.
func (m *Model) outputs(ctx context.Context, v *data.Volume, vc config.Validation) (vals []float32, c int,
	labelsOf func([]float32, int) []uint8, activate func([]float32, int, int), err error) {
	var order []int
	multi := m.Config != nil && m.Config.Model.MultiLabel()
	if multi {
		if order, err = regionsClassOrder(m); err != nil {
			return nil, 0, nil, nil, err
		}
	}
	logits, err := m.logits(ctx, v, vc)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	c = m.dnet.outC
	labelsOf = func(x []float32, n int) []uint8 { return logitLabels(x, c, n) }
	if multi {
		labelsOf = func(x []float32, n int) []uint8 { return multiLabelLabels(x, c, n, order, 0) }
	}
	return logits, c, labelsOf, m.activate, nil
}

// predictExported predicts v with m and maps the prediction onto the grid
// of v's files as nnU-Net exports one (exportPrediction), with the class
// probabilities when wantProbs.
func (m *Model) predictExported(ctx context.Context, v *data.Volume, vc config.Validation, wantProbs bool) (exported, error) {
	vals, c, labelsOf, activate, err := m.outputs(ctx, v, vc)
	if err != nil {
		return exported{}, err
	}
	return exportPrediction(v, vals, c, labelsOf, activate, m.Config != nil && m.Config.Model.MultiLabel(), wantProbs)
}
