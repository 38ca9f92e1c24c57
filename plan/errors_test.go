package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
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
