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
		w.MirrorAxes = []int{0, 1, 2}
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

// segmentWithProbabilities is Segment that also returns the class
// probabilities on v's grid (as Model.Probabilities). The labels are
// Segment's own, taken from the logits before the softmax, so that
// validate's labels and scores do not change with --save-probabilities
// (argmax of rounded float32 probabilities can break a near tie the other
// way).
func (m *Model) segmentWithProbabilities(ctx context.Context, v *data.Volume, vc config.Validation) ([]uint8, []float32, error) {
	n := v.Shape[0] * v.Shape[1] * v.Shape[2]
	if m.Config != nil && m.Config.Model.MultiLabel() {
		// Segment's labels for these come from the probabilities anyway.
		e, err := NewEnsemble([]*Model{m})
		if err != nil {
			return nil, nil, err
		}
		probs, err := e.Probabilities(ctx, v, vc)
		if err != nil {
			return nil, nil, err
		}
		return e.Labels(probs, n), probs, nil
	}
	net := m.dnet
	if len(v.Image) != net.inC {
		return nil, nil, fmt.Errorf("the model takes %d channels, the volume has %d", net.inC, len(v.Image))
	}
	w := Window{Patch: net.patch, Overlap: vc.Overlap, BatchSize: net.batch}
	if vc.Mirror {
		w.MirrorAxes = []int{0, 1, 2}
	}
	logits, err := Predict(ctx, net, v.Image, v.Shape, net.outC, w)
	if err != nil {
		return nil, nil, err
	}
	labels := logitLabels(logits, net.outC, n)
	m.activate(logits, net.outC, n)
	return labels, logits, nil
}
