package data

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/preprocess"
)

// keepAxisDataset is a demo subset whose cases have the given slice
// spacings (the files' z: voxtrain's D).
func keepAxisDataset(t *testing.T, ids []string, dz []float64) string {
	t.Helper()
	dir := testutil.DemoSubset(t, ids)
	for i, id := range ids {
		for _, sub := range []string{"imagesTr", "labelsTr"} {
			path := filepath.Join(dir, sub, id+".nii.gz")
			h, v, err := nifti.ReadFloat32(path)
			if err != nil {
				t.Fatal(err)
			}
			h.Pixdim[3] = dz[i]
			h.Srow[2][2] = dz[i] * sign(h.Srow[2][2])
			h.Datatype, h.SclSlope, h.SclInter = nifti.Float32, 1, 0
			if err := nifti.WriteFloat32(path, h, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}

// TestTargetSpacingKeepsAxis: a target_spacing axis of 0 keeps each
// case's own spacing along it (nnU-Net's 2d: cases are resampled in-plane
// only), so cases of different slice spacings keep their slices and
// spacings while the other axes go to the target, on every source alike.
func TestTargetSpacingKeepsAxis(t *testing.T) {
	ids := demoIDs[:3]
	dz := []float64{1, 2.5, 3.2}
	dir := keepAxisDataset(t, ids, dz)
	for _, order := range []string{"linear", "nnunet"} {
		base := filled(config.Data{Dataset: dir, Fold: -1, TargetSpacing: []float64{0, 0.7, 1.3}, ResampleOrder: order})
		spec := preprocess.SpecOf(base)
		for i, id := range ids {
			c := Case{ID: id, Images: []string{filepath.Join(dir, "imagesTr", id+".nii.gz")}, Label: filepath.Join(dir, "labelsTr", id+".nii.gz")}
			v, _, err := readCase(c, 1, &spec, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			src := v.SourceShape
			want := preprocess.ResampledShape(src, [3]float64{dz[i], 1, 1}, [3]float64{dz[i], 0.7, 1.3})
			if v.Shape != want || v.Shape[0] != src[0] || v.Shape[1] == src[1] {
				t.Errorf("%s (%s): shape %v from %v, want %v (slices kept, in-plane resampled)", id, order, v.Shape, src, want)
			}
			if d := v.Spacing[0]; d != float64(float32(dz[i])) { // NIfTI's pixdim is float32
				t.Errorf("%s (%s): slice spacing %g, want the case's %g", id, order, d, dz[i])
			}
		}
		opt := Options{Seed: 5, Iterations: 2, Patch: [3]int{1, 40, 24}, Batch: 2, Augment: nnunetAug(t)}
		if _, err := Prepare(context.Background(), base, PrepareOptions{Logger: discard()}); err != nil {
			t.Fatalf("%s: prepare: %+v", order, err)
		}
		sameBatchesEverywhere(t, base, opt, []string{"store", "cache", "gz"}, []int{1, 2}, 2, 4, nil)
	}
}
