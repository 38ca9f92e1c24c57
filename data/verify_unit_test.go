package data

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nifti"
)

// TestVerifyUnits: an nnU-Net dataset's label in micrometres whose
// spacing and affine are its millimetre image's times 1000 is on the
// image's grid; one in micrometres with the image's numbers is not, and
// Verify names both files with their units.
func TestVerifyUnits(t *testing.T) {
	dir := demoDataset(t, 2)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	o := VerifyOptions{NumClasses: 3, Patch: [3]int{16, 16, 16}, Logger: discard()}
	lbl0 := filepath.Join(dir, "labelsTr", demoIDs[0]+".nii.gz")
	rewrite(t, lbl0, func(h *nifti.Header, v []float32) {
		h.XYZTUnits = nifti.UnitsMicron | nifti.UnitsSec
		for i := 1; i <= 3; i++ {
			h.Pixdim[i] *= 1000
		}
		h.QoffsetX, h.QoffsetY, h.QoffsetZ = 1000*h.QoffsetX, 1000*h.QoffsetY, 1000*h.QoffsetZ
		for r := range h.Srow {
			for c := range h.Srow[r] {
				h.Srow[r][c] *= 1000
			}
		}
	})
	if err := Verify(context.Background(), cfg, o); err != nil {
		t.Fatalf("a label in µm on its image's grid: %v", err)
	}
	lbl1 := filepath.Join(dir, "labelsTr", demoIDs[1]+".nii.gz")
	img1 := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	rewrite(t, lbl1, func(h *nifti.Header, v []float32) { h.XYZTUnits = nifti.UnitsMicron })
	err := Verify(context.Background(), cfg, o)
	if err == nil {
		t.Fatal("Verify passed a label in µm with its mm image's numbers")
	}
	for _, want := range []string{lbl1 + ": voxel spacing [1 1 1] micrometer differs from its image's [1 1 1] millimeter (" + img1, "has 1 problems"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}
