// Package metrics computes segmentation quality per case and class: Dice and
// the 95th-percentile Hausdorff distance (HD95), the two numbers nnU-Net and
// MONAI report. Label volumes are flat slices in NIfTI order (x fastest) with
// a (D, H, W) shape and a physical voxel spacing per axis.
package metrics

import (
	"fmt"
	"math"
	"sort"

	"github.com/voxtrain/voxtrain/internal/npsum"
)

// Shape is the (D, H, W) size of a volume; W varies fastest.
type Shape [3]int

// Len is the number of voxels.
func (s Shape) Len() int { return s[0] * s[1] * s[2] }

// Confusion holds voxel counts for one class: true positives, false
// positives and false negatives.
type Confusion struct {
	TP, FP, FN int64
}

// Dice returns 2·TP / (2·TP + FP + FN), or NaN when the class is absent from
// both prediction and reference (nnU-Net's convention: such cases are left
// out of the mean rather than counted as 0 or 1).
func (c Confusion) Dice() float64 {
	den := 2*c.TP + c.FP + c.FN
	if den == 0 {
		return math.NaN()
	}
	return float64(2*c.TP) / float64(den)
}

// Confusions counts TP/FP/FN for classes 1..numClasses-1 (index 0 of the
// result is background and left zero) between integer label maps pred and
// ref of equal length.
func Confusions(pred, ref []uint8, numClasses int) ([]Confusion, error) {
	if len(pred) != len(ref) {
		return nil, fmt.Errorf("metrics: prediction has %d voxels, reference %d", len(pred), len(ref))
	}
	// Count (pred, ref) pairs once, then read every class off the table.
	table := make([]int64, numClasses*numClasses)
	for i, p := range pred {
		r := ref[i]
		if int(p) >= numClasses || int(r) >= numClasses {
			return nil, fmt.Errorf("metrics: voxel %d has label %d/%d, outside 0..%d", i, p, r, numClasses-1)
		}
		table[int(p)*numClasses+int(r)]++
	}
	out := make([]Confusion, numClasses)
	for c := 1; c < numClasses; c++ {
		for k := 0; k < numClasses; k++ {
			if k == c {
				continue
			}
			out[c].FP += table[c*numClasses+k]
			out[c].FN += table[k*numClasses+c]
		}
		out[c].TP = table[c*numClasses+c]
	}
	return out, nil
}

// NanMean is the mean of the non-NaN values, NaN when there are none:
// np.nanmean bit for bit (NumPy's pairwise sum, package npsum), as
// nnU-Net's mean_fg_dice is np.nanmean of the per-class pseudo Dice.
func NanMean(v []float64) float64 {
	return npsum.NanMean(v)
}

// HD95 returns the 95th-percentile symmetric Hausdorff distance between the
// surfaces of binary masks a and b, in the units of spacing (D, H, W order):
// the larger of the two directed 95th percentiles of surface-to-surface
// distances, as MONAI's compute_hausdorff_distance(percentile=95) does. A
// surface voxel is a mask voxel with a face neighbour outside the mask (or on
// the volume border). It returns NaN when both masks are empty and +Inf when
// exactly one is.
func HD95(a, b []bool, shape Shape, spacing [3]float64) (float64, error) {
	if len(a) != shape.Len() || len(b) != shape.Len() {
		return 0, fmt.Errorf("metrics: masks of %d and %d voxels for shape %v", len(a), len(b), shape)
	}
	sa, sb := surface(a, shape), surface(b, shape)
	na, nb := count(sa), count(sb)
	switch {
	case na == 0 && nb == 0:
		return math.NaN(), nil
	case na == 0 || nb == 0:
		return math.Inf(1), nil
	}
	da := EDT(sb, shape, spacing) // distance to b's surface
	db := EDT(sa, shape, spacing)
	dab := make([]float64, 0, na)
	dba := make([]float64, 0, nb)
	for i := range sa {
		if sa[i] {
			dab = append(dab, da[i])
		}
		if sb[i] {
			dba = append(dba, db[i])
		}
	}
	return math.Max(Percentile(dab, 95), Percentile(dba, 95)), nil
}

