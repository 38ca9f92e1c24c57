package plan

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nifti"
)

// TestBadInputNamesTheProblem: what cannot be planned is an error that
// says why, never a panic.
func TestBadInputNamesTheProblem(t *testing.T) {
	ok := Dataset{Name: "x", ChannelNames: []string{"MRI"}, NumClasses: 2, NumTraining: 1}
	fp := &Fingerprint{Spacings: [][3]float64{{1, 1, 1}}, ShapesAfterCrop: [][3]int{{32, 32, 32}}}
	for _, tc := range []struct {
		name string
		fp   *Fingerprint
		ds   Dataset
		gb   float64
		want string
	}{
		{"empty", &Fingerprint{}, ok, 8, "0 spacings and 0 shapes"},
		{"zero spacing", &Fingerprint{Spacings: [][3]float64{{1, 0, 1}}, ShapesAfterCrop: [][3]int{{4, 4, 4}}}, ok, 8, "spacing [1 0 1]"},
		{"empty crop", &Fingerprint{Spacings: [][3]float64{{1, 1, 1}}, ShapesAfterCrop: [][3]int{{4, 0, 4}}}, ok, 8, "shape after crop"},
		{"no classes", fp, Dataset{Name: "x", ChannelNames: []string{"MRI"}, NumTraining: 1}, 8, "0 classes"},
		{"no memory", fp, ok, 0, "GPU memory target 0"},
	} {
		if _, err := Make(tc.fp, tc.ds, tc.gb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Make(fp, ok, 8); err != nil {
		t.Errorf("a plain 32³ dataset: %v", err)
	}

	unlabelled := &data.Dataset{Root: "/d", Cases: []data.Case{{ID: "a", Images: []string{"/d/a.nii.gz"}}}}
	if _, err := Extract(context.Background(), unlabelled, 0, 1); err == nil || !strings.Contains(err.Error(), "case a (/d/a.nii.gz) has no label map") {
		t.Errorf("unlabelled case: %v", err)
	}
	missing := &data.Dataset{Root: "/d", Cases: []data.Case{{ID: "a", Images: []string{"/nonexistent/a.nii.gz"}, Label: "/nonexistent/a_seg.nii.gz"}}}
	if _, err := Extract(context.Background(), missing, 0, 1); err == nil || !strings.Contains(err.Error(), "/nonexistent/a.nii.gz") {
		t.Errorf("missing file: %v", err)
	}
}

// TestNonzeroBox: the crop is the box of voxels nonzero in any channel;
// an all-zero image keeps its extent.
func TestNonzeroBox(t *testing.T) {
	shape := [3]int{3, 4, 5}
	a, b := make([]float32, 60), make([]float32, 60)
	a[(1*4+2)*5+3] = 1  // (1, 2, 3) in channel 0
	b[(2*4+0)*5+1] = -2 // (2, 0, 1) in channel 1
	lo, hi := nonzeroBox([][]float32{a, b}, shape)
	if lo != [3]int{1, 0, 1} || hi != [3]int{3, 3, 4} {
		t.Errorf("box %v..%v, want [1 0 1]..[3 3 4]", lo, hi)
	}
	lo, hi = nonzeroBox([][]float32{make([]float32, 60)}, shape)
	if lo != [3]int{} || hi != shape {
		t.Errorf("all-zero image: box %v..%v, want the whole %v", lo, hi, shape)
	}
}

// TestFingerprintRefusesMixedUnits: cases whose files state different
// spatial units (one in millimetres, one in micrometres) are refused,
// naming both, rather than planned from spacings in two units; a case
// that states no unit goes with the others.
func TestFingerprintRefusesMixedUnits(t *testing.T) {
	dir := t.TempDir()
	write := func(id string, units uint8) data.Case {
		img := make([]float32, 4*4*4)
		lab := make([]float32, 4*4*4)
		for i := range img {
			img[i] = float32(i%5 + 1)
		}
		lab[21] = 1
		c := data.Case{ID: id, Images: []string{filepath.Join(dir, id+"_0000.nii.gz")}, Label: filepath.Join(dir, id+".nii.gz")}
		for _, f := range []struct {
			path string
			v    []float32
		}{{c.Images[0], img}, {c.Label, lab}} {
			h, err := nifti.NewHeader([]int{4, 4, 4}, nifti.Float32)
			if err != nil {
				t.Fatal(err)
			}
			h.XYZTUnits = units
			if err := nifti.WriteFloat32(f.path, h, f.v); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	mm, um, none := write("mm", nifti.UnitsMM), write("um", nifti.UnitsMicron), write("none", 0)
	if _, err := Extract(context.Background(), &data.Dataset{Root: dir, Cases: []data.Case{mm, none, mm}}, 0, 1); err != nil {
		t.Errorf("one unit and a case stating none: %v", err)
	}
	_, err := Extract(context.Background(), &data.Dataset{Root: dir, Cases: []data.Case{mm, none, um}}, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "case um ("+um.Images[0]+") is in micrometer, case mm") || !strings.Contains(err.Error(), "millimeter") {
		t.Errorf("millimetres and micrometres: err = %v", err)
	}
}
