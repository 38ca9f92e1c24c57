package infer

import (
	"context"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/volume"
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
	return multiLabelLabels(probs, c, n, order, 0.5)
}

// multiLabelLabels is MultiLabelLabels with the threshold above which a
// channel's value counts: 0.5 for probabilities, 0 for logits (σ(z) > ½
// exactly when z > 0).
func multiLabelLabels(vals []float32, c, n int, order []int, threshold float32) []uint8 {
	out := make([]uint8, n)
	for r := 0; r < c; r++ {
		ch := vals[r*n : (r+1)*n]
		for i, p := range ch {
			if p <= threshold {
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

// SegmentMultiLabel predicts a multi-label model's classes on a
// preprocessed volume as bit-packed bytes (bit c: class c), the encoding
// its references read as: a sliding window as Segment's, σ per channel,
// then MultiLabelLabels — for nnU-Net regions (order, the dataset's
// RegionsClassOrder) the label map nnU-Net writes, turned back into
// region bits through bits (Dataset.RegionBits), as nnU-Net scores
// regions (np.isin of the written segmentation); for per-class labels
// (order nil) the bits of the channels above 0.5.
func SegmentMultiLabel(ctx context.Context, net *DeviceNet, vol *data.Volume, v config.Validation, order []int, bits []uint8) ([]uint8, error) {
	if len(vol.Image) != net.inC {
		return nil, fmt.Errorf("the model takes %d channels, the volume has %d", net.inC, len(vol.Image))
	}
	if order != nil && len(bits) != 256 {
		return nil, fmt.Errorf("regions: a table of %d label values, want 256", len(bits))
	}
	w := Window{Patch: net.patch, Overlap: v.Overlap, BatchSize: net.batch}
	if v.Mirror {
		w.MirrorAxes = mirrorAxes(net.patch)
	}
	logits, err := Predict(ctx, net, vol.Image, vol.Shape, net.outC, w)
	if err != nil {
		return nil, err
	}
	n := vol.Shape[0] * vol.Shape[1] * vol.Shape[2]
	Sigmoid(logits[:net.outC*n])
	out := MultiLabelLabels(logits, net.outC, n, order)
	if order != nil {
		for i, l := range out {
			out[i] = bits[l]
		}
	}
	return out, nil
}

// ScoreCaseMultiLabel scores bit-packed predictions against bit-packed
// references, every channel (bit) c of classes its own label c+1 in the
// result (evaluation's labels are 1-based): TP, FP, FN, TN, Dice and IoU
// of bit c, and HD95 when asked; with ignore, voxels whose reference is
// 255 count in none of them, as the multi-label loss leaves them out. A
// class whose bit unknown has set (data.Case.Unknown: the case's crop does
// not annotate it) has every metric NaN, so the means over cases (nanmean)
// leave the case out for that class, as cellmap-data's NaN targets are.
func ScoreCaseMultiLabel(id string, pred []uint8, v *data.Volume, classes int, hd95, ignore bool, unknown uint8) (evaluation.Case, error) {
	ref := v.Label
	if len(pred) != len(ref) {
		return evaluation.Case{}, fmt.Errorf("case %s: prediction has %d voxels, reference %d", id, len(pred), len(ref))
	}
	var cs evaluation.Case
	for c := range classes {
		var tp, fp, fn, tn int64
		bit := uint8(1) << c
		if unknown&bit != 0 {
			nan := math.NaN()
			cs.Metrics = append(cs.Metrics, evaluation.Metrics{Dice: nan, IoU: nan, FP: nan, TP: nan, FN: nan, TN: nan, NPred: nan, NRef: nan, HD95: nan})
			continue
		}
		for i, r := range ref {
			if ignore && r == volume.IgnoreByte {
				continue
			}
			switch p, t := pred[i]&bit != 0, r&bit != 0; {
			case p && t:
				tp++
			case p:
				fp++
			case t:
				fn++
			default:
				tn++
			}
		}
		m := evaluation.FromCounts(tp, fp, fn, tn)
		if hd95 {
			a := make([]bool, len(pred))
			b := make([]bool, len(ref))
			for i := range pred {
				a[i] = pred[i]&bit != 0
				b[i] = ref[i]&bit != 0 && !(ignore && ref[i] == volume.IgnoreByte)
			}
			var err error
			if m.HD95, err = metrics.HD95(a, b, metrics.Shape(v.Shape), v.Spacing); err != nil {
				return evaluation.Case{}, fmt.Errorf("case %s: %w", id, err)
			}
		}
		cs.Metrics = append(cs.Metrics, m)
	}
	return cs, nil
}

// SummariseChannels averages multi-label case scores (one entry per
// output channel, as ScoreCaseMultiLabel makes them) as ds names its
// channels. A dataset.json of nnU-Net regions (ds.Regions) is summarised
// by region, keyed as nnU-Net's validation keys its summary.json (its
// compute_metrics_on_folder on LabelManager.foreground_regions): "(1, 2,
// 3)" for a list, "(2,)" for a list of one, "3" for a plain value; a
// region given twice (two channels, scored alike) is kept once, as
// nnU-Net's result dict holds it. Anything else (a manifest's classes)
// keeps channel c as label c+1 named ds.MultiLabelNames[c]
// (SummariseMultiLabel).
func SummariseChannels(ds *data.Dataset, hd95 bool, cases []evaluation.Case) (*Scores, error) {
	if ds.Regions == nil {
		return SummariseMultiLabel(ds.MultiLabelNames, hd95, cases), nil
	}
	var regions []evaluation.Region
	var keep []int
	seen := map[string]bool{}
	for c, r := range ds.Regions {
		if !seen[r.Key()] {
			seen[r.Key()] = true
			regions = append(regions, r)
			keep = append(keep, c)
		}
	}
	out := make([]evaluation.Case, len(cases))
	for i, cs := range cases {
		if len(cs.Metrics) != len(ds.Regions) {
			return nil, fmt.Errorf("scores of %s: %d output channels, but the dataset has %d regions", cs.ReferenceFile, len(cs.Metrics), len(ds.Regions))
		}
		ms := make([]evaluation.Metrics, len(keep))
		for j, c := range keep {
			ms[j] = cs.Metrics[c]
		}
		cs.Metrics = ms
		out[i] = cs
	}
	return evaluation.SummariseRegions(regions, hd95, out), nil
}

// ChannelMeans returns each output channel's mean Dice and mean HD95 (nil
// without HD95) from a summary SummariseChannels made for ds: a region's
// means for each channel of it, so that a region given twice reports
// both channels (the trainer's val_dice has one entry per channel).
func ChannelMeans(s *Scores, ds *data.Dataset) (dice, hd95 []float64) {
	if s.Regions == nil || ds.Regions == nil {
		return s.MeanDice(), s.MeanHD95()
	}
	at := map[string]int{}
	for j, r := range s.Regions {
		at[r.Key()] = j
	}
	for _, r := range ds.Regions {
		m := evaluation.Metrics{Dice: math.NaN(), HD95: math.NaN()} // not scored
		if j, ok := at[r.Key()]; ok {
			m = s.Mean[j]
		}
		dice = append(dice, m.Dice)
		if s.HD95 {
			hd95 = append(hd95, m.HD95)
		}
	}
	return dice, hd95
}

// SummariseMultiLabel averages multi-label case scores per class, class c
// as label c+1 named names[c].
func SummariseMultiLabel(names []string, hd95 bool, cases []evaluation.Case) *Scores {
	labels := make([]int, len(names))
	byLabel := map[int]string{}
	for c, n := range names {
		labels[c] = c + 1
		byLabel[c+1] = n
	}
	return evaluation.Summarise(labels, byLabel, hd95, cases)
}