func count(m []bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// surface marks mask voxels that have a face neighbour outside the mask or
// lie on the volume border (mask XOR its erosion by the 6-neighbourhood).
func surface(m []bool, s Shape) []bool {
	out := make([]bool, len(m))
	D, H, W := s[0], s[1], s[2]
	for d := 0; d < D; d++ {
		for h := 0; h < H; h++ {
			for w := 0; w < W; w++ {
				i := (d*H+h)*W + w
				if !m[i] {
					continue
				}
				edge := d == 0 || d == D-1 || h == 0 || h == H-1 || w == 0 || w == W-1 ||
					!m[i-H*W] || !m[i+H*W] || !m[i-W] || !m[i+W] || !m[i-1] || !m[i+1]
				out[i] = edge
			}
		}
	}
	return out
}

// Percentile is numpy's default (linear interpolation between the order
// statistics at rank (n−1)·p/100). It sorts v in place.
func Percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	pos := float64(len(v)-1) * p / 100
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(v)-1)
	f := pos - float64(lo)
	return v[lo] + (v[hi]-v[lo])*f
}

// EDT returns, for every voxel, the Euclidean distance (with the given
// spacing per axis) to the nearest voxel where feature is true; +Inf
// everywhere when there is none. It is the exact separable algorithm of
// Felzenszwalb & Huttenlocher (2012), applied along W, H then D.
func EDT(feature []bool, s Shape, spacing [3]float64) []float64 {
	n := s.Len()
	f := make([]float64, n)
	for i, v := range feature {
		if v {
			f[i] = 0
		} else {
			f[i] = math.Inf(1)
		}
	}
	D, H, W := s[0], s[1], s[2]
	maxLen := max(D, H, W)
	line := make([]float64, maxLen)
	out := make([]float64, maxLen)
	v := make([]int, maxLen)
	z := make([]float64, maxLen+1)
	pass := func(length, stride int, starts func(yield func(int)), sp float64) {
		starts(func(base int) {
			for k := 0; k < length; k++ {
				line[k] = f[base+k*stride]
			}
			dt1d(line[:length], out[:length], v, z, sp*sp)
			for k := 0; k < length; k++ {
				f[base+k*stride] = out[k]
			}
		})
	}
	pass(W, 1, func(y func(int)) {
		for d := 0; d < D; d++ {
			for h := 0; h < H; h++ {
				y((d*H + h) * W)
			}
		}
	}, spacing[2])
	pass(H, W, func(y func(int)) {
		for d := 0; d < D; d++ {
			for w := 0; w < W; w++ {
				y(d*H*W + w)
			}
		}
	}, spacing[1])
	pass(D, H*W, func(y func(int)) {
		for h := 0; h < H; h++ {
			for w := 0; w < W; w++ {
				y(h*W + w)
			}
		}
	}, spacing[0])
	for i := range f {
		f[i] = math.Sqrt(f[i])
	}
	return f
}

// dt1d is the 1-D squared distance transform of sampled function f with
// squared sample spacing w2: out[q] = min_p f[p] + w2·(q−p)², using the lower
// envelope of parabolas. v and z are scratch of length ≥ len(f) and len(f)+1.
func dt1d(f, out []float64, v []int, z []float64, w2 float64) {
	n := len(f)
	k := -1
	for q := 0; q < n; q++ {
		if math.IsInf(f[q], 1) {
			continue
		}
		for k >= 0 {
			p := v[k]
			s := ((f[q] + w2*float64(q*q)) - (f[p] + w2*float64(p*p))) / (2 * w2 * float64(q-p))
			if s <= z[k] {
				k--
				continue
			}
			k++
			v[k] = q
			z[k] = s
			z[k+1] = math.Inf(1)
			break
		}
		if k < 0 {
			k = 0
			v[0] = q
			z[0] = math.Inf(-1)
			z[1] = math.Inf(1)
		}
	}
	if k < 0 {
		for q := range out {
			out[q] = math.Inf(1)
		}
		return
	}
	j := 0
	for q := 0; q < n; q++ {
		for z[j+1] < float64(q) {
			j++
		}
		p := v[j]
		d := float64(q - p)
		out[q] = f[p] + w2*d*d
	}
}
