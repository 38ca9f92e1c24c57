package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/trainer"
)

// TestMain lets the test binary be train itself: with VOXTRAIN_TEST_MAIN=1
// it runs main on its arguments (see TestSIGTERMExitsWith143AndResumes),
// and a child of `train launch` in the launch tests.
func TestMain(m *testing.M) {
	// A process `train launch` started, in a launch test: the behaviour
	// VOXTRAIN_TEST_DIST_CHILD names (see distChild).
	if mode := os.Getenv("VOXTRAIN_TEST_DIST_CHILD"); mode != "" && os.Getenv("RANK") != "" {
		os.Exit(distChild(mode))
	}
	if os.Getenv("VOXTRAIN_TEST_MAIN") == "1" {
		main()
		os.Exit(exitOK)
	}
	os.Exit(m.Run())
}

// TestExitCode: finished 0, failed 1, interrupted by a signal 128 + the
// signal (a training run's *trainer.Interrupted, however wrapped, or
// another command's cancellation), stopped by the step limit 75; an
// error after a signal that is not the interruption itself fails.
func TestExitCode(t *testing.T) {
	sigint, sigterm := interruptSignal{syscall.SIGINT}, interruptSignal{syscall.SIGTERM}
	interrupted := func(cause error) error {
		return &trainer.Interrupted{Cause: cause, Epoch: 3, StepInEpoch: 7, Step: 757}
	}
	for _, c := range []struct {
		name       string
		err, cause error
		want       int
	}{
		{"finished", nil, nil, 0},
		{"finished after a late signal", nil, sigterm, 0},
		{"failed", errors.New("data: case 7: bad header"), nil, 1},
		{"failed while stopping", errors.New("save last: disk full"), sigterm, 1},
		{"SIGTERM", interrupted(sigterm), sigterm, 143},
		{"SIGINT", interrupted(sigint), sigint, 130},
		{"SIGTERM wrapped", fmt.Errorf("demo: %w", interrupted(sigterm)), sigterm, 143},
		{"step limit", interrupted(trainer.ErrStepLimit), nil, 75},
		{"cancelled without a signal", interrupted(context.Canceled), nil, 75},
		{"another command cancelled by SIGINT", fmt.Errorf("validate: case 3: %w", context.Canceled), sigint, 130},
		{"cancelled without a signal, not training", context.Canceled, nil, 1},
	} {
		if got := exitCode(c.err, c.cause); got != c.want {
			t.Errorf("%s: exitCode(%v, %v) = %d, want %d", c.name, c.err, c.cause, got, c.want)
		}
	}
	if got := interrupted(sigterm).Error(); !strings.Contains(got, "interrupted by SIGTERM") || !strings.Contains(got, "step 757") {
		t.Errorf("the interruption reads %q", got)
	}
}

// exitRunConfig writes a tiny endless training run's config (no
// validation, its own splits file) into dir as name.
func exitRunConfig(t *testing.T, dir, name string) string {
	t.Helper()
	doc := `experiment: exit
seed: 3
data:
  dataset: ` + testutil.DemoDir(t) + `
  splits_file: splits.json
  workers: 1
augment:
  preset: light
model:
  in_channels: 1
  num_classes: 3
  features: [4, 8]
train:
  epochs: 100000
  iterations_per_epoch: 2
  batch_size: 2
  patch_size: [16, 16, 16]
validation:
  every: -1
`
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStopAfterStepsExitCode: the command tree, run in process with
// --stop-after-steps, returns the run's *trainer.Interrupted (main's exit
// status 75) after printing the resume command and the run's summary.
func TestStopAfterStepsExitCode(t *testing.T) {
	dir := t.TempDir()
	cfg := exitRunConfig(t, dir, "run.yaml")
	out, errb, err := runCmd(t, "--config", cfg, "--output-dir", filepath.Join(dir, "runs"), "--stop-after-steps", "1")
	var in *trainer.Interrupted
	if !errors.As(err, &in) || !errors.Is(err, trainer.ErrStepLimit) || in.Step != 1 {
		t.Fatalf("run stopped after 1 step returned %v\n%s\n%s", err, out, errb)
	}
	if code := exitCode(err, nil); code != exitStopped {
		t.Errorf("exit status %d, want %d", code, exitStopped)
	}
	for _, want := range []string{"to resume: train --config " + cfg, "1 steps, best validation Dice none yet"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSIGTERMExitsWith143AndResumes runs the real main (this test binary,
// through a symlink named "my train" in a directory named with a quote, a
// space and $) on a config and output directory with nasty names, sends
// it SIGTERM once it trains, and wants exit status 143 and a printed
// resume command that, pasted into sh, resumes that same run.
func TestSIGTERMExitsWith143AndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two training processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), `it's a "$dir"`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "my train")
	if err := os.Symlink(exe, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	cfg := exitRunConfig(t, dir, "run $1.yaml")
	out := filepath.Join(dir, `runs \ $(x)`)
	env := append(os.Environ(), "VOXTRAIN_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	child := exec.Command(link, "--config", cfg, "--output-dir", out, "--threads", "1")
	child.Env, child.Stdout, child.Stderr = env, &stdout, &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	// SIGTERM once an epoch is logged: past setup, and the signal is
	// caught (main registers first thing).
	runDir := filepath.Join(out, "exit", "fold_0", "run_0")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if fi, err := os.Stat(filepath.Join(runDir, "metrics.jsonl")); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			<-exited
			t.Fatalf("no epoch after 2 minutes\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		child.Process.Kill()
		<-exited
		t.Fatalf("still running 2 minutes after SIGTERM\n%s\n%s", stdout.String(), stderr.String())
	}
	if code := child.ProcessState.ExitCode(); code != 143 {
		t.Fatalf("exit status %d after SIGTERM, want 143 (%v)\n%s\n%s", code, child.ProcessState, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "train: stopped early (interrupted by SIGTERM)") {
		t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
	}
	_, resume, ok := strings.Cut(stdout.String(), "to resume: ")
	if !ok {
		t.Fatalf("no resume command:\n%s", stdout.String())
	}
	resume, _, _ = strings.Cut(resume, "\n")
	// Pasted into sh with a step limit: the same program, config and run
	// directory (a misquoted word would name another file or run), so it
	// resumes, takes one step and exits 75.
	sh := exec.Command("sh", "-c", resume+" --stop-after-steps 1")
	sh.Env = env
	var shOut bytes.Buffer
	sh.Stdout, sh.Stderr = &shOut, &shOut
	err = sh.Run()
	if code := sh.ProcessState.ExitCode(); code != exitStopped {
		t.Fatalf("sh -c %q: %v, exit status %d, want %d\n%s", resume, err, code, exitStopped, shOut.String())
	}
	log, err := os.ReadFile(filepath.Join(runDir, "train.log"))
	if err != nil || !strings.Contains(string(log), "msg=resumed") {
		t.Fatalf("the pasted command did not resume %s (%v):\n%s", runDir, err, shOut.String())
	}
}
