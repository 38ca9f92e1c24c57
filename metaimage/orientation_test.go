package metaimage

import "testing"

// TestAnatomicalOrientation: for every direction in
// testdata/written/expected.json (signed permutations, random rotations,
// 45° rotations with equal cosines), the AnatomicalOrientation we derive
// is the one ITK's MetaImage writer wrote (read_written.py).
func TestAnatomicalOrientation(t *testing.T) {
	cases := loadWritten(t).Orientations
	if len(cases) < 48 {
		t.Fatalf("expected.json lists %d orientations, want at least the 48 signed permutations", len(cases))
	}
	for _, c := range cases {
		// GetDirection is row-major with a voxel axis per column.
		var dir [3][3]float64
		for r := range 3 {
			for k := range 3 {
				dir[k][r] = c.Direction[3*r+k]
			}
		}
		if got := anatomicalOrientation(dir); got != c.Orientation {
			t.Errorf("direction %v: %s, ITK writes %s", c.Direction, got, c.Orientation)
		}
	}
}
