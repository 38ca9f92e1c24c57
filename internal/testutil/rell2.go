package testutil

import "math"

// RelativeL2 is ‖got − want‖₂ / ‖want‖₂ (computed in float64): how the
// comparisons with PyTorch's outputs measure a whole tensor's error.
func RelativeL2(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}
