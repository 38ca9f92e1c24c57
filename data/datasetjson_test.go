package data

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// nnunetRaw lays out the first n demo cases in nnU-Net v2's raw layout
// (imagesTr/CASE_0000<ending>, labelsTr/CASE<ending>, symlinked) with
// the given dataset.json, and returns the folder.
func nnunetRaw(t *testing.T, n int, ending, datasetJSON string) string {
	t.Helper()
	src := testutil.DemoDir(t)
	dir := t.TempDir()
	for _, sub := range []string{"imagesTr", "labelsTr"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range demoIDs[:n] {
		for _, f := range [][2]string{
			{filepath.Join(src, "imagesTr", id+".nii.gz"), filepath.Join(dir, "imagesTr", id+"_0000"+ending)},
			{filepath.Join(src, "labelsTr", id+".nii.gz"), filepath.Join(dir, "labelsTr", id+ending)},
		} {
			if ending == ".nii.gz" {
				if err := os.Symlink(f[0], f[1]); err != nil {
					t.Fatal(err)
				}
				continue
			}
			h, v, err := nifti.ReadFloat32(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := nifti.WriteFloat32(f[1], h, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if datasetJSON != "" {
		if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(datasetJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDatasetJSONRefusesWhatItCannotTrain: nnU-Net v2 regions without
// model.targets multi_label or without regions_class_order, an ignore
// label that is not the highest label value, and a file_ending no reader opens are refused when the dataset is
// opened, naming dataset.json and the key, instead of being trained as
// plain classes or finding no cases; a numTraining that disagrees with the
// files found names both.
func TestDatasetJSONRefusesWhatItCannotTrain(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"region", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"whole":[1,2],"posterior":2},"regions_class_order":[1,2],"file_ending":".nii.gz"}`,
			[]string{"model.targets: softmax", "nnU-Net regions", "set model.targets: multi_label and loss.name: dice_bce"}},
		{"region without order", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"whole":[1,2]},"file_ending":".nii.gz"}`,
			[]string{`labels: "whole" is (1, 2), nnU-Net v2 regions, but there is no "regions_class_order"`}},
		{"order without regions' count", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"whole":[1,2],"posterior":2},"regions_class_order":[1],"file_ending":".nii.gz"}`,
			[]string{"regions_class_order: 1 values for the 2 regions"}},
		{"ignore not highest", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2,"ignore":2},"file_ending":".nii.gz"}`,
			[]string{`labels: "ignore" is 2 but class "Posterior" is 2; the ignore label must be the highest label value`}},
		{"ignore not a number", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2,"ignore":"x"},"file_ending":".nii.gz"}`,
			[]string{`labels: "ignore" is "x", want nnU-Net v2's ignore label, an integer in 1..255`}},
		{"ending", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2},"file_ending":".mgz"}`,
			[]string{`file_ending: no volume reader opens ".mgz" files`}},
		{"numTraining", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2},"numTraining":5,"file_ending":".nii.gz"}`,
			[]string{"numTraining is 5 but", "imagesTr holds 3 cases"}},
	} {
		dir := nnunetRaw(t, 3, ".nii.gz", tc.json)
		_, err := OpenDataset(filled(config.Data{Dataset: dir}))
		if err == nil {
			t.Errorf("%s: opened", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Join(dir, "dataset.json")) {
			t.Errorf("%s: the error does not name dataset.json: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error lacks %q: %v", tc.name, w, err)
			}
		}
	}
}

