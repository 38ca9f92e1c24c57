package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// smallRawDataset links the demo cases ids into a dataset folder in
// nnU-Net's raw layout (imagesTr/CASE_0000.nii.gz, labelsTr/CASE.nii.gz,
// dataset.json) and returns it.
func smallRawDataset(t *testing.T, ids ...string) string {
	t.Helper()
	demo := testutil.DemoDir(t)
	raw := filepath.Join(t.TempDir(), "Dataset004_Small")
	for _, d := range []string{"imagesTr", "labelsTr"} {
		if err := os.MkdirAll(filepath.Join(raw, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if err := os.Symlink(filepath.Join(demo, "imagesTr", id+".nii.gz"), filepath.Join(raw, "imagesTr", id+"_0000.nii.gz")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(demo, "labelsTr", id+".nii.gz"), filepath.Join(raw, "labelsTr", id+".nii.gz")); err != nil {
			t.Fatal(err)
		}
	}
	meta, _ := json.Marshal(map[string]any{"channel_names": map[string]string{"0": "MRI"},
		"labels": map[string]int{"background": 0, "Anterior": 1, "Posterior": 2}, "numTraining": len(ids), "file_ending": ".nii.gz"})
	if err := os.WriteFile(filepath.Join(raw, "dataset.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestValidateSaveProbabilities: validate --output --save-probabilities
// writes each case's CASE.npz beside its labels, byte for byte what
// predict --save-probabilities writes for the same checkpoint and image,
// and the labels are still argmax of those probabilities; without
// --output the flag is refused.
func TestValidateSaveProbabilities(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric")
	ids := []string{"hippocampus_001", "hippocampus_006"}
	raw := smallRawDataset(t, ids...)
	// On the files' grid, and resampled to a target spacing (mapped back
	// as nnU-Net exports: logits resampled, then softmax and argmax) —
	// predict and validate alike.
	resampled := func(c *config.Config) { c.Data.TargetSpacing = []float64{1.5, 1.5, 1.5} }
	var ck, val string
	for k, edit := range []func(*config.Config){nil, resampled} {
		ck = tinyCheckpoint(t, filepath.Join(t.TempDir(), "runs"), 0, 1, edit)
		val = filepath.Join(t.TempDir(), "val")
		o, errb, err := runCmd(t, "validate", "--checkpoint", ck, "--data", raw, "--output", val, "--save-probabilities", "--threads", "2")
		if err != nil {
			t.Fatalf("validate: %v\n%s\n%s", err, o, errb)
		}
		if !strings.Contains(o.String(), "predictions, probabilities (.npz) and summary.json in "+val) {
			t.Errorf("validate's log:\n%s", o)
		}
		pred := filepath.Join(t.TempDir(), "pred")
		if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", filepath.Join(raw, "imagesTr"), "-o", pred,
			"--save-probabilities", "--disable-tta", "--threads", "2"); err != nil {
			t.Fatalf("predict: %v\n%s\n%s", err, o, errb)
		}
		if names := testutil.DirNames(t, val); !slices.Equal(names, []string{"hippocampus_001.nii.gz", "hippocampus_001.npz",
			"hippocampus_006.nii.gz", "hippocampus_006.npz", "summary.json"}) {
			t.Errorf("validate --output wrote %v", names)
		}
		for _, id := range ids {
			got, err := os.ReadFile(filepath.Join(val, id+".npz"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(pred, id+".npz"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("case %d, %s: validate's .npz (%d bytes) differs from predict's (%d bytes)", k, id, len(got), len(want))
			}
			if a, b := volumetest.MustRead(t, filepath.Join(val, id+".nii.gz")), volumetest.MustRead(t, filepath.Join(pred, id+".nii.gz")); string(a) != string(b) {
				t.Errorf("case %d, %s: validate's labels differ from predict's", k, id)
			}
			p := readProbs(t, filepath.Join(val, id+".npz"))
			h, labels, err := nifti.ReadFloat32(filepath.Join(val, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{3, int(h.Dim[3]), int(h.Dim[2]), int(h.Dim[1])}; !slices.Equal(p.Shape, want) {
				t.Fatalf("%s: probabilities of shape %v, the labels' grid %v", id, p.Shape, want)
			}
			am := infer.Argmax(p.Data, 3, len(labels))
			for i, l := range labels {
				if uint8(l) != am[i] {
					t.Fatalf("%s: label %d is %v, argmax of the saved probabilities %d", id, i, l, am[i])
				}
			}
		}
	}
	if s, err := evaluation.Read(filepath.Join(val, "summary.json")); err != nil || len(s.Cases) != len(ids) {
		t.Errorf("summary.json: %v", err)
	}
	if _, _, err := runCmd(t, "validate", "--checkpoint", ck, "--data", raw, "--save-probabilities"); err == nil ||
		!strings.Contains(err.Error(), "--save-probabilities") || !strings.Contains(err.Error(), "--output") {
		t.Errorf("--save-probabilities without --output: %v", err)
	}
}
