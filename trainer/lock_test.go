package trainer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/cpu"
)

// runFiles returns every file of a run directory (path → content) and
// every directory (path → "dir"), the lock file left out.
func runFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == checkpoint.LockName:
		case d.IsDir():
			files[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			files[rel] = "-> " + target
			return err
		default:
			b, err := os.ReadFile(p)
			files[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles reports the differences between two runFiles snapshots.
func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		} else if a != b {
			t.Errorf("%s: %s changed (%d bytes → %d)", what, p, len(b), len(a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s was created", what, p)
		}
	}
}

// TestSecondTrainingIntoTheRunDirectoryIsRefused: while one training is
// running, a second into the same run directory (resuming, as a repeated
// `--resume auto` would) fails naming the first one's PID and host, and
// changes nothing in the directory; the first finishes unaffected, and
// once it has ended a new run can start there.
func TestSecondTrainingIntoTheRunDirectoryIsRefused(t *testing.T) {
	out := t.TempDir()
	first := tinyConfig(t, out)
	paused, resume := make(chan struct{}), make(chan struct{})
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(context.Background(), first, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: io.Discard,
			OnEpochEnd: func(e int) {
				if e == 1 {
					close(paused)
					<-resume
				}
			}})
		done <- outcome{res, err}
	}()
	select {
	case <-paused:
	case o := <-done:
		t.Fatalf("the first training ended before its first epoch did: %+v %v", o.res, o.err)
	}
	runDir := filepath.Join(out, "tiny", "fold_0", "run_0")
	before := runFiles(t, runDir)

	second := tinyConfig(t, out)
	second.Data.SplitsFile = first.Data.SplitsFile
	second.Train.Epochs = 3
	var log bytes.Buffer
	res, err := Run(context.Background(), second, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: &log, Resume: "auto"})
	close(resume)
	var le *checkpoint.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second training into a running one's directory: %+v, %v, want a *checkpoint.LockedError\n%s", res, err, log.String())
	}
	host, _ := os.Hostname()
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), "host " + host, runDir, "--run-id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	sameFiles(t, "refused second training", before, runFiles(t, runDir))

	o := <-done
	if o.err != nil || o.res.Epochs != 2 || o.res.Interrupted {
		t.Fatalf("the first training after the second was refused: %+v, %v", o.res, o.err)
	}
	loadFinal(t, first, o.res.RunDir)
	if n := strings.Count(readFile(t, filepath.Join(runDir, "metrics.jsonl")), "\n"); n != 2 {
		t.Errorf("metrics.jsonl has %d lines, want the first training's 2", n)
	}

	// The first has ended, so its lock is gone: the second can now resume.
	res = runTiny(t, second, Options{Resume: "auto"})
	if res.Epochs != 3 {
		t.Fatalf("the second training after the first ended: %+v", res)
	}
}

// TestLockReleasedOnInterruptAndError: the lock is given back when a run
// is interrupted (StopAfterSteps, as SIGTERM) and when setup fails after
// taking it, so the next run into the directory starts.
func TestLockReleasedOnInterruptAndError(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	res := runTiny(t, c, Options{StopAfterSteps: 2})
	if !res.Interrupted {
		t.Fatalf("%+v", res)
	}
	// Refused after the lock was taken: fresh over existing checkpoints.
	if _, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{}), Out: io.Discard}); err == nil {
		t.Fatal("a fresh run over existing checkpoints started")
	}
	res = runTiny(t, c, Options{Resume: "auto"})
	if res.Interrupted || res.Epochs != 2 {
		t.Fatalf("resumed run: %+v", res)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
