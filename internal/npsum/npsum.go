// Package npsum sums and averages float64 vectors exactly as NumPy does,
// bit for bit: np.sum, np.mean and np.nanmean of a contiguous 1-D float64
// array. NumPy adds pairwise (numpy/_core/src/umath/loops_utils.h.src,
// pairwise_sum), not one value after another, so from 8 values on its
// sums differ from a running sum in the last bits; nnU-Net's summary.json
// means are such sums, and matching its files byte for byte needs the same
// order of additions. A fixture made with NumPy (testdata/make_fixtures.py)
// pins every result.
package npsum

import "math"

// blockSize is NumPy's PW_BLOCKSIZE: up to this many values are summed
// in one block of eight accumulators, more are split in two.
const blockSize = 128

// Sum is np.sum(x): +0.0 (the add reduction's initial value, from the
// ufunc's identity) plus the pairwise sum of x.
func Sum(x []float64) float64 {
	return 0.0 + pairwise(x)
}

// pairwise is NumPy's pairwise_sum for doubles: fewer than 8 values added
// in order; up to blockSize values in eight interleaved accumulators
// combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), the values past the
// last multiple of 8 then added one by one; more split at half the length
// rounded down to a multiple of 8, each half summed so.
func pairwise(x []float64) float64 {
	n := len(x)
	switch {
	case n < 8:
		// NumPy starts this loop from 0. (+0.0), which Sum's initial
		// value would add anyway; -0.0 sums alike to +0.0 either way.
		res := 0.0
		for _, v := range x {
			res += v
		}
		return res
	case n <= blockSize:
		var r [8]float64
		copy(r[:], x[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			r[0] += x[i]
			r[1] += x[i+1]
			r[2] += x[i+2]
			r[3] += x[i+3]
			r[4] += x[i+4]
			r[5] += x[i+5]
			r[6] += x[i+6]
			r[7] += x[i+7]
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += x[i]
		}
		return res
	default:
		n2 := n / 2
		n2 -= n2 % 8
		return pairwise(x[:n2]) + pairwise(x[n2:])
	}
}

// Mean is np.mean(x): Sum(x) divided by the number of values (NaN for an
// empty x, where NumPy warns and returns nan; NaN when any value is).
func Mean(x []float64) float64 {
	return Sum(x) / float64(len(x))
}

// NanMean is np.nanmean(x): the NaN values replaced by 0 in place, the
// whole vector summed as Sum does (the zeros keep every other value's
// place in the pairwise order), divided by the number of values that are
// not NaN; NaN when there are none.
func NanMean(x []float64) float64 {
	return NanMeanFunc(x, math.IsNaN)
}

// NanMeanFunc is NanMean leaving out the values skip reports instead of
// the NaN ones (skip must report NaN too, or the sum is NaN): each one
// counts as a 0 in its place and not in the divisor.
func NanMeanFunc(x []float64, skip func(float64) bool) float64 {
	y := make([]float64, len(x))
	k := 0
	for i, v := range x {
		if !skip(v) {
			y[i] = v
			k++
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return Sum(y) / float64(k)
}
