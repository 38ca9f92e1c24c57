package augment

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Intensity normalisation that does not depend on randomness, for the data
// layer to run once per case at preprocessing time. Both follow nnU-Net's
// nnunetv2/preprocessing/normalization/default_normalization_schemes.py.

// ZScore normalises x in place to zero mean and unit standard deviation
// (population std, floored at 1e-8) and returns the mean and std used. With
// a mask (same length, non-zero = inside), the statistics come from the
// voxels inside and only those are normalised; voxels outside keep their
// value, as nnU-Net's ZScoreNormalization with use_mask_for_norm (it relies
// on them being 0 already: the region outside the non-zero crop).
func ZScore(x []float32, mask []uint8) (mean, std float64, err error) {
	if mask != nil && len(mask) != len(x) {
		return 0, 0, fmt.Errorf("augment: ZScore: mask has %d voxels, image %d", len(mask), len(x))
	}
	n, sum := 0, 0.0
	for i, v := range x {
		if mask == nil || mask[i] != 0 {
			sum += float64(v)
			n++
		}
	}
	if n == 0 {
		return 0, 0, errors.New("augment: ZScore: no voxel to normalise (empty image or mask)")
	}
	mean = sum / float64(n)
	m2 := 0.0
	for i, v := range x {
		if mask == nil || mask[i] != 0 {
			d := float64(v) - mean
			m2 += float64(d * d)
		}
	}
	std = math.Sqrt(m2 / float64(n))
	inv := 1 / math.Max(std, 1e-8)
	for i, v := range x {
		if mask == nil || mask[i] != 0 {
			x[i] = float32(float64(float64(v)-mean) * inv)
		}
	}
	return mean, std, nil
}

// CTStats are a dataset's foreground intensity statistics, as nnU-Net
// collects them in dataset_fingerprint.json (foreground_intensity_properties_per_channel).
type CTStats struct {
	Mean  float64 `yaml:"mean" json:"mean"`
	Std   float64 `yaml:"std" json:"std"`
	Lower float64 `yaml:"percentile_00_5" json:"percentile_00_5"`
	Upper float64 `yaml:"percentile_99_5" json:"percentile_99_5"`
}

// CTNormalize windows x in place: clip to [Lower, Upper], then subtract
// Mean and divide by Std (floored at 1e-8), as nnU-Net's CTNormalization.
func CTNormalize(x []float32, st CTStats) error {
	if st.Lower > st.Upper || math.IsNaN(st.Lower) || math.IsNaN(st.Upper) || math.IsNaN(st.Mean) || math.IsNaN(st.Std) {
		return fmt.Errorf("augment: CTNormalize: bad statistics %+v", st)
	}
	lo, hi := float32(st.Lower), float32(st.Upper)
	mean := st.Mean
	inv := 1 / math.Max(st.Std, 1e-8)
	for i, v := range x {
		v = min(max(v, lo), hi)
		x[i] = float32(float64(float64(v)-mean) * inv)
	}
	return nil
}

// ComputeCTStats computes CTStats from foreground voxel samples pooled over
// the training cases (nnU-Net samples up to 10^7 / cases per case):
// population mean and std, and the 0.5 and 99.5 percentiles with linear
// interpolation (numpy's default). It sorts a copy of v.
func ComputeCTStats(v []float32) (CTStats, error) {
	if len(v) == 0 {
		return CTStats{}, errors.New("augment: ComputeCTStats: no voxels")
	}
	s := slices.Clone(v)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += float64(x)
	}
	mean := sum / float64(len(s))
	m2 := 0.0
	for _, x := range s {
		d := float64(x) - mean
		m2 += float64(d * d)
	}
	pct := func(q float64) float64 {
		pos := float64(q / 100 * float64(len(s)-1))
		i := int(math.Floor(pos))
		if i >= len(s)-1 {
			return float64(s[len(s)-1])
		}
		f := pos - float64(i)
		return float64(s[i]) + float64(f*(float64(s[i+1])-float64(s[i])))
	}
	return CTStats{Mean: mean, Std: math.Sqrt(m2 / float64(len(s))), Lower: pct(0.5), Upper: pct(99.5)}, nil
}
