package trainer

import (
	"context"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/nn"
)

// PatchScores are the results of a patch-based validation: the mean loss
// and, per foreground class, the Dice of the voxel counts summed over every
// validation patch (nnU-Net's "pseudo Dice").
type PatchScores struct {
	Loss float64
	Dice []float64 // classes 1..K−1
}

// validatePatches runs the validation stream's next epoch (plain patches of
// the held-out cases) through the model.
func validatePatches(ctx context.Context, m *nn.UNet, ws *nn.Workspace, crit *nn.Criterion, s *data.Stream, x, y nn.Tensor) (PatchScores, error) {
	dev := m.Device()
	var tp, fp, fn []int64
	lossSum, n := 0.0, 0
	for i := 0; i < s.BatchesPerEpoch(); i++ {
		b, err := s.Next(ctx)
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation batch %d: %w", i, err)
		}
		cs := dev.ComputeStream()
		err = dev.Upload(cs, x, b.Image)
		if err == nil {
			err = dev.Upload(cs, y, b.Label)
		}
		if err == nil {
			// The uploads read the host buffer asynchronously: release it only
			// once they are done.
			cs.Record().Synchronize()
		}
		b.Release()
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation upload: %w", err)
		}
		out := m.Forward(ws, x)
		v, err := crit.Compute(out, y)
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation loss: %w", err)
		}
		t, f, g, err := dev.SegCounts(out[0], y)
		if err != nil {
			return PatchScores{}, fmt.Errorf("validation counts: %w", err)
		}
		if tp == nil {
			tp, fp, fn = make([]int64, len(t)), make([]int64, len(t)), make([]int64, len(t))
		}
		for c := range t {
			tp[c] += t[c]
			fp[c] += f[c]
			fn[c] += g[c]
		}
		lossSum += v.Total
		n++
	}
	if err := dev.Err(); err != nil {
		return PatchScores{}, err
	}
	sc := PatchScores{Loss: lossSum / float64(max(n, 1))}
	for c := 1; c < len(tp); c++ {
		sc.Dice = append(sc.Dice, metrics.Confusion{TP: tp[c], FP: fp[c], FN: fn[c]}.Dice())
	}
	return sc, nil
}

// CaseScores are one case's sliding-window results per foreground class
// (summary.json writes them through summaryJSON, which turns NaN into null).
type CaseScores struct {
	ID   string
	Dice []float64
	HD95 []float64
}

// predictLabels predicts a whole volume: sliding window with Gaussian weighting
// (and mirroring when asked), then argmax (or a threshold at 0 for a
// one-channel sigmoid output).
func predictLabels(p *predictor, v *data.Volume, vc ValidationConfig, patch [3]int) ([]uint8, error) {
	cfg := infer.Config{Patch: patch, Overlap: vc.Overlap, BatchSize: p.batch}
	if vc.Mirror {
		cfg.MirrorAxes = []int{0, 1, 2}
	}
	logits, err := infer.Predict(p, v.Image, v.Shape, p.outC, cfg)
	if err != nil {
		return nil, err
	}
	n := v.Shape[0] * v.Shape[1] * v.Shape[2]
	if p.outC == 1 {
		out := make([]uint8, n)
		for i, z := range logits {
			if z > 0 {
				out[i] = 1
			}
		}
		return out, nil
	}
	return infer.Argmax(logits, p.outC, n), nil
}

// scoreCase compares a prediction with the case's label.
func scoreCase(id string, pred []uint8, v *data.Volume, classes int, hd95 bool) (CaseScores, error) {
	k := max(classes, 2)
	conf, err := metrics.Confusions(pred, v.Label, k)
	if err != nil {
		return CaseScores{}, fmt.Errorf("case %s: %w", id, err)
	}
	cs := CaseScores{ID: id}
	for c := 1; c < k; c++ {
		cs.Dice = append(cs.Dice, conf[c].Dice())
		if hd95 {
			a := make([]bool, len(pred))
			b := make([]bool, len(pred))
			for i := range pred {
				a[i] = pred[i] == uint8(c)
				b[i] = v.Label[i] == uint8(c)
			}
			h, err := metrics.HD95(a, b, metrics.Shape(v.Shape), v.Spacing)
			if err != nil {
				return CaseScores{}, fmt.Errorf("case %s: %w", id, err)
			}
			cs.HD95 = append(cs.HD95, h)
		}
	}
	return cs, nil
}

// SlidingScores summarise a sliding-window validation: per-case scores
// and, per class, the mean over cases (NaN cases left out, as nnU-Net).
type SlidingScores struct {
	Cases    []CaseScores
	MeanDice []float64
	MeanHD95 []float64
}

// Mean returns the mean over classes of the per-class mean Dice.
func (s SlidingScores) Mean() float64 { return metrics.NanMean(s.MeanDice) }

func summarise(cases []CaseScores) SlidingScores {
	s := SlidingScores{Cases: cases}
	if len(cases) == 0 {
		return s
	}
	k := len(cases[0].Dice)
	for c := 0; c < k; c++ {
		var d, h []float64
		for _, cs := range cases {
			d = append(d, cs.Dice[c])
			if len(cs.HD95) > c && !math.IsInf(cs.HD95[c], 0) {
				h = append(h, cs.HD95[c])
			}
		}
		s.MeanDice = append(s.MeanDice, metrics.NanMean(d))
		if len(cases[0].HD95) > 0 {
			s.MeanHD95 = append(s.MeanHD95, metrics.NanMean(h))
		}
	}
	return s
}
