package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestPredictChecksOutputBeforeLoading: `train predict` refuses an output
// that is its input, has another extension than NIfTI's or is a directory
// with a NIfTI name before it
// loads the checkpoint (here missing, which would otherwise be the error)
// and long before inference.
func TestPredictChecksOutputBeforeLoading(t *testing.T) {
	in := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz")
	dir := t.TempDir()
	folder := filepath.Join(dir, "preds.nii")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "no-checkpoint")
	for out, want := range map[string]string{
		in:                                "the same file as the input",
		filepath.Join(dir, "labels.png"):  "not a label file name",
		filepath.Join(dir, "labels"):      "checkpoint", // a folder for the predictions
		folder:                            "is a directory",
		filepath.Join(dir, "ok.nii.gz"):   "checkpoint", // a good output: then the checkpoint fails
		filepath.Join(dir, "ok.hdr"):      "checkpoint",
		filepath.Join(folder, "x.nii.gz"): "checkpoint",
	} {
		_, _, err := runCmd(t, "predict", "--checkpoint", ck, "--input", in, "--output", out)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--output %s: %v, want an error about %q", out, err, want)
		}
		if want != "checkpoint" && (!strings.HasPrefix(err.Error(), "--output: ") || !strings.Contains(err.Error(), out)) {
			t.Errorf("--output %s: %v, want the error to name --output and the file", out, err)
		}
	}
}
