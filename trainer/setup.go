package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/voxtrain/voxtrain/internal/atomicfile"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
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
	// job is the data-parallel job the run is one rank of (nil: a run of
	// one process); see dist.go.
	job   *job
	feed  *prefetcher         // made by onTrainStart
	tb    *runlog.TensorBoard // made by onTrainStart with logging.tensorboard
	clock clock
	state State

	iters   int   // steps per epoch
	total   int64 // steps of the whole schedule
	stopped bool  // interrupted: ctx cancelled or StopAfterSteps reached
	// stopCause is why (context.Cause of the run's context or
	// ErrStepLimit), for the *Interrupted error.
	stopCause error
	res       Result
	// classNames are the foreground classes' names from the dataset's
	// description, for the log and the plots (nil: none named).
	classNames []string
	// epochSteps is the steps this invocation took in the current epoch
	// (for rates, of the global batch in a job; the epoch's loss is in
	// state, which a resume restores).
	epochSteps int
	closers    []func()
}

// newTrainer builds a run: its directory locked, the dataset set up
// (splits, ct statistics, the prepared store), the model, optimiser and
// data loader, and the state resumed from a checkpoint when o.Resume asks
// or the weights of a fine-tuning loaded (train.init_weights); then, every
// check passed, the resolved config and train.log written
// (accept).
//
// Check first, write after: up to accept nothing in the run directory is
// created or changed besides the lock, so a refused start (a fresh run
// over checkpoints, a checkpoint or init weights that do not fit the model,
// a model that does not fit the dataset) leaves an existing run as it was.
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
	if t.dir, err = checkpoint.RunDirAt(cfg.OutputDir, cfg.Experiment, cfg.Data.Fold, cfg.RunID); err != nil {
		return nil, err
	}
	t.res.RunDir = t.dir.Path
	// A data-parallel job (world size > 1): rank 0 checks and sets up the
	// run alone and joins after, so that the others, joining first and
	// waiting there for it (up to dist's join timeout), find the splits
	// and the prepared store written and only read them; then every rank
	// builds the same model and compares its starting point with rank 0's.
	env, err := jobEnv(o)
	if err != nil {
		return nil, err
	}
	if err := checkDistEnv(env, o); err != nil {
		return nil, err
	}
	rank := env.Rank
	if rank != 0 {
		if err := t.join(ctx, env); err != nil {
			return nil, err
		}
	}
	// Two trainings in one run directory would prune each other's
	// checkpoints and interleave metrics.jsonl: hold its lock for the whole
	// run. Its closer comes first, so it runs last, after every write.
	// In a job only rank 0 writes, and only it holds the lock: the other
	// ranks are the same training, not rivals.
	var lockWarning string
	if rank == 0 {
		lock, err := t.dir.Lock()
		if locked := (*checkpoint.LockedError)(nil); errors.As(err, &locked) {
			return nil, fmt.Errorf("%w; wait for it to end, or choose another --run-id or --output-dir", err)
		}
		if err != nil {
			return nil, err
		}
		t.closers = append(t.closers, func() { lock.Release() })
		lockWarning = lock.Warning
	}
	// train.log is opened by accept, but closed after everything that
	// might still log while closing.
	t.closers = append(t.closers, func() {
		if t.logFile != nil {
			t.logFile.Close()
		}
	})
	every := time.Duration(cfg.Train.LogEverySeconds * float64(time.Second))
	t.console = newConsole(o.Out, every)
	t.log = t.console.logger()
	if rank != 0 {
		// Rank 0 speaks for the job; the others show their warnings and
		// errors only (train launch prefixes each line with its rank).
		t.console = newConsole(io.Discard, every)
		t.log = slog.New(slog.NewTextHandler(o.Out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if lockWarning != "" {
		t.log.Warn(lockWarning)
	}
	for _, w := range cfg.Warnings {
		t.log.Warn("config: " + w)
	}
	// Before the dataset's setup, which can take long.
	initWeights, err := checkInit(t.dir, cfg.Train.InitWeights, o.Resume, o.InitWeightsFlag)
	if err != nil {
		return nil, err
	}
	if err := refuseOverwrite(t.dir, o.Resume); err != nil {
		return nil, err
	}
	t.log.Info("run", "dir", t.dir.Path, "device", o.Device.Name(), "version", o.Version)
	// ct statistics computed from the dataset go into the saved config, so
	// prediction preprocesses the same way without the dataset.
	// Generated splits go to the experiment folder, shared by its folds,
	// never into the dataset (it may be read-only); the saved config then
	// names that file.
	if cfg.Data, err = data.Setup(ctx, cfg.Data, data.SetupOptions{Logger: t.log, SplitsDir: t.dir.Experiment}); err != nil {
		return nil, err
	}
	if err := fillRegions(cfg); err != nil {
		return nil, err
	}
	// Every case's labels, geometry and voxels, before the first step: a
	// bad file is named now, not after hours of training on it (by rank 0,
	// for the job).
	if rank == 0 {
		if err := data.Verify(ctx, cfg.Data, data.VerifyOptions{NumClasses: cfg.Model.NumClasses, IgnoreLabel: max(cfg.Loss.Ignore(), 0), Patch: cfg.Train.PatchSize, Logger: t.log}); err != nil {
			return nil, err
		}
		if err := t.join(ctx, env); err != nil {
			return nil, err
		}
	}
	text, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	if err := t.buildModel(); err != nil {
		return nil, err
	}
	t.state = State{Seed: cfg.Seed, DataSeed: cfg.Seed, ConfigSHA256: sha256Hex(text), Version: o.Version}
	t.ckpts = &checkpoints{dir: t.dir, model: t.model, learner: t.learner, config: text, version: o.Version, log: t.log,
		saver: checkpoint.Saver{Dir: t.dir.Checkpoints, Policy: cfg.Checkpoint}}
	if err := t.ckpts.resume(o.Resume, &t.state); err != nil {
		return nil, err
	}
	if initWeights {
		if err := t.ckpts.initFrom(cfg.Train.InitWeights, cfg.Train.InitMismatch, initName(o.InitWeightsFlag), &t.state); err != nil {
			return nil, err
		}
	} else if cfg.Train.InitWeights != "" {
		t.log.Info("init weights not loaded: the run continues from its checkpoint (train.init_weights applies to a new run)",
			"init_weights", cfg.Train.InitWeights)
	}
	if gb := cfg.Train.BatchSize * t.job.size(); t.state.GlobalBatch != gb {
		if t.state.GlobalBatch != 0 && t.state.StepInEpoch > 0 {
			t.log.Warn("resume with another global batch (train.batch_size × ranks): the rest of the epoch takes the new one's samples, not the ones the run would have",
				"was", t.state.GlobalBatch, "now", gb)
		}
		t.state.GlobalBatch = gb
	}
	if err := t.openData(); err != nil {
		return nil, err
	}
	if err := t.job.checkSame(o.Device, t.learner, t.state); err != nil {
		return nil, err
	}
	t.total = int64(cfg.Train.Epochs) * int64(t.iters)
	t.state.TotalSteps = int(t.total)
	t.val = &validator{cfg: cfg.Validation, batch: cfg.Train.BatchSize, patch: cfg.Train.PatchSize, loss: cfg.Loss,
		model: t.model, loader: t.loader, job: t.job}
	t.closers = append(t.closers, t.val.close)
	if err := t.accept(text); err != nil {
		return nil, err
	}
	return t, nil
}

// accept writes what a run keeps in its directory once every check has
// passed: the directory's subdirectories, the resolved config (text) and
// train.log, which starts with the lines logged so far.
func (t *trainer) accept(text string) (err error) {
	if !t.job.writer() {
		return nil
	}
	if err := t.dir.MkdirAll(); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(t.dir.Config, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write the run's config: %w", err)
	}
	if t.logFile, err = os.OpenFile(t.dir.TrainLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("open train log: %w", err)
	}
	if err := t.console.setFile(t.logFile); err != nil {
		return fmt.Errorf("write train log: %w", err)
	}
	return nil
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
	if err := checkMemory(t.opt.Device, model, cfg.Train.BatchSize, cfg.Train.PatchSize); err != nil {
		return err
	}
	learner, err := nn.NewLearner(model, cfg.Train.BatchSize, cfg.Train.PatchSize, cfg.Loss, cfg.Optim)
	if err != nil {
		return err
	}
	t.learner = learner
	t.closers = append(t.closers, learner.Free)
	if t.job != nil {
		learner.ReduceGrads = func(ps []*nn.Param) error { return t.job.reduceGrads(t.opt.Device, ps) }
		overlap, err := distOverlap(os.Getenv)
		if err != nil {
			return err
		}
		// Learner.Sync, where set, takes ReduceGrads' place: the same sums,
		// overlapped with the backward pass.
		if learner.Sync, err = t.job.gradSync(model.Params(), overlap); err != nil {
			return err
		}
		if learner.Loss.HasBatchTerms() && t.job.size() > 1 {
			// The batch Dice and clDice of the global batch, and with an
			// ignore label the cross-entropy's mean over the global batch's
			// kept voxels: their sums are summed over the ranks at every
			// step, per weighted output.
			learner.Loss.SetBatchReducer(t.job.size(), t.job.sumDiceSums)
		}
	}
	t.log.Info("model", "parameters", model.NumParams(), "features", fmt.Sprint(model.Config().Features),
		"patch", fmt.Sprint(cfg.Train.PatchSize), "batch", cfg.Train.BatchSize)
	return nil
}

// checkMemory refuses a batch and patch whose training workspace the
// device cannot hold (where it can say how much it has), naming the keys
// and both sizes: the allocation would otherwise end the process with
// the runtime's out-of-memory crash.
func checkMemory(dev nn.Device, model *nn.UNet, batch int, patch [3]int) error {
	mr, ok := dev.(nn.MemoryReporter)
	if !ok {
		return nil
	}
	avail, ok := mr.MemoryAvailable()
	if !ok {
		return nil
	}
	need, err := model.WorkspaceBytes(batch, patch, true)
	if err != nil {
		return err // NewLearner names the patch problem
	}
	if need > avail {
		return fmt.Errorf("train.patch_size %v with train.batch_size %d: the network's activations alone need %s, but %s has %s available; make the patch or the batch smaller",
			patch, batch, fmtBytes(need), dev.Name(), fmtBytes(avail))
	}
	return nil
}

// fmtBytes writes n in binary units (KiB .. TiB).
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 3 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[u])
}

