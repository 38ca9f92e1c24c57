package volume

import (
	"strings"
	"testing"
)

// TestPacked packs three overlapping binary classes (voxel i mod 2, mod 3
// and x ≥ 3, on bits 0, 2 and 5) and checks every voxel's byte.
func TestPacked(t *testing.T) {
	shape := [3]int{3, 4, 6}
	two := &labelRamp{rampFile: rampFile{shape: shape}, mod: 2}
	three := &labelRamp{rampFile: rampFile{shape: shape}, mod: 3}
	half := &labelRamp{rampFile: rampFile{shape: shape}, half: 3} // 0.5 where x ≥ 3
	f, err := Packed(map[int]File{0: two, 2: three, 5: half}, map[int]string{0: "a", 2: "b", 5: "c"})
	if err != nil {
		t.Fatal(err)
	}
	box := Box{Lo: [3]int{1, 0, 1}, Hi: [3]int{3, 4, 6}}
	lbl := make([]uint8, box.Voxels())
	for i := range lbl {
		lbl[i] = 77 // ReadLabels must overwrite, not OR into, dst
	}
	if err := f.ReadLabels(box, lbl); err != nil {
		t.Fatal(err)
	}
	i, overlaps := 0, 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				var want uint8
				if two.value(z, y, x) != 0 {
					want |= 1
				}
				if three.value(z, y, x) != 0 {
					want |= 4
				}
				if x >= 3 {
					want |= 32
				}
				if want&(want-1) != 0 {
					overlaps++
				}
				if lbl[i] != want {
					t.Fatalf("voxel (%d %d %d): %08b, want %08b", z, y, x, lbl[i], want)
				}
				i++
			}
		}
	}
	if overlaps == 0 {
		t.Fatal("no voxel in two classes: the test checks nothing about overlaps")
	}
}

func TestPackedRefusesOtherShapes(t *testing.T) {
	a := &labelRamp{rampFile: rampFile{shape: [3]int{3, 4, 6}}, mod: 2}
	b := &labelRamp{rampFile: rampFile{shape: [3]int{3, 4, 5}}, mod: 2}
	_, err := Packed(map[int]File{0: a, 1: b}, map[int]string{0: "mito.zarr", 1: "er.zarr"})
	if err == nil || !strings.Contains(err.Error(), "er.zarr") || !strings.Contains(err.Error(), "mito.zarr") {
		t.Fatalf("err = %v, want one naming er.zarr's shape against mito.zarr's", err)
	}
}

func TestPackedPathRoundTrip(t *testing.T) {
	files := map[int]string{2: "crops/er.zarr/s0", 0: "crops/mito.zarr", 6: "x.nii.gz"}
	p := PackedPath(files)
	got, ok, err := SplitPacked(p)
	if err != nil || !ok {
		t.Fatalf("SplitPacked(%q): ok %v, %v", p, ok, err)
	}
	if len(got) != 3 || got[0] != files[0] || got[2] != files[2] || got[6] != files[6] {
		t.Fatalf("SplitPacked(%q) = %v, want %v", p, got, files)
	}
	if fp := FilePath(MaskedPath(p, "m.zarr", 255)); fp != "crops/mito.zarr" {
		t.Fatalf("FilePath = %q, want the first class's file", fp)
	}
	for _, bad := range []string{"a#bits=7", "a#bits=0#bit=0:b", "a#bits=0#bit=1", "a#bits=x"} {
		if _, _, err := SplitPacked(bad); err == nil {
			t.Errorf("SplitPacked(%q): no error", bad)
		}
	}
}

func TestLookedUp(t *testing.T) {
	shape := [3]int{2, 3, 5}
	label := &labelRamp{rampFile: rampFile{shape: shape}, mod: 5}
	// nnU-Net's BraTS regions: whole tumour {1,2,3}, core {2,3},
	// enhancing {3}; label 4 is the ignore label.
	var lut [256]uint8
	lut[1], lut[2], lut[3], lut[4] = 1, 3, 7, IgnoreByte
	p := LUTPath("seg.nii.gz", lut)
	base, got, ok, err := SplitLUT(p)
	if err != nil || !ok || base != "seg.nii.gz" || got != lut {
		t.Fatalf("SplitLUT(%q) = %q %v %v %v", p, base, got[:6], ok, err)
	}
	f, err := LookedUp(label, lut)
	if err != nil {
		t.Fatal(err)
	}
	box := Whole(shape)
	lbl := make([]uint8, box.Voxels())
	if err := f.ReadLabels(box, lbl); err != nil {
		t.Fatal(err)
	}
	for i, v := range lbl {
		if want := lut[i%5]; v != want {
			t.Fatalf("voxel %d (label %d): %d, want %d", i, i%5, v, want)
		}
	}
	if _, _, _, err := SplitLUT("a#lut=1:256"); err == nil {
		t.Error("SplitLUT accepted a byte of 256")
	}
}
