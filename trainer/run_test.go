package trainer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/tbevent"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
)

// tinyConfig is a small, fast run on the bundled demo data.
func tinyConfig(t *testing.T, out string) *config.Config {
	t.Helper()
	doc := `
experiment: tiny
seed: 3
data:
  dataset: ` + testutil.DemoDir(t) + `
  fold: 0
  num_folds: 5
  workers: 2
  normalization: zscore
augment:
  preset: light
model:
  in_channels: 1
  num_classes: 3
  features: [4, 8]
train:
  epochs: 2
  iterations_per_epoch: 3
  batch_size: 2
  patch_size: [16, 16, 16]
validation:
  every: 1
  mode: both
  iterations: 2
  max_cases: 2
  overlap: 0      # 36 windows a case instead of 96: a shorter race-enabled suite
`
	p := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	c.Data.SplitsFile = filepath.Join(t.TempDir(), "splits.json")
	c.OutputDir = out
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// runTiny runs c; a run stopped by o.StopAfterSteps is no failure.
func runTiny(t *testing.T, c *config.Config, o Options) *Result {
	t.Helper()
	if o.Device == nil {
		o.Device = cpu.New(cpu.Options{Threads: 2})
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	res, err := Run(context.Background(), c, o)
	var in *Interrupted
	if err != nil && !errors.As(err, &in) {
		t.Fatal(err)
	}
	if in != nil && (!errors.Is(err, ErrStepLimit) || !res.Interrupted) {
		t.Fatalf("run stopped early by %v, result %+v; only StopAfterSteps could stop it", err, res)
	}
	return res
}

// loadFinal reads the weights and optimiser state of a run's last
// checkpoint.
func loadFinal(t *testing.T, c *config.Config, runDir string) (model, opt []nn.HostTensor) {
	t.Helper()
	model, opt = expectedTensors(t, c)
	if _, err := checkpoint.Load(filepath.Join(runDir, "checkpoints", "last"), model, opt); err != nil {
		t.Fatal(err)
	}
	return model, opt
}

// expectedTensors returns the names and shapes (with buffers) of the
// weights and optimiser state of c's model.
func expectedTensors(t *testing.T, c *config.Config) (model, opt []nn.HostTensor) {
	t.Helper()
	dev := cpu.New(cpu.Options{Threads: 1})
	net, err := nn.NewUNet(dev, c.Model, c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	l, err := nn.NewLearner(net, c.Train.BatchSize, c.Train.PatchSize, c.Loss, c.Optim)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := nn.ExportParams(dev, net.Params())
	s, _ := l.Opt.State()
	return p, s
}

// TestResumeIsExact: 6 steps straight, against 4 steps (stopped mid-epoch
// as on SIGTERM, saving last), then a resumed run for the remaining 2,
// give bit-identical weights and optimiser state; with SGD and AdamW, and
// with nnU-Net's residual encoder (the whole run: training, validation,
// checkpoints).
func TestResumeIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains twice")
	}
	for _, opt := range []string{"sgd", "adamw"} {
		t.Run(opt, func(t *testing.T) { testResumeIsExact(t, opt, false) })
	}
	t.Run("residual encoder", func(t *testing.T) { testResumeIsExact(t, "sgd", true) })
}

func testResumeIsExact(t *testing.T, optimizer string, residual bool) {
	withOpt := func(c *config.Config) *config.Config {
		c.Optim.Name = optimizer
		if residual {
			c.Model.Encoder, c.Model.BlocksPerLevel, c.Model.DecoderConvs = config.EncoderResidual, []int{1, 2}, 1
		}
		return c
	}
	straight := withOpt(tinyConfig(t, t.TempDir()))
	a := runTiny(t, straight, Options{})
	if a.Interrupted || a.Steps != 6 || a.Epochs != 2 {
		t.Fatalf("straight run: %+v", a)
	}
	split := withOpt(tinyConfig(t, t.TempDir()))
	b := runTiny(t, split, Options{StopAfterSteps: 4, ResumeCommand: "train --resume auto"})
	if !b.Interrupted || b.Steps != 4 {
		t.Fatalf("first half: %+v", b)
	}
	// A different worker count and thread count must not matter.
	split.Data.Workers.N = 1
	c := runTiny(t, split, Options{Resume: "auto", Device: cpu.New(cpu.Options{Threads: 1})})
	if c.Interrupted || c.Steps != 6 || c.Epochs != 2 {
		t.Fatalf("resumed run: %+v", c)
	}
	ma, oa := loadFinal(t, straight, a.RunDir)
	mc, oc := loadFinal(t, split, c.RunDir)
	testutil.SameBits(t, "weights", ma, mc)
	testutil.SameBits(t, "optimiser state", oa, oc)
	// The epoch cut in two has the same training loss (its sum travels
	// in the state) and validation scores.
	ea, ec := metricsLines(t, a.RunDir), metricsLines(t, c.RunDir)
	if len(ea) != 2 || len(ec) != 2 {
		t.Fatalf("metrics lines: %d straight, %d split", len(ea), len(ec))
	}
	for i := range ea {
		if g, w := scores(ec[i]), scores(ea[i]); g != w {
			t.Errorf("epoch %d: split run %s, straight run %s", i+1, g, w)
		}
	}
}

// metricsLines returns every line of a run's metrics.jsonl, in file order
// (runlog.Read would hide a repeated epoch).
func metricsLines(t *testing.T, runDir string) []runlog.Epoch {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []runlog.Epoch
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e runlog.Epoch
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("metrics.jsonl line %d: %v", len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scores prints what must not depend on an interruption: the position,
// the learning rate, the losses and the validation scores (NaN prints as
// NaN on both sides).
func scores(e runlog.Epoch) string {
	deref := func(f *runlog.Float) any {
		if f == nil {
			return nil
		}
		return float64(*f)
	}
	return fmt.Sprintf("step %d lr %v train_loss %v val_loss %v val_dice %v mean %v",
		e.Step, e.LR, float64(e.TrainLoss), deref(e.ValLoss), e.ValDice, deref(e.ValDiceMean))
}

// TestResumeAfterAnEpochsLastStepWithoutWorkers: a run stopped right
// after an epoch's last step, before the epoch ended, resumes with a
// synchronous data stream (0 workers) and completes.
func TestResumeAfterAnEpochsLastStepWithoutWorkers(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Data.Workers = config.Workers{N: 0, Set: true}
	c.Validation.Every = -1
	if res := runTiny(t, c, Options{StopAfterSteps: 3}); !res.Interrupted || res.Steps != 3 || res.Epochs != 0 {
		t.Fatalf("stopped after the first epoch's 3 steps: %+v", res)
	}
	if res := runTiny(t, c, Options{Resume: "auto"}); res.Interrupted || res.Steps != 6 || res.Epochs != 2 {
		t.Fatalf("resumed: %+v", res)
	}
}

// TestCheckpointDirectoryRemovedMidRun: the output directory does not
// exist at start, and the checkpoint directory is deleted after the first
// epoch; the second epoch still saves.
func TestCheckpointDirectoryRemovedMidRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "does", "not", "exist", "yet")
	c := tinyConfig(t, out)
	var ckdir string
	res := runTiny(t, c, Options{OnEpochEnd: func(e int) {
		if e == 1 {
			ckdir = filepath.Join(out, "tiny", "fold_0", "run_0", "checkpoints")
			if err := os.RemoveAll(ckdir); err != nil {
				t.Error(err)
			}
		}
	}})
	if res.Epochs != 2 {
		t.Fatalf("%+v", res)
	}
	ents, err := os.ReadDir(ckdir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("no checkpoint after the directory was removed: %v %v", ents, err)
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "checkpoints", "last", "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.yaml", "train.log", "metrics.jsonl", "plots/loss.png", "plots/dice.png", "plots/timing.png"} {
		if _, err := os.Stat(filepath.Join(res.RunDir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "tensorboard")); !os.IsNotExist(err) {
		t.Errorf("tensorboard/ without logging.tensorboard: %v", err)
	}
}

// TestFreshRunRefusesExistingCheckpoints: starting a run over an existing
// one without --resume must not silently overwrite it.
func TestFreshRunRefusesExistingCheckpoints(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Train.Epochs = 1
	runTiny(t, c, Options{})
	var buf bytes.Buffer
	_, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{}), Out: &buf})
	if err == nil {
		t.Fatal("second fresh run over existing checkpoints succeeded")
	}
}

