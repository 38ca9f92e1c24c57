package trainer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
)

// TestRefusedStartLeavesTheRunDirectoryAlone: a start refused over an
// existing run (fresh over its checkpoints; resuming into a model the
// checkpoint does not fit; resuming from a missing dataset)
// leaves config.yaml, train.log and everything else in the directory byte
// for byte as they were, and the run still resumes afterwards.
func TestRefusedStartLeavesTheRunDirectoryAlone(t *testing.T) {
	out := t.TempDir()
	c := tinyConfig(t, out)
	c.Train.Epochs = 1
	res := runTiny(t, c, Options{})
	before := runFiles(t, res.RunDir)
	for _, f := range []string{"config.yaml", "train.log"} {
		if before[f] == "" {
			t.Fatalf("the first run left no %s", f)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*config.Config)
		resume string
		want   string // in the error
	}{
		{"fresh over checkpoints", func(c *config.Config) { c.Train.Epochs = 2 }, "", "already holds checkpoints"},
		{"model mismatch", func(c *config.Config) { c.Model.Features = []int{4, 16} }, "auto", "resume"},
		{"channels mismatch", func(c *config.Config) { c.Model.InChannels = 2 }, filepath.Join(res.RunDir, "checkpoints", "last"), "resume"},
		{"no dataset", func(c *config.Config) { c.Data.Dataset = filepath.Join(out, "none") }, "auto", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tinyConfig(t, out)
			c.Train.Epochs = 1
			tc.change(c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			_, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: &log, Resume: tc.resume})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q\n%s", err, tc.want, log.String())
			}
			t.Logf("refused: %v", err)
			sameFiles(t, tc.name, before, runFiles(t, res.RunDir))
		})
	}
	c.Train.Epochs = 2
	if res := runTiny(t, c, Options{Resume: "auto"}); res.Epochs != 2 {
		t.Fatalf("resume after the refusals: %+v", res)
	}
	// The accepted run's lines logged before train.log was opened are in it,
	// after the first run's, and no refused run's are.
	log := readFile(t, filepath.Join(res.RunDir, "train.log"))
	if !strings.HasPrefix(log, before["train.log"]) || !strings.Contains(log[len(before["train.log"]):], "msg=resumed") {
		t.Errorf("train.log after the resume:\n%s", log)
	}
	if strings.Count(log, "msg=run ") != 2 {
		t.Errorf("train.log has %d runs' start lines, want 2:\n%s", strings.Count(log, "msg=run "), log)
	}
}

// TestRefusedStartCreatesNothing: a start refused in a run directory that
// does not exist yet (a model the dataset does not fit) leaves at most
// the directory and its lock file.
func TestRefusedStartCreatesNothing(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Model.InChannels = 2
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	_, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: &log})
	if err == nil || !strings.Contains(err.Error(), "in_channels") {
		t.Fatalf("error %v, want one about in_channels\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "in_channels") && !strings.Contains(log.String(), "model") {
		t.Errorf("nothing logged to the console:\n%s", log.String())
	}
	r, _ := checkpoint.RunDirAt(c.OutputDir, c.Experiment, c.Data.Fold, c.RunID)
	ents, err := os.ReadDir(r.Path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != checkpoint.LockName {
			t.Errorf("a refused start created %s in the run directory", e.Name())
		}
	}
}
