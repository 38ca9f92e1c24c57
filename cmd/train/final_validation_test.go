package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// finalConfig writes a tiny training config (2 steps, fold 0 of 20 folds
// of the demo data: 4 held-out cases, windows without overlap) with extra appended to its
// validation: section; it returns the config's path.
func finalConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	doc := `experiment: final
seed: 5
data:
  dataset: ` + testutil.DemoDir(t) + `
  splits_file: splits.json
  num_folds: 20
  workers: 1
augment:
  preset: light
model:
  in_channels: 1
  num_classes: 3
  features: [4, 8]
train:
  epochs: 1
  iterations_per_epoch: 2
  batch_size: 2
  patch_size: [16, 16, 16]
validation:
  every: -1
  overlap: 0     # a third of the windows: a shorter race-enabled suite
` + extra
	p := filepath.Join(dir, "final.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFinalValidationIsValidate: a run with validation.final: last ends
// with nnU-Net's final validation in RUN/validation/ — the same
// predictions, probabilities (--npz) and scores, file for file, as `train
// validate --checkpoint RUN/checkpoints/last --output DIR
// --save-probabilities` writes. A run that kept no best checkpoint
// validates last when asked for best.
func TestFinalValidationIsValidate(t *testing.T) {
	dir := t.TempDir()
	cfg := finalConfig(t, dir, "  final: last\n")
	runs := filepath.Join(dir, "runs")
	out, errb, err := runCmd(t, "--config", cfg, "--output-dir", runs, "--npz", "--threads", "2")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, out, errb)
	}
	runDir := filepath.Join(runs, "final", "fold_0", "run_0")
	final := filepath.Join(runDir, "validation")
	if !strings.Contains(out.String(), "final validation: "+filepath.Join(runDir, "checkpoints")) ||
		!strings.Contains(out.String(), "4 cases\n") ||
		!strings.Contains(out.String(), "predictions, probabilities (.npz) and summary.json in "+final) {
		t.Errorf("train's output does not report the final validation:\n%s", out)
	}

	val := filepath.Join(dir, "validate")
	if out, errb, err := runCmd(t, "validate", "--checkpoint", filepath.Join(runDir, "checkpoints", "last"), "--output", val,
		"--save-probabilities", "--threads", "2", "--overlap", "0"); err != nil {
		t.Fatalf("validate: %v\n%s\n%s", err, out, errb)
	}
	got, want := testutil.DirNames(t, final), testutil.DirNames(t, val)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the final validation wrote %v, train validate %v", got, want)
	}
	var npz, labels int
	for _, n := range got {
		if n == "summary.json" {
			continue
		}
		if strings.HasSuffix(n, ".npz") {
			npz++
		} else {
			labels++
		}
		a, err := os.ReadFile(filepath.Join(final, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(val, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the final validation and train validate", n)
		}
	}
	if npz != 4 || labels != 4 {
		t.Errorf("%d label files and %d .npz, want 4 of each: %v", labels, npz, got)
	}
	sf, err := evaluation.Read(filepath.Join(final, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := evaluation.Read(filepath.Join(val, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Printed: HD95 is NaN (not computed), which DeepEqual never matches.
	if len(sf.Cases) != 4 || fmt.Sprintf("%+v", sf.Mean) != fmt.Sprintf("%+v", sv.Mean) {
		t.Errorf("final validation: %d cases, means %+v; train validate's means %+v", len(sf.Cases), sf.Mean, sv.Mean)
	}

	// A signal during the final validation (its context cancelled) ends it
	// with the cancellation, which main's exit status calls interrupted.
	o, err := capture(t, NewCmdTrain, "--config", cfg, "--output-dir", runs, "--resume", "auto")
	if err != nil {
		t.Fatal(err)
	}
	o.IO = &IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	dev, err := openComputeDevice("cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = finalValidation(ctx, o, dev, runDir, 0)
	dev.Close()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled final validation returned %v, want context.Canceled", err)
	}

	// Resuming the completed run trains nothing and validates again; it
	// kept no best checkpoint (no validation during training), so best
	// falls back to last.
	out, errb, err = runCmd(t, "--config", cfg, "--output-dir", runs, "--resume", "auto", "--final-validation", "best", "--threads", "2")
	if err != nil {
		t.Fatalf("resume: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(out.String(), "kept no best checkpoint") || !strings.Contains(out.String(), "predictions and summary.json in "+final) {
		t.Errorf("the resumed run's output:\n%s", out)
	}
}

// TestFinalValidationSkipped: no final validation without validation.final
// or for a run on every case (fold -1), which holds none out.
func TestFinalValidationSkipped(t *testing.T) {
	dir := t.TempDir()
	cfg := finalConfig(t, dir, "")
	runs := filepath.Join(dir, "runs")
	out, errb, err := runCmd(t, "--config", cfg, "--output-dir", runs, "--threads", "2")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, out, errb)
	}
	if strings.Contains(out.String(), "final validation") {
		t.Errorf("a run without validation.final validated:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(runs, "final", "fold_0", "run_0", "validation")); err == nil {
		t.Error("a run without validation.final has a validation folder")
	}
	out, errb, err = runCmd(t, "--config", cfg, "--output-dir", runs, "--fold", "-1", "--npz", "--threads", "2")
	if err != nil {
		t.Fatalf("train --fold -1: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(out.String(), "final validation skipped: fold -1 trains on every case") {
		t.Errorf("train --fold -1 --npz:\n%s", out)
	}
}

// TestFinalValidationFlags: --npz turns on the final validation of the
// last checkpoint when the config asks for none, keeps the one it asks
// for, and --final-validation's bad values are errors naming the flag.
func TestFinalValidationFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		extra string
		args  []string
		final string
		npz   bool
		err   string
	}{
		{"", nil, "none", false, ""},
		{"", []string{"--npz"}, "last", true, ""},
		{"  final: best\n", []string{"--npz"}, "best", true, ""},
		{"", []string{"--final-validation", "best"}, "best", false, ""},
		{"  final: last\n", []string{"--final-validation", "none"}, "none", false, ""},
		{"", []string{"--final-validation", "none", "--npz"}, "", false, "--npz true: validation.final_probabilities: true, but validation.final is none"},
		{"", []string{"--final-validation", "final"}, "", false, `--final-validation final: validation.final: "final", want last`},
	} {
		cfg := finalConfig(t, dir, tc.extra)
		o, err := capture(t, NewCmdTrain, append([]string{"--config", cfg}, tc.args...)...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %v: error %v, want one saying %q", tc.extra, tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %v: %v", tc.extra, tc.args, err)
			continue
		}
		if v := o.Config.Validation; v.Final != tc.final || v.FinalProbabilities != tc.npz {
			t.Errorf("%q %v: final %q, probabilities %v; want %q, %v", tc.extra, tc.args, v.Final, v.FinalProbabilities, tc.final, tc.npz)
		}
	}
}

// TestFinalValidationRankZeroOnly: in a data-parallel job only rank 0
// validates (the others have nothing to add and end).
func TestFinalValidationRankZeroOnly(t *testing.T) {
	dir := t.TempDir()
	f, out, _ := testFactory()
	o, err := capture(t, NewCmdTrain, "--config", finalConfig(t, dir, "  final: last\n"))
	if err != nil {
		t.Fatal(err)
	}
	o.IO = f.IO
	dev, err := openComputeDevice("cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	runDir := filepath.Join(dir, "no-run") // rank 1 must not even look
	if err := finalValidation(context.Background(), o, dev, runDir, 1); err != nil || out.Len() != 0 {
		t.Errorf("rank 1: %v, printed %q", err, out)
	}
	if err := finalValidation(context.Background(), o, dev, runDir, 0); err == nil || !strings.Contains(err.Error(), "final validation") {
		t.Errorf("rank 0 with no run: %v", err)
	}
}
