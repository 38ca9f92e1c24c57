package volume

import (
	"math"
	"strings"
	"testing"
)

// LPS negates the first two world rows of each axis and the origin, and
// refuses a zero axis or a non-finite origin.
func TestAffineLPS(t *testing.T) {
	a := Affine{{1, 2, 3, 10}, {4, 5, 6, -20}, {7, 8, 9, 30}, {0, 0, 0, 1}}
	axes, origin, err := a.LPS()
	if err != nil {
		t.Fatal(err)
	}
	if axes != [3][3]float64{{-1, -4, 7}, {-2, -5, 8}, {-3, -6, 9}} || origin != [3]float64{-10, 20, 30} {
		t.Errorf("axes %v origin %v", axes, origin)
	}
	flat := a
	flat[0][1], flat[1][1], flat[2][1] = 0, 0, 0
	if _, _, err := flat.LPS(); err == nil || !strings.Contains(err.Error(), "voxel axis 1") {
		t.Errorf("zero axis: %v", err)
	}
	far := a
	far[2][3] = math.Inf(1)
	if _, _, err := far.LPS(); err == nil || !strings.Contains(err.Error(), "origin") {
		t.Errorf("infinite origin: %v", err)
	}
}
