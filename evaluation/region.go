package evaluation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/metrics"
)

// Region is one entry nnU-Net v2 scores for a region-based dataset.json
// (LabelManager.foreground_regions): a set of label values whose voxels
// together are its mask, in the prediction (a painted label map) and in
// the reference alike, as np.isin(seg, region).
type Region struct {
	// Labels are the label values as dataset.json lists them: their order
	// and repeats are kept, since they spell the summary.json key.
	Labels []int
	// Scalar marks a plain label value (dataset.json's "name": 3), which
	// nnU-Net scores as that label and keys "3"; a list of one value,
	// [3], keys "(3,)".
	Scalar bool
	// Name is the region's dataset.json key ("" where unknown).
	Name string
}

// Key is the region's summary.json key, nnU-Net's
// label_or_region_to_key: str(int) for a scalar, Python's str(tuple) for
// a list: "(1, 2, 3)", "(3,)".
func (r Region) Key() string {
	if r.Scalar && len(r.Labels) == 1 {
		return strconv.Itoa(r.Labels[0])
	}
	parts := make([]string, len(r.Labels))
	for i, l := range r.Labels {
		parts[i] = strconv.Itoa(l)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// short is the region's name, else its key (log lines).
func (r Region) short() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Key()
}

// ParseRegionKey reads a summary.json key back into a region, as
// nnU-Net's key_to_label_or_region: an integer is a scalar region, else
// the parentheses are dropped and the comma-separated integers kept
// ("(3,)" is the region of label 3 alone). The region has no Name.
func ParseRegionKey(key string) (Region, error) {
	if l, err := strconv.Atoi(strings.TrimSpace(key)); err == nil {
		return Region{Labels: []int{l}, Scalar: true}, nil
	}
	inner := strings.NewReplacer("(", "", ")", "").Replace(key)
	var r Region
	for _, s := range strings.Split(inner, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		l, err := strconv.Atoi(s)
		if err != nil {
			return Region{}, fmt.Errorf("key %q: %q is not an integer (want a label, 3, or a region, (1, 2))", key, s)
		}
		r.Labels = append(r.Labels, l)
	}
	if len(r.Labels) == 0 {
		return Region{}, fmt.Errorf("key %q: no label values (want a label, 3, or a region, (1, 2))", key)
	}
	return r, nil
}

// CheckRegions reports a region list that Folder could not score: empty,
// a region without labels, a scalar region of more than one label, a
// label value outside 0..255, a background region (label 0 alone, which
// nnU-Net's foreground_regions leaves out), or two regions of the same
// key (nnU-Net's result dict would hold one).
func CheckRegions(regions []Region) error {
	if len(regions) == 0 {
		return fmt.Errorf("no regions to score")
	}
	seen := map[string]bool{}
	for _, r := range regions {
		what := r.Key()
		if r.Name != "" {
			what = fmt.Sprintf("region %q %s", r.Name, r.Key())
		}
		if len(r.Labels) == 0 {
			return fmt.Errorf("%s: no label values", what)
		}
		if r.Scalar && len(r.Labels) != 1 {
			return fmt.Errorf("%s: a scalar region has one label value, not %d", what, len(r.Labels))
		}
		bg := true
		for _, l := range r.Labels {
			if l < 0 || l > 255 {
				return fmt.Errorf("%s: label value %d, want 0..255", what, l)
			}
			bg = bg && l == 0
		}
		if bg {
			return fmt.Errorf("%s: background (label 0 alone) is not a foreground region", what)
		}
		if seen[r.Key()] {
			return fmt.Errorf("%s given twice", what)
		}
		seen[r.Key()] = true
	}
	return nil
}

// member is a region's label values as a lookup table.
func (r Region) member() *[256]bool {
	var in [256]bool
	for _, l := range r.Labels {
		if l >= 0 && l < 256 {
			in[l] = true
		}
	}
	return &in
}

// RegionMetrics returns a region's counts, Dice and IoU (HD95 left NaN)
// from the joint histogram, without another pass over the voxels: a
// (prediction, reference) pair counts as TP when both labels are in the
// region, FP when only the prediction's is, FN when only the
// reference's is. Voxels dropped by Ignore are in none.
func (p *Pairs) RegionMetrics(r Region) Metrics {
	in := r.member()
	var tp, fp, fn int64
	for a := 0; a < 256; a++ {
		row := p.n[a<<8 : a<<8+256]
		for b, n := range row {
			if n == 0 {
				continue
			}
			switch {
			case in[a] && in[b]:
				tp += n
			case in[a]:
				fp += n
			case in[b]:
				fn += n
			}
		}
	}
	return FromCounts(tp, fp, fn, p.total-tp-fp-fn)
}

// HD95Region is the 95th-percentile Hausdorff distance (metrics.HD95)
// between a region's masks: prediction voxels whose label is in the
// region, and reference voxels whose label is, less those of the ignore
// label (0: none), whose truth is unknown. A plain label's reference
// mask never holds ignored voxels, so for a scalar region this is HD95.
func HD95Region(pred, ref []uint8, r Region, ignore int, shape [3]int, spacing [3]float64) (float64, error) {
	in := r.member()
	a := make([]bool, len(pred))
	b := make([]bool, len(ref))
	for i := range pred {
		a[i] = in[pred[i]]
	}
	for i := range ref {
		b[i] = in[ref[i]] && (ignore <= 0 || int(ref[i]) != ignore)
	}
	return metrics.HD95(a, b, metrics.Shape(shape), spacing)
}