// TestFoldAllHasItsOwnDirectory: a run on every case (fold -1) must not
// share fold 0's directory, and it has nothing to validate on.
func TestFoldAllHasItsOwnDirectory(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Data.Fold = -1
	c.Train.Epochs = 1
	res := runTiny(t, c, Options{})
	if filepath.Base(filepath.Dir(res.RunDir)) != "fold_all" || res.Epochs != 1 {
		t.Fatalf("run %+v", res)
	}
	if !math.IsNaN(res.LastDice) {
		t.Fatalf("validated without validation cases: %v", res.LastDice)
	}
}

// TestCancelStopsCleanly: cancelling the context (what SIGINT/SIGTERM do)
// ends the run with an *Interrupted error carrying the cancellation's
// cause and the saved position (no other error), marks it interrupted,
// keeps a loadable last checkpoint and prints the resume command.
func TestCancelStopsCleanly(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Train.Epochs = 5
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigterm := errors.New("test: SIGTERM")
	var out bytes.Buffer
	res, err := Run(ctx, c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: &out, ResumeCommand: "train --resume auto",
		OnEpochEnd: func(e int) {
			if e == 1 {
				cancel(sigterm)
			}
		}})
	var in *Interrupted
	if !errors.As(err, &in) || !errors.Is(err, sigterm) {
		t.Fatalf("cancelled run returned %v, want an *Interrupted caused by %v", err, sigterm)
	}
	if !res.Interrupted || res.Epochs != 1 {
		t.Fatalf("%+v", res)
	}
	// The step after the cancel is taken and saved.
	if in.Epoch != 1 || in.StepInEpoch != 1 || in.Step != res.Steps || res.Steps != 4 {
		t.Fatalf("interrupted at %+v, result %+v; want epoch 1, 1 step into the next, step 4", in, res)
	}
	if !bytes.Contains(out.Bytes(), []byte("to resume: train --resume auto")) {
		t.Fatalf("no resume command in the output:\n%s", out.String())
	}
	model, opt := expectedTensors(t, c)
	if _, err := checkpoint.Load(filepath.Join(res.RunDir, "checkpoints", "last"), model, opt); err != nil {
		t.Fatal(err)
	}
}

