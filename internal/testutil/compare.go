package testutil

import (
	"math"
	"testing"
)

// CloseTo fails t when a value of got differs from want by more than tol,
// relative to |want| above 1 (absolute below), or is NaN; what names the
// values in the message.
func CloseTo(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*math.Max(1, math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: voxel %d = %v, formula %v", what, i, got[i], want[i])
		}
	}
}
