package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRunDirAt(t *testing.T) {
	r, err := RunDirAt("out", "Task04", 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := RunDir{
		Path:        filepath.Join("out", "Task04", "fold_3", "run_7"),
		Experiment:  filepath.Join("out", "Task04"),
		Checkpoints: filepath.Join("out", "Task04", "fold_3", "run_7", "checkpoints"),
		Logs:        filepath.Join("out", "Task04", "fold_3", "run_7", "logs"),
		Plots:       filepath.Join("out", "Task04", "fold_3", "run_7", "plots"),
		Config:      filepath.Join("out", "Task04", "fold_3", "run_7", "config.yaml"),
		TrainLog:    filepath.Join("out", "Task04", "fold_3", "run_7", "train.log"),
		Metrics:     filepath.Join("out", "Task04", "fold_3", "run_7", "metrics.jsonl"),
		LockFile:    filepath.Join("out", "Task04", "fold_3", "run_7", "train.lock"),
		TensorBoard: filepath.Join("out", "Task04", "fold_3", "run_7", "tensorboard"),
	}
	if r != want {
		t.Errorf("%+v", r)
	}
	for _, c := range []struct {
		out, exp  string
		fold, run int
	}{{"", "e", 0, 0}, {"o", "", 0, 0}, {"o", "..", 0, 0}, {"o", "a/b", 0, 0}, {"o", "e", -2, 0}, {"o", "e", 0, -1}} {
		if _, err := RunDirAt(c.out, c.exp, c.fold, c.run); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if r, err := RunDirAt("o", "e", -1, 0); err != nil || r.Path != filepath.Join("o", "e", "fold_all", "run_0") {
		t.Errorf("fold -1 (every case): %+v %v", r, err)
	}
	if _, err := os.Stat("out"); !errors.Is(err, os.ErrNotExist) {
		t.Error("RunDirAt touched the disk")
	}
}

// TestFoldDir: fold folders are named fold_<k> and fold_all, and only
// those names parse back.
func TestFoldDir(t *testing.T) {
	for _, k := range []int{-1, 0, 4, 12} {
		if got, ok := ParseFoldDir(FoldDir(k)); !ok || got != k {
			t.Errorf("ParseFoldDir(FoldDir(%d) = %q) = %d, %v", k, FoldDir(k), got, ok)
		}
	}
	if FoldDir(-1) != "fold_all" || FoldDir(3) != "fold_3" {
		t.Errorf("FoldDir: %q, %q", FoldDir(-1), FoldDir(3))
	}
	for _, name := range []string{"fold_01", "fold_-2", "fold_", "fold_x", "folds_1", "run_0"} {
		if k, ok := ParseFoldDir(name); ok {
			t.Errorf("ParseFoldDir(%q) = %d, want no fold", name, k)
		}
	}
}
