package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// killConfig saves a checkpoint after every step (one-step epochs, no
// validation), so a kill at a random moment often lands inside a save.
func killConfig(t *testing.T, out string) *config.Config {
	c := tinyConfig(t, out)
	c.Train.Epochs = 100000
	c.Train.IterationsPerEpoch = 1
	c.Validation.Every = -1
	if s := os.Getenv("VOXTRAIN_KILL_SPLITS"); s != "" {
		c.Data.SplitsFile = s
	}
	return c
}

// TestKillChildTraining is the child side of TestSIGKILLDuringSaves.
func TestKillChildTraining(t *testing.T) {
	out := os.Getenv("VOXTRAIN_KILL_OUT")
	if out == "" {
		t.Skip("child process of TestSIGKILLDuringSaves")
	}
	c := killConfig(t, out)
	_, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{Threads: 1}), Resume: "auto", Out: io.Discard})
	t.Fatalf("the child's run ended: %v", err)
}

// TestSIGKILLDuringSaves kills a child training process (this test binary
// running TestKillChildTraining, resuming each time) with SIGKILL at random
// moments, at least 50 times; after every kill the latest checkpoint must
// load, and its state must match the weights' step.
func TestSIGKILLDuringSaves(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 50 training processes (about 30 s); the checkpoint package's own kill test runs under -race")
	}
	testutil.SkipUnderRace(t, "kills 50 training processes (about 30 s); the checkpoint package's own kill test runs under -race")
	out := t.TempDir()
	splits := filepath.Join(t.TempDir(), "splits.json")
	c := killConfig(t, out)
	ckdir := filepath.Join(out, "tiny", "fold_0", "run_0", "checkpoints")
	// The children die by SIGKILL, so the testing package never removes
	// their t.TempDir()s: give them a TMPDIR inside this test's own.
	childTmp := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	kills, lastStep := 0, int64(-1)
	for kills < 50 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildTraining$", "-test.count=1")
		cmd.Env = append(os.Environ(), "VOXTRAIN_KILL_OUT="+out, "VOXTRAIN_KILL_SPLITS="+splits, "TMPDIR="+childTmp)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let the child get going (the first start also writes the splits),
		// then kill it at a random moment of its save-heavy loop.
		time.Sleep(time.Duration(150+rng.IntN(250)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL: %v", err)
		}
		kills++
		if !hasCheckpoints(ckdir) {
			continue
		}
		model, opt := loadFinalLatest(t, c, ckdir)
		if model.Step < lastStep {
			t.Fatalf("kill %d: latest checkpoint went back from step %d to %d", kills, lastStep, model.Step)
		}
		lastStep = model.Step
		_ = opt
	}
	if lastStep < 1 {
		t.Fatalf("no checkpoint survived %d kills (the children never trained)", kills)
	}
	t.Logf("%d kills; the latest checkpoint always loaded; training reached step %d", kills, lastStep)
}

// latestInfo is what the kill test checks of a loaded checkpoint.
type latestInfo struct{ Step int64 }

// loadFinalLatest loads the latest checkpoint in dir with the model's and
// optimiser's expected tensors and checks state.json against the manifest.
func loadFinalLatest(t *testing.T, c *config.Config, dir string) (latestInfo, []nn.HostTensor) {
	t.Helper()
	model, opt := expectedTensors(t, c)
	l, err := checkpoint.LoadLatest(dir, model, opt)
	if err != nil {
		t.Fatalf("latest checkpoint does not load: %v", err)
	}
	var st State
	if err := json.Unmarshal(l.State, &st); err != nil {
		t.Fatalf("%s: state.json: %v", l.Dir, err)
	}
	if st.Step != l.Step || !strings.Contains(l.Dir, "ckpt-") {
		t.Fatalf("%s: state step %d, manifest step %d", l.Dir, st.Step, l.Step)
	}
	return latestInfo{Step: l.Step}, opt
}
