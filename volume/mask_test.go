package volume

import (
	"strings"
	"testing"
)

// labelRamp is a label map whose voxel i holds i mod 5, and a mask whose
// voxel is 0 where x < half (as a float, to test "any non-zero keeps").
type labelRamp struct {
	rampFile
	mod  int
	half int // > 0: a mask, 0 below x = half and 0.5 from there
}

func (r *labelRamp) value(z, y, x int) float32 {
	if r.half > 0 {
		if x < r.half {
			return 0
		}
		return 0.5
	}
	return float32(((z*r.shape[1]+y)*r.shape[2] + x) % r.mod)
}

func (r *labelRamp) ReadRegion(b Box, dst [][]float32) error {
	i := 0
	for z := b.Lo[0]; z < b.Hi[0]; z++ {
		for y := b.Lo[1]; y < b.Hi[1]; y++ {
			for x := b.Lo[2]; x < b.Hi[2]; x++ {
				dst[0][i] = r.value(z, y, x)
				i++
			}
		}
	}
	return nil
}

func (r *labelRamp) ReadLabels(b Box, dst []uint8) error {
	buf := make([]float32, len(dst))
	r.ReadRegion(b, [][]float32{buf})
	for i, v := range buf {
		dst[i] = uint8(v)
	}
	return nil
}

func TestMasked(t *testing.T) {
	shape := [3]int{3, 4, 6}
	label := &labelRamp{rampFile: rampFile{shape: shape}, mod: 5}
	mask := &labelRamp{rampFile: rampFile{shape: shape}, half: 3}
	f, err := Masked(label, mask, 9)
	if err != nil {
		t.Fatal(err)
	}
	box := Box{Lo: [3]int{1, 1, 1}, Hi: [3]int{3, 4, 6}}
	lbl := make([]uint8, box.Voxels())
	reg := [][]float32{make([]float32, box.Voxels())}
	if err := f.ReadLabels(box, lbl); err != nil {
		t.Fatal(err)
	}
	if err := f.ReadRegion(box, reg); err != nil {
		t.Fatal(err)
	}
	i, masked := 0, 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				want := uint8(label.value(z, y, x))
				if x < 3 {
					want = 9
					masked++
				}
				if lbl[i] != want || reg[0][i] != float32(want) {
					t.Fatalf("voxel (%d %d %d): labels %d, region %g, want %d", z, y, x, lbl[i], reg[0][i], want)
				}
				i++
			}
		}
	}
	if masked == 0 || masked == len(lbl) {
		t.Fatalf("%d of %d voxels masked: the test box should hold both", masked, len(lbl))
	}
	// A mask of another shape is refused.
	if _, err := Masked(label, &labelRamp{rampFile: rampFile{shape: [3]int{3, 4, 5}}, half: 1}, 9); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("mask of another shape: %v", err)
	}
}

func TestMaskedPath(t *testing.T) {
	for _, tc := range []struct {
		label, mask string
		value       uint8
	}{
		{"crops/c1.zarr", "masks/m1.nii.gz", 255},
		{"raw.zarr#window=0:4,0:4,0:4", "https://host/m.zarr?a=1&b=2", 3},
	} {
		p := MaskedPath(tc.label, tc.mask, tc.value)
		l, m, v, ok, err := SplitMask(p)
		if err != nil || !ok || l != tc.label || m != tc.mask || v != tc.value {
			t.Errorf("%s: split %q %q %d %v %v", p, l, m, v, ok, err)
		}
		if FilePath(p) != FilePath(tc.label) {
			t.Errorf("FilePath(%s) = %s, want the label's file", p, FilePath(p))
		}
	}
	if l, _, _, ok, err := SplitMask("a/b.zarr"); ok || err != nil || l != "a/b.zarr" {
		t.Errorf("a plain path: %q %v %v", l, ok, err)
	}
	for _, bad := range []string{"l.zarr#mask=m.zarr", "l.zarr#mask=m.zarr&ignore=300", "l.zarr#mask=&ignore=3"} {
		if _, _, _, _, err := SplitMask(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v, want an error naming it", bad, err)
		}
	}
}
