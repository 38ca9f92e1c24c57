package data

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nifti"
)

// rewrite reads a NIfTI file as float32, lets edit change its header and
// voxels, and writes it back in place (as float32).
func rewrite(t *testing.T, path string, edit func(h *nifti.Header, v []float32)) {
	t.Helper()
	h, v, err := nifti.ReadFloat32(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(h, v)
	h.Datatype = nifti.Float32
	if err := nifti.WriteFloat32(path, h, v); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyNamesEveryProblem: before the first step, Verify lists a
// label value beyond model.num_classes (file, value, key), NaN/Inf voxels
// (file, count), a label on another grid than its image (file, both
// spacings), each naming its file, in one error; a clean dataset passes
// with warnings for cases smaller than the patch.
func TestVerifyNamesEveryProblem(t *testing.T) {
	dir := demoDataset(t, 4)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2)})
	log, lb := testLogger()
	o := VerifyOptions{NumClasses: 3, Patch: [3]int{64, 64, 64}, Logger: log}
	if err := Verify(context.Background(), cfg, o); err != nil {
		t.Fatalf("the demo data: %v", err)
	}
	if !strings.Contains(lb.String(), "is smaller than the patch [64 64 64]: its patches are padded along") {
		t.Errorf("no warning about padding:\n%s", lb.String())
	}

	lbl0 := filepath.Join(dir, "labelsTr", demoIDs[0]+".nii.gz")
	rewrite(t, lbl0, func(h *nifti.Header, v []float32) { v[10], v[20] = 5, 5 })
	img1 := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	rewrite(t, img1, func(h *nifti.Header, v []float32) {
		for i := 0; i < 7; i++ {
			v[100+i] = float32(math.NaN())
		}
		v[200] = float32(math.Inf(1))
	})
	lbl2 := filepath.Join(dir, "labelsTr", demoIDs[2]+".nii.gz")
	rewrite(t, lbl2, func(h *nifti.Header, v []float32) { h.Pixdim[1] *= 1.5 })

	err := Verify(context.Background(), cfg, o)
	if err == nil {
		t.Fatal("Verify passed a dataset with three bad cases")
	}
	msg := err.Error()
	for _, want := range []string{
		lbl0 + ": label value 5 in 2 voxels, outside 0..2 (model.num_classes: 3)",
		img1 + ": 8 NaN or infinite voxels",
		lbl2 + ": voxel spacing",
		"has 3 problems",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}
}

// TestVerifyEmptyTrainingFold: a fold with no training case is an error
// naming the fold and the splits file.
func TestVerifyEmptyTrainingFold(t *testing.T) {
	dir := demoDataset(t, 4)
	splits := filepath.Join(t.TempDir(), "splits.json")
	all := append([]string(nil), demoIDs[:4]...)
	b, _ := json.Marshal([]foldSplit{{Train: nil, Val: all}, {Train: all[:2], Val: all[2:]}})
	if err := os.WriteFile(splits, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Dataset: dir, Fold: 0, NumFolds: 2, SplitsFile: splits, Workers: workers(1)})
	err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{16, 16, 16}})
	if err == nil || !strings.Contains(err.Error(), "fold 0 has no training case in "+splits) {
		t.Errorf("empty fold: %v", err)
	}
	cfg.Fold = 1
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{16, 16, 16}}); err != nil {
		t.Errorf("fold 1: %v", err)
	}
}

// TestVerifyOneSliceImage: a single-slice image in a 3-D dataset is a
// warning naming the file and the axis, not an error.
func TestVerifyOneSliceImage(t *testing.T) {
	dir := demoDataset(t, 2)
	for _, sub := range []string{"imagesTr", "labelsTr"} {
		p := filepath.Join(dir, sub, demoIDs[0]+".nii.gz")
		h, v, err := nifti.ReadFloat32(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Dim[3] = 1 // keep the first z plane
		h.Datatype = nifti.Float32
		if err := nifti.WriteFloat32(p, h, v[:h.Dim[1]*h.Dim[2]]); err != nil {
			t.Fatal(err)
		}
	}
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{16, 16, 16}, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), demoIDs[0]+".nii.gz is a single slice along D") {
		t.Errorf("no warning about the single slice:\n%s", lb.String())
	}
}

// TestVerifyConstantImage: an image whose voxels are all one value
// (a failed export) trains, with a warning naming the file and the value.
func TestVerifyConstantImage(t *testing.T) {
	dir := demoDataset(t, 2)
	img := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	rewrite(t, img, func(h *nifti.Header, v []float32) {
		for i := range v {
			v[i] = 0
		}
	})
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{8, 8, 8}, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), img+": channel 0 is constant (every voxel 0)") {
		t.Errorf("no warning about the constant image:\n%s", lb.String())
	}
	if strings.Contains(lb.String(), demoIDs[0]+".nii.gz: channel 0 is constant") {
		t.Errorf("a real image reported constant:\n%s", lb.String())
	}
}

// TestVerifyIgnoreLabel: the ignore label's value is allowed in the labels
// only with loss.ignore_label, and a dataset.json "ignore" is held to it:
// accepted when they agree, refused with the value to set otherwise.
func TestVerifyIgnoreLabel(t *testing.T) {
	dir := demoDataset(t, 4)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2)})
	lbl0 := filepath.Join(dir, "labelsTr", demoIDs[0]+".nii.gz")
	rewrite(t, lbl0, func(h *nifti.Header, v []float32) { v[10], v[20] = 3, 3 })
	o := VerifyOptions{NumClasses: 3, Patch: [3]int{16, 16, 16}, Logger: discard()}
	if err := Verify(context.Background(), cfg, o); err == nil || !strings.Contains(err.Error(), "label value 3 in 2 voxels, outside 0..2") {
		t.Errorf("label 3 without ignore_label: %v", err)
	}
	o.IgnoreLabel = 3
	if err := Verify(context.Background(), cfg, o); err != nil {
		t.Errorf("label 3 with ignore_label 3: %v", err)
	}

	meta := filepath.Join(dir, "dataset.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["labels"].(map[string]any)["ignore"] = 3
	b, _ = json.Marshal(m)
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(context.Background(), cfg, o); err != nil {
		t.Errorf("dataset.json ignore 3, ignore_label 3: %v", err)
	}
	for _, tc := range []struct {
		ignore int
		want   string
	}{
		{0, "has the ignore label 3 (labels \"ignore\") but the config has no loss.ignore_label; set loss.ignore_label: 3"},
		{4, "but the config has loss.ignore_label 4; set loss.ignore_label: 3"},
	} {
		o.IgnoreLabel = tc.ignore
		if err := Verify(context.Background(), cfg, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dataset.json ignore 3, ignore_label %d: %v, want %q", tc.ignore, err, tc.want)
		}
	}
}
