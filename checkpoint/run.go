package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RunDir is the directory of one training run and the paths in it; see the
// package doc for the layout.
type RunDir struct {
	Path        string // <output>/<experiment>/fold_<k>/run_<r>
	Experiment  string // <output>/<experiment>: what its folds and runs share (generated splits)
	Checkpoints string // Dir/checkpoints: give it to Saver.Dir
	Logs        string // Dir/logs
	Plots       string // Dir/plots
	Config      string // Dir/config.yaml, the resolved config
	TrainLog    string // Dir/train.log
	Metrics     string // Dir/metrics.jsonl
	LockFile    string // Dir/train.lock: see Lock
	TensorBoard string // Dir/tensorboard: event files (made when written)
}

// FoldDir is the name of the folder of a fold's runs in an experiment's
// folder: fold_<fold>, or fold_all for fold -1 (a run on every case, as
// nnU-Net's fold "all"). nnU-Net names its trained folds alike.
func FoldDir(fold int) string {
	if fold == -1 {
		return "fold_all"
	}
	return "fold_" + strconv.Itoa(fold)
}

// ParseFoldDir is FoldDir's inverse: the fold a folder named name holds,
// ok false for any other name (fold_01, fold_-2, ...).
func ParseFoldDir(name string) (fold int, ok bool) {
	s, ok := strings.CutPrefix(name, "fold_")
	if !ok {
		return 0, false
	}
	if s == "all" {
		return -1, true
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || strconv.Itoa(k) != s {
		return 0, false
	}
	return k, true
}

// RunDirAt returns the paths of the run <output>/<experiment>/fold_<fold>/run_<run>
// (fold_all for fold -1, a run on every case) without touching the disk.
// experiment must be a single path element.
func RunDirAt(output, experiment string, fold, run int) (RunDir, error) {
	switch {
	case output == "":
		return RunDir{}, fmt.Errorf("run directory: empty output directory")
	case experiment == "" || experiment == "." || experiment == ".." || strings.ContainsAny(experiment, `/\`+"\x00"):
		return RunDir{}, fmt.Errorf("run directory: experiment name %q must be a single, non-empty path element", experiment)
	case fold < -1:
		return RunDir{}, fmt.Errorf("run directory: fold %d, want ≥ 0 (or -1: every case)", fold)
	case run < 0:
		return RunDir{}, fmt.Errorf("run directory: run id %d is negative", run)
	}
	dir := filepath.Join(output, experiment, FoldDir(fold), fmt.Sprintf("run_%d", run))
	return RunDir{
		Path:        dir,
		Experiment:  filepath.Join(output, experiment),
		Checkpoints: filepath.Join(dir, "checkpoints"),
		Logs:        filepath.Join(dir, "logs"),
		Plots:       filepath.Join(dir, "plots"),
		Config:      filepath.Join(dir, "config.yaml"),
		TrainLog:    filepath.Join(dir, "train.log"),
		Metrics:     filepath.Join(dir, "metrics.jsonl"),
		LockFile:    filepath.Join(dir, LockName),
		TensorBoard: filepath.Join(dir, "tensorboard"),
	}, nil
}

// NewRunDir returns the run's paths (see RunDirAt) and creates its
// directories, parents included; existing ones are kept as they are.
func NewRunDir(output, experiment string, fold, run int) (RunDir, error) {
	r, err := RunDirAt(output, experiment, fold, run)
	if err != nil {
		return RunDir{}, err
	}
	return r, r.MkdirAll()
}

// MkdirAll creates the run's directories that do not exist (again); cheap
// when they all do.
func (r RunDir) MkdirAll() error {
	for _, d := range []string{r.Checkpoints, r.Logs, r.Plots} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create run directory: %w", err)
		}
	}
	return nil
}