// openData opens the data loader and sets the steps per epoch.
func (t *trainer) openData() error {
	cfg := t.cfg
	loader, err := data.Open(cfg.Data, data.Options{Seed: cfg.Seed, Iterations: cfg.Train.IterationsPerEpoch,
		Patch: cfg.Train.PatchSize, Batch: cfg.Train.BatchSize, Ranks: t.job.size(), Rank: t.job.rank(),
		Augment: cfg.Augment, IgnoreLabel: max(cfg.Loss.Ignore(), 0), Alloc: t.opt.Alloc, Logger: t.log})
	if err != nil {
		return err
	}
	t.loader = loader
	t.closers = append(t.closers, func() { loader.Close() })
	t.classNames = runlog.ClassNames(loader.Dataset().LabelNames)
	if names := loader.Dataset().MultiLabelNames; names != nil {
		// Multi-label Dice is per channel, every channel a class.
		t.classNames = names
	}
	t.log.Info("data", "cases", len(loader.Dataset().Cases), "train", len(loader.TrainCases()), "validation", len(loader.ValCases()),
		"source", loader.Source, "workers", loader.Pool().Workers())
	if t.model.Config().InChannels != loader.Channels() {
		return fmt.Errorf("model.in_channels is %d but the dataset's cases have %d channels", t.model.Config().InChannels, loader.Channels())
	}
	if loader.Dataset().HasUnknown() {
		// Crops that leave classes unknown (a manifest's unlisted_classes:
		// unknown): the loss leaves them out per sample, and in a job its
		// counts are then summed over the ranks too.
		if err := t.learner.Loss.AllowUnknown(); err != nil {
			return err
		}
		if t.job.size() > 1 {
			t.learner.Loss.SetBatchReducer(t.job.size(), t.job.sumDiceSums)
		}
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

// jobEnv is where the run stands in a data-parallel job: Options.Comm's
// rank and size when given, else the environment's (dist.FromEnviron:
// torchrun's or SLURM's variables; none: a run of one process).
func jobEnv(o Options) (dist.Env, error) {
	if o.Comm != nil {
		return dist.Env{Rank: o.Comm.Rank(), WorldSize: o.Comm.Size(), Source: "Options.Comm"}, nil
	}
	env, err := dist.FromEnviron()
	if err != nil {
		return dist.Env{}, fmt.Errorf("data-parallel job: %w", err)
	}
	return env, nil
}

// join makes the run a rank of the job env describes (nothing for a job
// of one process): Options.Comm, else a communicator joined here and left
// when the run closes.
func (t *trainer) join(ctx context.Context, env dist.Env) error {
	if env.WorldSize <= 1 && (t.opt.Comm != nil || !forcedNCCL(os.Getenv, t.opt.Device)) {
		return nil
	}
	j := &job{comm: t.opt.Comm, ctx: context.WithoutCancel(ctx)}
	if j.comm != nil {
		// Joined already: this barrier stands for the join's wait, rank 0
		// reaching it after its setup, the others before theirs.
		if err := j.barrier("data-parallel job: wait for rank 0's setup"); err != nil {
			return err
		}
	} else {
		c, err := newComm(ctx, env, t.opt.Device, t.log.Warn)
		if err != nil {
			return fmt.Errorf("data-parallel job (%s's variables): %w", env.Source, err)
		}
		j.comm, j.own = c, true
		t.closers = append(t.closers, func() { c.Close() })
	}
	t.job = j
	b := t.cfg.Train.BatchSize
	args := []any{"rank", env.Rank, "world_size", env.WorldSize, "local_rank", env.LocalRank,
		"global_batch", fmt.Sprintf("%d×%d", env.WorldSize, b), "variables", env.Source}
	if t.opt.Comm == nil {
		args = append(args, "store", env.Addr())
	}
	if t.log != nil {
		t.log.Info("data-parallel job", args...)
	} else {
		// Before the logger (a rank other than 0): straight to the output.
		line := "data-parallel job:"
		for i := 0; i+1 < len(args); i += 2 {
			line += fmt.Sprintf(" %v=%v", args[i], args[i+1])
		}
		fmt.Fprintln(t.opt.Out, line)
	}
	return nil
}

// fillRegions copies nnU-Net regions' regions_class_order from the
// dataset's dataset.json into model.regions_class_order, so the saved
// config and the checkpoints carry it and prediction paints label maps
// without the dataset; one given in the config must be the dataset's.
func fillRegions(cfg *config.Config) error {
	if !cfg.Model.MultiLabel() || cfg.Data.Manifest != "" || cfg.Data.Dataset == "" {
		return nil
	}
	order, err := data.RegionsClassOrder(cfg.Data.Dataset)
	if err != nil || order == nil {
		return err // plain classes: opening the data reports the mismatch
	}
	if have := cfg.Model.RegionsClassOrder; have != nil && !slices.Equal(have, order) {
		return fmt.Errorf("model.regions_class_order: %v, but %s has %v", have, filepath.Join(cfg.Data.Dataset, "dataset.json"), order)
	}
	cfg.Model.RegionsClassOrder = order
	return cfg.Model.Validate()
}

// checkDistEnv reads the data-parallel job's environment variables
// (VOXTRAIN_DIST_TIMEOUT, _JOIN_TIMEOUT, _BACKEND, _OVERLAP) before
// anything else, so a misspelt value fails at once rather than after rank
// 0 has verified every case.
func checkDistEnv(env dist.Env, o Options) error {
	if env.WorldSize <= 1 && !forcedNCCL(os.Getenv, o.Device) {
		return nil
	}
	if _, err := commOptions(os.Getenv); err != nil {
		return err
	}
	if _, err := distBackend(os.Getenv); err != nil {
		return err
	}
	_, err := distOverlap(os.Getenv)
	return err
}