// TestStopAfterStepsIsInterrupted: the step limit stops a run as a
// signal does, with ErrStepLimit as the cause.
func TestStopAfterStepsIsInterrupted(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Train.Epochs = 1
	res, err := Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: io.Discard, StopAfterSteps: 2})
	var in *Interrupted
	if !errors.As(err, &in) || in.Cause != ErrStepLimit || in.Step != 2 || in.StepInEpoch != 2 || in.Epoch != 0 {
		t.Fatalf("run stopped after 2 steps returned %v (%+v)", err, in)
	}
	if !res.Interrupted || res.Steps != 2 {
		t.Fatalf("%+v", res)
	}
	// The run completes: no error.
	if res := runTiny(t, c, Options{Resume: "auto"}); res.Interrupted || res.Epochs != 1 {
		t.Fatalf("resumed: %+v", res)
	}
}

// TestResumeWithChangedConfigWarns: resuming with a different config is
// allowed, logs which keys changed, and the checkpoints saved afterwards
// carry the new config's fingerprint (so a further resume is quiet).
func TestResumeWithChangedConfigWarns(t *testing.T) {
	out := t.TempDir()
	c := tinyConfig(t, out)
	c.Train.Epochs = 1
	runTiny(t, c, Options{})
	c.Train.Epochs = 2
	lr := c.Optim.BaseLR() * 0.5
	c.Optim.LR = &lr
	var log bytes.Buffer
	res := runTiny(t, c, Options{Resume: "auto", Out: &log})
	text, _ := os.ReadFile(filepath.Join(res.RunDir, "train.log"))
	all := log.String() + string(text)
	for _, want := range []string{"config differs", "train.epochs: 1 → 2", "optim.lr:"} {
		if !strings.Contains(all, want) {
			t.Errorf("resume with a changed config: log lacks %q:\n%s", want, all)
		}
	}
	log.Reset()
	res = runTiny(t, c, Options{Resume: "auto", Out: &log})
	text, _ = os.ReadFile(filepath.Join(res.RunDir, "train.log"))
	if strings.Count(log.String()+string(text), "config differs") > 1 {
		t.Errorf("a resume with the same config warned again:\n%s", log.String())
	}
}

