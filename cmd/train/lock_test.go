package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestLockedRunDirectory: through the command line, a training into a run
// directory whose lock is held elsewhere fails naming the holder's PID and
// host, while the commands that only read a run (plot, predict) work
// there; once the lock is released the training resumes.
func TestLockedRunDirectory(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "runs")
	cfg := writeConfig(t, "  splits_file: "+filepath.Join(tmp, "splits.json")+`
  workers: 2
experiment: e
output_dir: `+out+`
model:
  num_classes: 3
  features: [4, 8]
train:
  epochs: 1
  iterations_per_epoch: 2
  batch_size: 2
  patch_size: [16, 16, 16]
validation:
  every: -1
`)
	if stdout, errb, err := runCmd(t, "--config", cfg, "--threads", "2"); err != nil {
		t.Fatalf("first training: %v\n%s\n%s", err, stdout, errb)
	}
	r, err := checkpoint.RunDirAt(out, "e", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := r.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()

	_, _, err = runCmd(t, "--config", cfg, "--threads", "2", "--epochs", "2", "--resume", "auto")
	host, _ := os.Hostname()
	if err == nil {
		t.Fatal("a training into a locked run directory started")
	}
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), "host " + host, r.Path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	if stdout, errb, err := runCmd(t, "plot", r.Path); err != nil {
		t.Errorf("plot of a locked run: %v\n%s\n%s", err, stdout, errb)
	}
	pred := filepath.Join(tmp, "pred.nii.gz")
	if stdout, errb, err := runCmd(t, "predict", "--checkpoint", filepath.Join(r.Checkpoints, "last"), "--threads", "2", "--disable-tta",
		"--input", filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz"), "--output", pred); err != nil {
		t.Errorf("predict from a locked run: %v\n%s\n%s", err, stdout, errb)
	}

	lock.Release()
	if stdout, errb, err := runCmd(t, "--config", cfg, "--threads", "2", "--epochs", "2", "--resume", "auto"); err != nil {
		t.Fatalf("training after the lock was released: %v\n%s\n%s", err, stdout, errb)
	}
}
