package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/voxtrain/voxtrain/internal/atomicfile"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nn"
)

// trainer is one run: what setup built, the loop's position and its
// per-epoch accumulators.
type trainer struct {
	cfg     *config.Config
	opt     Options
	dir     checkpoint.RunDir
	logFile *os.File
	console *console
	log     *slog.Logger
	model   *nn.UNet
	learner *nn.Learner
	loader  *data.Loader
	ckpts   *checkpoints
	val     *validator
	feed    *prefetcher // made by onTrainStart
	clock   clock
	state   State

	iters   int   // steps per epoch
	total   int64 // steps of the whole schedule
	stopped bool  // interrupted: ctx cancelled or StopAfterSteps reached
	// stopCause is why (context.Cause of the run's context or
	// ErrStepLimit), for the *Interrupted error.
	stopCause error
	res       Result
	// epochSteps is the steps this invocation took in the current epoch
	// (for rates; the epoch's loss is in state, which a resume restores).
	epochSteps int
	closers    []func()
}

// newTrainer builds a run: its directory and log, the dataset set up
// (splits, ct statistics, the prepared store), the resolved config
// written, the model, optimiser and data loader, and the state resumed
// from a checkpoint when o.Resume asks.
func newTrainer(ctx context.Context, cfg *config.Config, o Options) (_ *trainer, err error) {
	if o.Device == nil {
		return nil, errors.New("trainer: no device")
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	t := &trainer{cfg: cfg, opt: o, res: Result{LastDice: math.NaN(), BestDice: math.NaN()}}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if t.dir, err = checkpoint.NewRunDir(cfg.OutputDir, cfg.Experiment, cfg.Data.Fold, cfg.RunID); err != nil {
		return nil, err
	}
	t.res.RunDir = t.dir.Path
	if t.logFile, err = os.OpenFile(t.dir.TrainLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("open train log: %w", err)
	}
	t.closers = append(t.closers, func() { t.logFile.Close() })
	t.console = newConsole(o.Out, t.logFile, time.Duration(cfg.Train.LogEverySeconds*float64(time.Second)))
	t.log = t.console.logger()
	for _, w := range cfg.Warnings {
		t.log.Warn("config: " + w)
	}
	// ct statistics computed from the dataset go into the saved config, so
	// prediction preprocesses the same way without the dataset.
	if cfg.Data, err = data.Setup(ctx, cfg.Data, data.SetupOptions{Logger: t.log}); err != nil {
		return nil, err
	}
	text, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(t.dir.Config, []byte(text), 0o644); err != nil {
		return nil, err
	}
	t.log.Info("run", "dir", t.dir.Path, "device", o.Device.Name(), "version", o.Version)
	if err := t.buildModel(); err != nil {
		return nil, err
	}
	t.state = State{Seed: cfg.Seed, DataSeed: cfg.Seed, ConfigSHA256: sha256Hex(text), Version: o.Version}
	t.ckpts = &checkpoints{dir: t.dir, model: t.model, learner: t.learner, config: text, version: o.Version, log: t.log,
		saver: checkpoint.Saver{Dir: t.dir.Checkpoints, Policy: cfg.Checkpoint}}
	if err := t.ckpts.resume(o.Resume, &t.state); err != nil {
		return nil, err
	}
	if err := t.openData(); err != nil {
		return nil, err
	}
	t.total = int64(cfg.Train.Epochs) * int64(t.iters)
	t.state.TotalSteps = int(t.total)
	t.val = &validator{cfg: cfg.Validation, batch: cfg.Train.BatchSize, patch: cfg.Train.PatchSize, loss: cfg.Loss,
		model: t.model, loader: t.loader}
	t.closers = append(t.closers, t.val.close)
	return t, nil
}

// buildModel makes the U-Net and its optimiser on the device.
func (t *trainer) buildModel() error {
	cfg := t.cfg
	model, err := nn.NewUNet(t.opt.Device, cfg.Model, cfg.Seed)
	if err != nil {
		return err
	}
	t.model = model
	t.closers = append(t.closers, model.Free)
	learner, err := nn.NewLearner(model, cfg.Train.BatchSize, cfg.Train.PatchSize, cfg.Loss, cfg.Optim)
	if err != nil {
		return err
	}
	t.learner = learner
	t.closers = append(t.closers, learner.Free)
	t.log.Info("model", "parameters", model.NumParams(), "features", fmt.Sprint(model.Config().Features),
		"patch", fmt.Sprint(cfg.Train.PatchSize), "batch", cfg.Train.BatchSize)
	return nil
}

// openData opens the data loader and sets the steps per epoch.
func (t *trainer) openData() error {
	cfg := t.cfg
	loader, err := data.Open(cfg.Data, data.Options{Seed: cfg.Seed, Iterations: cfg.Train.IterationsPerEpoch,
		Patch: cfg.Train.PatchSize, Batch: cfg.Train.BatchSize, Augment: cfg.Augment, Alloc: t.opt.Alloc, Logger: t.log})
	if err != nil {
		return err
	}
	t.loader = loader
	t.closers = append(t.closers, func() { loader.Close() })
	t.log.Info("data", "cases", len(loader.Dataset().Cases), "train", len(loader.TrainCases()), "validation", len(loader.ValCases()),
		"source", loader.Source, "workers", loader.Pool().Workers())
	if t.model.Config().InChannels != loader.Channels() {
		return fmt.Errorf("model.in_channels is %d but the dataset's cases have %d channels", t.model.Config().InChannels, loader.Channels())
	}
	t.iters = loader.TrainBatchesPerEpoch()
	return nil
}

// close releases what setup and the loop built, last first.
func (t *trainer) close() {
	if t.feed != nil {
		t.feed.close()
	}
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
}