// TestRunRefusesBadLabelsBeforeTheFirstStep: a label value beyond
// model.num_classes stops the run before any step, with an error naming
// the file, the value and the key; nothing is trained or saved.
func TestRunRefusesBadLabelsBeforeTheFirstStep(t *testing.T) {
	ids := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019", "hippocampus_024"}
	dir := testutil.DemoSubset(t, ids)
	bad := filepath.Join(dir, "labelsTr", ids[3]+".nii.gz")
	h, v, err := nifti.ReadFloat32(bad)
	if err != nil {
		t.Fatal(err)
	}
	v[len(v)/2] = 7
	h.Datatype = nifti.Float32
	if err := nifti.WriteFloat32(bad, h, v); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	c := tinyConfig(t, out)
	c.Data.Dataset = dir
	_, err = Run(context.Background(), c, Options{Device: cpu.New(cpu.Options{Threads: 2}), Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), bad+": label value 7 in 1 voxels, outside 0..2 (model.num_classes: 3)") {
		t.Fatalf("Run: %v, want an error naming %s, the value and model.num_classes", err, bad)
	}
	ckpts, _ := filepath.Glob(filepath.Join(out, "*", "*", "*", "checkpoints", "*"))
	if len(ckpts) != 0 {
		t.Errorf("checkpoints written by a refused run: %v", ckpts)
	}
}

