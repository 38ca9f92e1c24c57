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
	n := vol.Shape[0] * vol.Shape[1] * vol.Shape[2]
	if net.outC == 1 {
		out := make([]uint8, n)
		for i, z := range logits {
			if z > 0 {
				out[i] = 1
			}
		}
		return out, nil
	}
	return Argmax(logits, net.outC, n), nil
}
