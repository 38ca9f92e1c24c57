package nifti

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// WriteLabels (volume.WriteLabels for NIfTI names) keeps a geometry read
// from any format: shape, an oblique affine with its origin, and the
// unit NIfTI can state; a .hdr name writes the pair.
func TestWriteLabelsKeepsGeometry(t *testing.T) {
	c, s := math.Cos(0.3), math.Sin(0.3)
	g := volume.Header{Shape: [3]int{2, 3, 4}, Channels: 3, Spacing: [3]float64{2.5, 1, 0.5}, Unit: "micrometer",
		Affine: volume.Affine{{0.5 * c, -s, 0, 10}, {0.5 * s, c, 0, -20}, {0, 0, 2.5, 30}, {0, 0, 0, 1}}}
	labels := make([]uint8, 24)
	for i := range labels {
		labels[i] = uint8(i % 4)
	}
	dir := t.TempDir()
	for _, name := range []string{"l.nii.gz", "l.nii", "l.hdr"} {
		path := filepath.Join(dir, name)
		if err := volume.WriteLabels(path, g, labels); err != nil {
			t.Fatal(err)
		}
		f, err := volume.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := f.Header()
		dst := make([]uint8, 24)
		err = f.ReadLabels(volume.Whole(got.Shape), dst)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.Shape != g.Shape || got.Channels != 1 || got.Unit != g.Unit || !slices.Equal(dst, labels) {
			t.Errorf("%s: %+v, labels %v", name, got, dst)
		}
		for i := range 3 {
			for j := range 4 {
				if math.Abs(got.Affine[i][j]-g.Affine[i][j]) > 1e-5 {
					t.Errorf("%s: affine %v, want %v", name, got.Affine, g.Affine)
				}
			}
		}
	}
	if got := volume.WrittenFiles(filepath.Join(dir, "l.hdr")); !slices.Equal(got, []string{filepath.Join(dir, "l.hdr"), filepath.Join(dir, "l.img")}) {
		t.Errorf("WrittenFiles(l.hdr) = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "l.img")); err != nil {
		t.Error(err)
	}
	if e := volume.FileEnding("case_1.nii.gz"); e != ".nii.gz" {
		t.Errorf("FileEnding = %q", e)
	}
}