// TestTensorBoardScalars: with logging.tensorboard each start of a run
// writes its own event file in <run>/tensorboard; after a run of two
// epochs and a resume from the first epoch's checkpoint, which repeats
// epoch 2, TensorBoard's view of the directory (tbevent.ReadScalars, the
// purge checked against TensorBoard's reader in runlog's fixture) has one
// point per epoch for every tag, at the epoch's global step, equal to
// metrics.jsonl's values. A resume with nothing left to do writes no file.
func TestTensorBoardScalars(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	c.Logging.TensorBoard = true
	res := runTiny(t, c, Options{})
	epoch1, err := filepath.Glob(filepath.Join(res.RunDir, "checkpoints", "ckpt-e0001-*"))
	if err != nil || len(epoch1) != 1 {
		t.Fatalf("epoch 1 checkpoint: %v %v", epoch1, err)
	}
	runTiny(t, c, Options{Resume: epoch1[0]})
	runTiny(t, c, Options{Resume: "auto"}) // already complete

	dir := filepath.Join(res.RunDir, "tensorboard")
	files, err := tbevent.Files(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("event files %v, %v; want one per start that trained", files, err)
	}
	for i, from := range []int64{0, 3} {
		evs, err := tbevent.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) < 3 || evs[0].FileVersion != tbevent.FileVersion || evs[1].SessionLog != tbevent.SessionStart || evs[1].Step != from+1 {
			t.Fatalf("%s begins %+v, want the file version, then START at step %d", files[i], evs[:min(len(evs), 2)], from+1)
		}
	}
	eps, err := runlog.Read(filepath.Join(res.RunDir, "metrics.jsonl"))
	if err != nil || len(eps) != 2 {
		t.Fatalf("metrics %v %v", eps, err)
	}
	got, err := tbevent.ReadScalars(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]tbevent.Point{}
	for _, e := range eps {
		for _, v := range runlog.Scalars(e) {
			want[v.Tag] = append(want[v.Tag], tbevent.Point{Step: e.Step, Value: v.Simple})
		}
	}
	for _, tag := range []string{"epoch", "train/loss", "train/lr", "val/loss", "val/dice_mean", "val/dice/class_1", "val/dice/class_2", "time/epoch_s"} {
		if len(want[tag]) != 2 {
			t.Fatalf("metrics.jsonl lacks %s on every epoch: %+v", tag, eps)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d tags, want %d", len(got), len(want))
	}
	for tag, wp := range want {
		gp := got[tag]
		if len(gp) != len(wp) {
			t.Errorf("%s: %d points, want one per epoch (%d)", tag, len(gp), len(wp))
			continue
		}
		for i := range wp {
			if gp[i].Step != wp[i].Step || !(gp[i].Value == wp[i].Value || gp[i].Value != gp[i].Value && wp[i].Value != wp[i].Value) {
				t.Errorf("%s point %d: step %d value %v, want step %d value %v (metrics.jsonl)", tag, i, gp[i].Step, gp[i].Value, wp[i].Step, wp[i].Value)
			}
		}
	}
	if got["time/epoch_s"][1].WallTime < got["time/epoch_s"][0].WallTime {
		t.Errorf("wall times go back: %+v", got["time/epoch_s"])
	}
}

// TestRunNamesTheClasses: the epoch lines of train.log give the per-class
// Dice under the dataset.json label names (the demo's Anterior and
// Posterior), not as a bare list of numbers, and the run draws its
// learning-rate plot beside the others.
func TestRunNamesTheClasses(t *testing.T) {
	c := tinyConfig(t, t.TempDir())
	res := runTiny(t, c, Options{})
	text, err := os.ReadFile(filepath.Join(res.RunDir, "train.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.Contains(line, "msg=epoch") || !strings.Contains(line, "val_dice=") {
			continue
		}
		n++
		_, v, ok := strings.Cut(line, `val_dice_per_class="`)
		v, _, _ = strings.Cut(v, `"`)
		f := strings.Fields(v)
		if !ok || len(f) != 2 || !strings.HasPrefix(f[0], "Anterior=") || !strings.HasPrefix(f[1], "Posterior=") {
			t.Errorf("epoch line without the class names: %s", line)
		}
	}
	if n != c.Train.Epochs {
		t.Errorf("%d validated epoch lines in train.log, want %d:\n%s", n, c.Train.Epochs, text)
	}
	want := filepath.Join(res.RunDir, "plots", "lr.png")
	found := false
	for _, p := range res.Plots {
		found = found || p == want
	}
	if _, err := os.Stat(want); err != nil || !found {
		t.Errorf("plots %v, want %s among them: %v", res.Plots, want, err)
	}
}

func TestPerClassDice(t *testing.T) {
	d := []runlog.Float{0.5, runlog.Float(math.NaN()), 0.25}
	if got, want := perClassDice(d, nil), "class_1=0.5000 class_2=NaN class_3=0.2500"; got != want {
		t.Errorf("unnamed: %q, want %q", got, want)
	}
	if got, want := perClassDice(d, []string{"left kidney", "", "a=b"}), "left_kidney=0.5000 class_2=NaN a_b=0.2500"; got != want {
		t.Errorf("named: %q, want %q", got, want)
	}
}
