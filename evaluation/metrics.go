// Package evaluation scores label maps against references the way nnU-Net
// v2 does (nnunetv2/evaluation/evaluate_predictions.py): per case and label
// the voxel counts TP, FP, FN, TN, Dice and IoU; per label the mean over
// cases; and the mean over foreground labels. It writes and reads that
// result as nnU-Net's summary.json and evaluates a folder of predictions
// against a folder of references (train evaluate), by label or, for a
// region-based dataset.json, by nnU-Net v2 region (Region).
package evaluation

import (
	"fmt"
	"math"
	"sort"

	"github.com/voxtrain/voxtrain/metrics"
)

// Metrics are one label's scores: in one case (the counts are whole
// numbers) or averaged over cases (Summary.Mean, Summary.ForegroundMean).
// Field names follow nnU-Net's summary.json keys; HD95 is voxtrain's extra
// key, written only when a Summary has HD95 set.
type Metrics struct {
	Dice, IoU      float64
	FP, TP, FN, TN float64
	NPred, NRef    float64
	HD95           float64
}

// FromCounts fills Metrics from voxel counts as nnU-Net's compute_metrics
// does: Dice and IoU are NaN when the label is in neither prediction nor
// reference (tp+fp+fn = 0; nnunetv2 ≥ 2.2 sets np.nan explicitly, older
// versions got it from 0/0).
func FromCounts(tp, fp, fn, tn int64) Metrics {
	m := Metrics{TP: float64(tp), FP: float64(fp), FN: float64(fn), TN: float64(tn),
		NPred: float64(tp + fp), NRef: float64(tp + fn), Dice: math.NaN(), IoU: math.NaN(), HD95: math.NaN()}
	if tp+fp+fn > 0 {
		m.Dice = float64(2*tp) / float64(2*tp+fp+fn)
		m.IoU = float64(tp) / float64(tp+fp+fn)
	}
	return m
}

// Pairs is one case's joint histogram of (prediction, reference) labels,
// from which every label's counts follow without another pass over the
// voxels.
type Pairs struct {
	n     [256 * 256]int64 // n[p*256+r]
	total int64
}

// CountPairs counts the (prediction, reference) label pairs of two label
// maps of equal length.
func CountPairs(pred, ref []uint8) (*Pairs, error) {
	if len(pred) != len(ref) {
		return nil, fmt.Errorf("prediction has %d voxels, reference %d", len(pred), len(ref))
	}
	p := &Pairs{total: int64(len(pred))}
	for i, a := range pred {
		p.n[int(a)<<8|int(ref[i])]++
	}
	return p, nil
}

// Ignore drops every voxel whose reference is label from all counts, as
// nnU-Net v2's evaluation does with its ignore mask (dataset.json's
// "ignore" label, loss.ignore_label): such voxels are no label's TP, FP,
// FN or TN, whatever was predicted there.
func (p *Pairs) Ignore(label int) {
	if label < 0 || label > 255 {
		return
	}
	for k := 0; k < 256; k++ {
		p.total -= p.n[k<<8|label]
		p.n[k<<8|label] = 0
	}
}

// Metrics returns label's counts, Dice and IoU (HD95 is left NaN).
func (p *Pairs) Metrics(label int) Metrics {
	var tp, fp, fn int64
	for k := 0; k < 256; k++ {
		if k == label {
			continue
		}
		fp += p.n[label<<8|k]
		fn += p.n[k<<8|label]
	}
	tp = p.n[label<<8|label]
	return FromCounts(tp, fp, fn, p.total-tp-fp-fn)
}

// Present returns the foreground labels (> 0) found in the prediction or
// the reference, in increasing order.
func (p *Pairs) Present() []int {
	var out []int
	for l := 1; l < 256; l++ {
		for k := 0; k < 256; k++ {
			if p.n[l<<8|k] > 0 || p.n[k<<8|l] > 0 {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// HD95 is the 95th-percentile Hausdorff distance of label between pred and
// ref (see metrics.HD95): NaN when the label is in neither, +Inf when it is
// in one only.
func HD95(pred, ref []uint8, label int, shape [3]int, spacing [3]float64) (float64, error) {
	a := make([]bool, len(pred))
	b := make([]bool, len(ref))
	for i := range pred {
		a[i] = pred[i] == uint8(label)
		b[i] = ref[i] == uint8(label)
	}
	return metrics.HD95(a, b, metrics.Shape(shape), spacing)
}

// CheckLabels reports a label list that nnU-Net's evaluation could not
// use: empty, a label outside 1..255 (0 is background, which nnU-Net leaves
// out of the foreground mean; voxtrain scores foreground only), or a
// repeat. The list is sorted in place.
func CheckLabels(labels []int) error {
	if len(labels) == 0 {
		return fmt.Errorf("no labels to score")
	}
	sort.Ints(labels)
	for i, l := range labels {
		if l < 1 || l > 255 {
			return fmt.Errorf("label %d: want a foreground label in 1..255", l)
		}
		if i > 0 && labels[i-1] == l {
			return fmt.Errorf("label %d given twice", l)
		}
	}
	return nil
}
