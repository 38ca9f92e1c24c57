package evaluation

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/nifti"
	_ "github.com/voxtrain/voxtrain/nrrd" // registers .nrrd with volume, as the binary does
)

// writeLabels writes a (D, H, W) label map as a uint8 NIfTI file.
func writeLabels(t *testing.T, path string, shape [3]int, labels []uint8) {
	t.Helper()
	h, err := nifti.NewHeader([]int{shape[2], shape[1], shape[0]}, nifti.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(labels))
	for i, l := range labels {
		v[i] = float32(l)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := nifti.WriteFloat32(path, h, v); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestMatchFilesNamesTheMissing(t *testing.T) {
	dir := t.TempDir()
	pred, ref := filepath.Join(dir, "pred"), filepath.Join(dir, "ref")
	s := [3]int{2, 2, 2}
	z := make([]uint8, 8)
	writeLabels(t, filepath.Join(ref, "a.nii.gz"), s, z)
	writeLabels(t, filepath.Join(ref, "b.nii.gz"), s, z)
	writeLabels(t, filepath.Join(pred, "a.nii.gz"), s, z)
	writeLabels(t, filepath.Join(pred, "c.nii.gz"), s, z)
	os.WriteFile(filepath.Join(pred, "summary.json"), []byte("{}"), 0o644) // ignored
	_, err := MatchFiles(pred, ref, "")
	wantErr(t, err, "b.nii.gz", "without a prediction", "c.nii.gz", "without a reference")
	// Chill: b.nii.gz's missing prediction is no error, c.nii.gz's
	// missing reference still is.
	_, err = MatchPredictions(pred, ref, "")
	wantErr(t, err, "c.nii.gz", "without a reference")
	if err != nil && strings.Contains(err.Error(), "b.nii.gz") {
		t.Errorf("MatchPredictions names the unpredicted reference: %v", err)
	}
	os.Rename(filepath.Join(pred, "c.nii.gz"), filepath.Join(dir, "c.nii.gz"))
	if pairs, err := MatchPredictions(pred, ref, ""); err != nil || len(pairs) != 1 || pairs[0].Name != "a.nii.gz" {
		t.Errorf("MatchPredictions: %+v, %v; want a.nii.gz alone", pairs, err)
	}
	os.Rename(filepath.Join(dir, "c.nii.gz"), filepath.Join(pred, "c.nii.gz"))

	os.Remove(filepath.Join(pred, "c.nii.gz"))
	writeLabels(t, filepath.Join(pred, "b.nii"), s, z) // another ending: not b.nii.gz's prediction
	_, err = MatchFiles(pred, ref, ".nii.gz")
	wantErr(t, err, "b.nii.gz")

	writeLabels(t, filepath.Join(pred, "b.nii.gz"), [3]int{2, 2, 3}, make([]uint8, 12))
	pairs, err := MatchFiles(pred, ref, "")
	if err != nil || len(pairs) != 2 || pairs[1].Name != "b.nii.gz" {
		t.Fatalf("pairs %+v, %v", pairs, err)
	}
	_, err = Folder(pairs, Options{})
	wantErr(t, err, filepath.Join(pred, "b.nii.gz"), filepath.Join(ref, "b.nii.gz"), "shape")
}

// TestFolderDefaultLabelsAndHD95: with no labels given, every label of
// any prediction or reference is scored (one only predicted counts); HD95
// is in the file under its own key, infinite where one side is empty.
func TestFolderDefaultLabelsAndHD95(t *testing.T) {
	dir := t.TempDir()
	s := [3]int{1, 1, 6}
	writeLabels(t, filepath.Join(dir, "ref", "x.nii"), s, []uint8{1, 1, 0, 0, 0, 0})
	writeLabels(t, filepath.Join(dir, "pred", "x.nii"), s, []uint8{1, 0, 0, 0, 0, 3})
	pairs, err := MatchFiles(filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), "")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Folder(pairs, Options{HD95: true, Names: map[int]string{1: "liver"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Labels) != 2 || sum.Labels[0] != 1 || sum.Labels[1] != 3 {
		t.Fatalf("labels %v, want [1 3]", sum.Labels)
	}
	m := sum.Cases[0].Metrics[0]
	if m.TP != 1 || m.FN != 1 || m.FP != 0 || m.TN != 4 || m.Dice != 2.0/3 || m.IoU != 0.5 || m.NPred != 1 || m.NRef != 2 {
		t.Errorf("label 1: %+v", m)
	}
	if m3 := sum.Cases[0].Metrics[1]; m3.Dice != 0 || !math.IsInf(m3.HD95, 1) {
		t.Errorf("label 3 (predicted only): %+v", m3)
	}
	if !math.IsNaN(sum.Mean[1].HD95) {
		t.Errorf("mean HD95 of a label never in both: %v, want NaN (infinite cases left out)", sum.Mean[1].HD95)
	}
	out := filepath.Join(dir, "summary.json")
	if err := sum.Write(out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	for _, w := range []string{`"HD95": Infinity`, `"label_names": {` + "\n" + `        "1": "liver"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("summary.json lacks %q:\n%s", w, b)
		}
	}
	back, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !back.HD95 || back.Names[1] != "liver" || back.Cases[0].Metrics[0].HD95 != m.HD95 || !math.IsInf(back.Cases[0].Metrics[1].HD95, 1) {
		t.Errorf("read back: %+v", back)
	}
}

func TestDatasetLabels(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, ending string }{
		{`{"labels": {"0": "background", "2": "Posterior", "1": "Anterior"}}`, ""},
		{`{"labels": {"background": 0, "Anterior": 1, "Posterior": 2}, "file_ending": ".nii.gz"}`, ".nii.gz"},
	} {
		p := filepath.Join(dir, "dataset.json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		labels, names, ending, err := DatasetLabels(p)
		if err != nil || len(labels) != 2 || labels[0] != 1 || names[2] != "Posterior" || ending != tc.ending {
			t.Errorf("%s: %v %v %q %v", tc.body, labels, names, ending, err)
		}
	}
	p := filepath.Join(dir, "dataset.json")
	os.WriteFile(p, []byte(`{"labels": {"background": 0, "whole": [1, 2]}}`), 0o644)
	_, _, _, err := DatasetLabels(p)
	wantErr(t, err, p, "whole", "region")
}

func TestReadTakesPythonConstantsOutsideStringsOnly(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(p, []byte(`{"foreground_mean": {"Dice": NaN}, "mean": {"1": {"Dice": -Infinity}},
	 "metric_per_case": [{"metrics": {"1": {"Dice": 0.5}}, "prediction_file": "NaN \"Infinity\".nii", "reference_file": "r"}]}`), 0o644)
	s, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(s.ForegroundMean.Dice) || !math.IsInf(s.Mean[0].Dice, -1) || s.Cases[0].PredictionFile != `NaN "Infinity".nii` || s.Cases[0].Metrics[0].Dice != 0.5 {
		t.Errorf("read %+v", s)
	}
}

func TestCheckLabels(t *testing.T) {
	for _, bad := range [][]int{nil, {0, 1}, {256}, {2, 1, 2}} {
		if err := CheckLabels(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	l := []int{3, 1}
	if err := CheckLabels(l); err != nil || l[0] != 1 {
		t.Errorf("%v: %v", l, err)
	}
}

// TestFolderIgnoreLabel: reference voxels with the ignore label are left
// out of every count (nnU-Net's ignore_mask) whatever was predicted
// there, the ignore label is never scored, and dataset.json's "ignore"
// is read apart from the classes.
func TestFolderIgnoreLabel(t *testing.T) {
	dir := t.TempDir()
	s := [3]int{1, 1, 8}
	writeLabels(t, filepath.Join(dir, "ref", "x.nii"), s, []uint8{1, 1, 0, 0, 4, 4, 4, 0})
	writeLabels(t, filepath.Join(dir, "pred", "x.nii"), s, []uint8{1, 0, 0, 0, 1, 1, 0, 1})
	pairs, err := MatchFiles(filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), "")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Folder(pairs, Options{Ignore: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Labels) != 1 || sum.Labels[0] != 1 {
		t.Fatalf("labels %v, want [1] (4 is ignored)", sum.Labels)
	}
	// Voxels 4-6 are ignored: left are 1,1,0,0,0 against 1,0,0,0,1.
	if m := sum.Cases[0].Metrics[0]; m.TP != 1 || m.FN != 1 || m.FP != 1 || m.TN != 2 || m.NPred != 2 || m.NRef != 2 {
		t.Errorf("label 1 with voxels of label 4 ignored: %+v", m)
	}
	plain, err := Folder(pairs, Options{Labels: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if m := plain.Cases[0].Metrics[0]; m.FP != 3 {
		t.Errorf("without ignore, FP %v, want 3: the test cannot tell", m.FP)
	}
	p := filepath.Join(dir, "dataset.json")
	os.WriteFile(p, []byte(`{"labels": {"background": 0, "cell": 1, "ignore": 4}}`), 0o644)
	labels, _, _, err := DatasetLabels(p)
	ig, err2 := DatasetIgnore(p)
	if err != nil || err2 != nil || len(labels) != 1 || labels[0] != 1 || ig != 4 {
		t.Errorf("dataset.json with an ignore label: labels %v (%v), ignore %d (%v)", labels, err, ig, err2)
	}
}

// References in another format (NRRD): their predictions have their
// ending, as train predict and validate write them; a NIfTI prediction
// of a NRRD reference is not its pair (nnU-Net's one file_ending).
func TestMatchFilesOtherFormats(t *testing.T) {
	dir := t.TempDir()
	pred, ref := filepath.Join(dir, "pred"), filepath.Join(dir, "ref")
	b, err := os.ReadFile("../nrrd/testdata/labels_uint8.nrrd")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pred, ref} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"c1", "c2"} {
		if err := os.WriteFile(filepath.Join(ref, id+".nrrd"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pred, "c1.nrrd"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := ReadLabelFile(filepath.Join(ref, "c1.nrrd"))
	if err != nil {
		t.Fatal(err)
	}
	writeLabels(t, filepath.Join(pred, "c2.nii.gz"), lf.Header.Shape, lf.Labels)
	_, err = MatchFiles(pred, ref, "")
	wantErr(t, err, "c2.nrrd", "without a prediction")
	if err := os.WriteFile(filepath.Join(pred, "c2.nrrd"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	pairs, err := MatchFiles(pred, ref, "")
	if err != nil || len(pairs) != 2 || pairs[0].Name != "c1.nrrd" || pairs[0].Prediction != filepath.Join(pred, "c1.nrrd") {
		t.Fatalf("pairs %+v, %v", pairs, err)
	}
	s, err := Folder(pairs, Options{Labels: []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if d := s.ForegroundMean.Dice; d != 1 {
		t.Errorf("foreground mean Dice %v, want 1", d)
	}
}