// TestFileEndingHonoured: with file_ending ".nii" only the .nii files
// are cases (a stray .nii.gz beside them is not), labels are looked up
// with the same ending, and a missing channel or label names its file.
func TestFileEndingHonoured(t *testing.T) {
	dir := nnunetRaw(t, 3, ".nii", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2},"numTraining":3,"file_ending":".nii"}`)
	stray := filepath.Join(dir, "imagesTr", "zzz_0000.nii.gz")
	if err := os.Symlink(filepath.Join(dir, "imagesTr", demoIDs[0]+"_0000.nii"), stray); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDataset(filled(config.Data{Dataset: dir}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 3 || ds.Cases[0].Label != filepath.Join(dir, "labelsTr", demoIDs[0]+".nii") {
		t.Fatalf("cases %+v", ds.Cases)
	}

	// A second channel declared: the case without it names the file it lacks.
	meta := `{"channel_names":{"0":"MRI","1":"neg"},"labels":{"background":0,"Anterior":1,"Posterior":2},"file_ending":".nii"}`
	os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(meta), 0o644)
	os.Remove(stray)
	for _, id := range demoIDs[:3] {
		os.Symlink(filepath.Join(dir, "imagesTr", id+"_0000.nii"), filepath.Join(dir, "imagesTr", id+"_0001.nii"))
	}
	os.Remove(filepath.Join(dir, "imagesTr", demoIDs[1]+"_0001.nii"))
	os.Symlink(filepath.Join(dir, "imagesTr", demoIDs[1]+"_0000.nii"), filepath.Join(dir, "imagesTr", demoIDs[1]+"_0002.nii"))
	if _, err := OpenDataset(filled(config.Data{Dataset: dir})); err == nil || !strings.Contains(err.Error(), demoIDs[1]+"_0001.nii") {
		t.Errorf("missing channel: %v", err)
	}
	os.Remove(filepath.Join(dir, "imagesTr", demoIDs[1]+"_0002.nii"))
	os.Symlink(filepath.Join(dir, "imagesTr", demoIDs[1]+"_0000.nii"), filepath.Join(dir, "imagesTr", demoIDs[1]+"_0001.nii"))

	// A case without its label names the label file.
	lbl := filepath.Join(dir, "labelsTr", demoIDs[2]+".nii")
	os.Remove(lbl)
	if _, err := OpenDataset(filled(config.Data{Dataset: dir})); err == nil || !strings.Contains(err.Error(), lbl) {
		t.Errorf("missing label: %v", err)
	}
}

// TestVerifyLabelsOutsideDatasetJSON: a label value inside
// model.num_classes but not among dataset.json's labels is a problem
// naming the file, the value and the declared list.
func TestVerifyLabelsOutsideDatasetJSON(t *testing.T) {
	dir := demoDataset(t, 2)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	lbl := filepath.Join(dir, "labelsTr", demoIDs[1]+".nii.gz")
	rewrite(t, lbl, func(h *nifti.Header, v []float32) { v[5], v[6], v[7] = 3, 3, 3 })
	err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 4, Patch: [3]int{8, 8, 8}, Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), lbl+": label value 3 in 3 voxels is not among dataset.json's labels [0 1 2]") {
		t.Fatalf("Verify: %v", err)
	}
}

// TestNonRegularFileRefused: a FIFO given as a case's image is refused
// when the dataset is opened, naming the file, instead of blocking the
// first read for good.
func TestNonRegularFileRefused(t *testing.T) {
	dir := demoDataset(t, 3)
	fifo := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	os.Remove(fifo)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	_, err := OpenDataset(filled(config.Data{Dataset: dir}))
	if err == nil || !strings.Contains(err.Error(), fifo+" is not a regular file (a named pipe (FIFO))") {
		t.Fatalf("OpenDataset: %v", err)
	}
}

// TestVerifyHungRead: a case whose read never returns (a hung mount)
// makes Verify fail at data.hard_timeout naming the file, and without a
// hard timeout a cancelled context (a signal) returns at once; neither
// waits for the stuck read.
func TestVerifyHungRead(t *testing.T) {
	dir := demoDataset(t, 3)
	stuck := demoIDs[1]
	release := make(chan struct{})
	defer close(release)
	o := VerifyOptions{NumClasses: 3, Patch: [3]int{8, 8, 8}, Logger: discard(),
		check: func(c Case, ch int, o VerifyOptions) ([]string, []string) {
			if c.ID == stuck {
				<-release
			}
			return checkCase(c, ch, o)
		}}

	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2), HardTimeout: 200 * time.Millisecond})
	var err error
	closesWithin(t, "Verify with a hard timeout", 5*time.Second, func() { err = Verify(context.Background(), cfg, o) })
	want := filepath.Join(dir, "imagesTr", stuck+".nii.gz") + ": reading case " + stuck + " took longer than data.hard_timeout 200ms"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Verify: %v, want %q", err, want)
	}

	cfg.HardTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	closesWithin(t, "Verify after a cancel", 5*time.Second, func() { err = Verify(ctx, cfg, o) })
	if err != context.Canceled {
		t.Fatalf("Verify after the cancel: %v", err)
	}
}
