package infer

import (
	"fmt"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
)

// Scores are a sliding-window validation's results in nnU-Net v2's
// summary.json schema (see package evaluation): per case and class the
// voxel counts, Dice and IoU (and HD95 when asked), per class the mean over
// cases, and the mean over classes.
type Scores = evaluation.Summary

// Labels are the foreground classes 1..classes−1 of a model with classes
// output channels (at least class 1).
func Labels(classes int) []int {
	out := make([]int, 0, max(classes, 2)-1)
	for c := 1; c < max(classes, 2); c++ {
		out = append(out, c)
	}
	return out
}

// ScoreCase compares a prediction with the label of v (on v's grid, with
// v's voxel size for HD95) for every foreground class, as nnU-Net's
// compute_metrics does, and HD95 when asked. The voxels whose label is
// ignore (loss.ignore_label; −1: none) count in no TP, FP, FN or TN, as
// nnU-Net's ignore mask has it (HD95 still sees the whole prediction). The
// case's files are left for the caller to fill in.
func ScoreCase(id string, pred []uint8, v *data.Volume, classes int, hd95 bool, ignore int) (evaluation.Case, error) {
	pairs, err := evaluation.CountPairs(pred, v.Label)
	if err != nil {
		return evaluation.Case{}, fmt.Errorf("case %s: %w", id, err)
	}
	pairs.Ignore(ignore)
	var cs evaluation.Case
	for _, c := range Labels(classes) {
		m := pairs.Metrics(c)
		if hd95 {
			if m.HD95, err = evaluation.HD95(pred, v.Label, c, v.Shape, v.Spacing); err != nil {
				return evaluation.Case{}, fmt.Errorf("case %s: %w", id, err)
			}
		}
		cs.Metrics = append(cs.Metrics, m)
	}
	return cs, nil
}

// Summarise averages case scores per class (NaN cases left out, as
// nnU-Net), the classes named as names has them (class → name; may be nil).
func Summarise(classes int, names map[int]string, hd95 bool, cases []evaluation.Case) *Scores {
	return evaluation.Summarise(Labels(classes), names, hd95, cases)
}
