package preprocess

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
	mean, std, err = MeanStd(x, mask)
	if err != nil {
		return 0, 0, err
	}
	if mask == nil {
		// The same arithmetic as CTNormalize with an unbounded window, so a
		// caller may normalise any part of x later with CTNormalize and get
		// these bytes.
		return mean, std, CTNormalize(x, CTStats{Mean: mean, Std: std, Lower: math.Inf(-1), Upper: math.Inf(1)})
	}
	inv := 1 / math.Max(std, 1e-8)
	for i, v := range x {
		if mask[i] != 0 {
			x[i] = float32(float64(float64(v)-mean) * inv)
		}
	}
	return mean, std, nil
}

// statLanes is how many independent partial sums MeanStd keeps. One
// float64 accumulator makes the loop wait on the adder's latency every
// voxel; eight keep it busy (about 4× faster on a 5-million-voxel MRI).
const statLanes = 8

// MeanStd returns the mean and population standard deviation of x (of the
// voxels where mask is non-zero, with a mask of the same length), two
// passes in float64, as ZScore uses them. The partial sums are combined in
// a fixed order, so the result depends only on x and mask.
func MeanStd(x []float32, mask []uint8) (mean, std float64, err error) {
	if mask != nil && len(mask) != len(x) {
		return 0, 0, fmt.Errorf("preprocess: ZScore: mask has %d voxels, image %d", len(mask), len(x))
	}
	var sum, m2 [statLanes]float64
	n := 0
	if mask == nil {
		n = len(x)
		full := len(x) - len(x)%statLanes
		// Eight named accumulators, so they live in registers (the
		// compiler keeps an indexed array on the stack).
		var s0, s1, s2, s3, s4, s5, s6, s7 float64
		for i := 0; i < full; i += statLanes {
			v := x[i : i+statLanes : i+statLanes]
			s0 += float64(v[0])
			s1 += float64(v[1])
			s2 += float64(v[2])
			s3 += float64(v[3])
			s4 += float64(v[4])
			s5 += float64(v[5])
			s6 += float64(v[6])
			s7 += float64(v[7])
		}
		sum = [statLanes]float64{s0, s1, s2, s3, s4, s5, s6, s7}
		for i := full; i < len(x); i++ {
			sum[i%statLanes] += float64(x[i])
		}
	} else {
		for i, v := range x {
			if mask[i] != 0 {
				sum[i%statLanes] += float64(v)
				n++
			}
		}
	}
	if n == 0 {
		return 0, 0, errors.New("preprocess: ZScore: no voxel to normalise (empty image or mask)")
	}
	mean = combineLanes(&sum) / float64(n)
	if mask == nil {
		full := len(x) - len(x)%statLanes
		var s0, s1, s2, s3, s4, s5, s6, s7 float64
		// sq rounds d·d before the add: no FMA on any GOARCH.
		sq := func(v float32) float64 { d := float64(v) - mean; return float64(d * d) }
		for i := 0; i < full; i += statLanes {
			v := x[i : i+statLanes : i+statLanes]
			s0 += sq(v[0])
			s1 += sq(v[1])
			s2 += sq(v[2])
			s3 += sq(v[3])
			s4 += sq(v[4])
			s5 += sq(v[5])
			s6 += sq(v[6])
			s7 += sq(v[7])
		}
		m2 = [statLanes]float64{s0, s1, s2, s3, s4, s5, s6, s7}
		for i := full; i < len(x); i++ {
			d := float64(x[i]) - mean
			m2[i%statLanes] += float64(d * d) // rounded before the add: no FMA on any GOARCH
		}
	} else {
		for i, v := range x {
			if mask[i] != 0 {
				d := float64(v) - mean
				m2[i%statLanes] += float64(d * d) // rounded before the add: no FMA on any GOARCH
			}
		}
	}
	return mean, math.Sqrt(combineLanes(&m2) / float64(n)), nil
}

// combineLanes adds the partial sums pairwise, always in the same order.
func combineLanes(s *[statLanes]float64) float64 {
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
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
		return fmt.Errorf("preprocess: CTNormalize: bad statistics %+v", st)
	}
	lo, hi := float32(st.Lower), float32(st.Upper)
	mean := st.Mean
	inv := 1 / math.Max(st.Std, 1e-8)
	if math.IsInf(st.Lower, -1) && math.IsInf(st.Upper, 1) {
		// A z-score: clipping to (-Inf, +Inf) changes no value (NaN
		// included), and skipping Go's NaN-aware min/max makes this loop
		// about twice as fast.
		for i, v := range x {
			x[i] = float32(float64(float64(v)-mean) * inv)
		}
		return nil
	}
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
		return CTStats{}, errors.New("preprocess: ComputeCTStats: no voxels")
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
