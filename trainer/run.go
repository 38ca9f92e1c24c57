// Package trainer is voxtrain's training loop: epochs of a fixed number of
// pipelined steps (the next batch is copied to the device while the current
// one computes), validation on the held-out fold through the same worker
// pool (patches, or whole cases by sliding window), the per-epoch split of
// wall time into data-wait, host→device copy, compute and validation,
// checkpoints that are always whole, exact resume and clean interruption.
package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/feed"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
)

// Options are what a run needs besides its config.
type Options struct {
	// Device runs the model (cpu.New or gpu.New); Alloc supplies batch
	// buffers (pinned memory for CUDA; nil: aligned Go memory).
	Device nn.Device
	Alloc  data.Allocator
	// Resume is "" (start fresh; an existing checkpoint is an error),
	// "auto" (the run's latest complete checkpoint, if any) or a
	// checkpoint path.
	Resume string
	// Out receives the progress display (default os.Stdout).
	Out io.Writer
	// Monitor samples the GPU (nil: none).
	Monitor *gpumon.Monitor
	// Version is stored in checkpoints.
	Version string
	// ResumeCommand is printed when the run is interrupted.
	ResumeCommand string
	// StopAfterSteps ends the run after this many optimiser steps in this
	// invocation, saving `last` as an interruption does (0: no limit). For
	// tests and for time-boxed jobs.
	StopAfterSteps int
	// OnEpochEnd, when set, is called after each epoch's checkpoint with the
	// number of completed epochs (for embedding programs and tests).
	OnEpochEnd func(epoch int)
}

// Result describes a finished (or interrupted) run.
type Result struct {
	RunDir      string
	Epochs      int   // completed epochs
	Steps       int64 // optimiser steps in total
	Interrupted bool
	// LastDice is the mean validation Dice of the last validation (NaN if
	// none); BestDice the best so far.
	LastDice, BestDice float64
	Plots              []string
}

// Run trains according to cfg (already resolved). It returns with
// Interrupted set, after saving `last`, when ctx is cancelled (SIGINT,
// SIGTERM) or StopAfterSteps is reached.
func Run(ctx context.Context, cfg *Config, o Options) (res *Result, err error) {
	if o.Device == nil {
		return nil, errors.New("trainer: no device")
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	run, err := checkpoint.NewRun(cfg.OutputDir, cfg.Experiment, cfg.Data.Fold, cfg.RunID)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(run.TrainLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open train log: %w", err)
	}
	defer logFile.Close()
	con := newConsole(o.Out, logFile, time.Duration(cfg.Train.LogEverySeconds*float64(time.Second)))
	log := con.logger()

	// ct statistics computed from the dataset go into the saved config, so
	// prediction preprocesses the same way without the dataset.
	if cfg.Data, err = data.ResolveCTStatistics(ctx, cfg.Data, log); err != nil {
		return nil, err
	}
	text, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	if err := checkpoint.WriteFileAtomic(run.Config, []byte(text), 0o644); err != nil {
		return nil, err
	}
	dev := o.Device
	log.Info("run", "dir", run.Dir, "device", dev.Name(), "version", o.Version)

	model, err := nn.NewUNet(dev, cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	defer model.Free()
	patch := cfg.Train.PatchSize
	learner, err := nn.NewLearner(model, cfg.Train.BatchSize, patch, cfg.Loss, cfg.Optim)
	if err != nil {
		return nil, err
	}
	defer learner.Free()
	log.Info("model", "parameters", model.NumParams(), "features", fmt.Sprint(model.Config().Features),
		"patch", fmt.Sprint(patch), "batch", cfg.Train.BatchSize)

	total := cfg.Train.Epochs * cfg.Train.IterationsPerEpoch
	st := State{TotalSteps: total, Seed: cfg.Seed, DataSeed: cfg.Data.Seed, ConfigSHA256: sha256Hex(text), Version: o.Version}
	if err := resume(o.Resume, run, model, learner, &st, text, log); err != nil {
		return nil, err
	}
	st.TotalSteps = total

	loader, err := data.Open(cfg.Data, data.Options{Patch: patch, Batch: cfg.Train.BatchSize, Augment: cfg.Augment,
		Alloc: o.Alloc, Logger: log})
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	log.Info("data", "cases", len(loader.Dataset().Cases), "train", len(loader.TrainCases()), "validation", len(loader.ValCases()),
		"source", loader.Source, "workers", loader.Pool().Workers())
	if model.Config().InChannels != loader.Channels() {
		return nil, fmt.Errorf("model.in_channels is %d but the dataset's cases have %d channels", model.Config().InChannels, loader.Channels())
	}

	r := &runner{cfg: cfg, o: o, run: run, log: log, con: con, dev: dev, model: model, learner: learner,
		loader: loader, st: st, saver: checkpoint.Saver{Dir: run.Checkpoints, Policy: cfg.Checkpoint}, text: text}
	defer r.close()
	return r.train(ctx)
}

// resume loads the checkpoint o.Resume names into the model, optimiser and
// state; "" and "auto" without a checkpoint start fresh. text is the
// run's resolved config: when it differs from the checkpoint's, the
// changed keys are logged as a warning.
func resume(what string, run checkpoint.Run, model *nn.UNet, learner *nn.Learner, st *State, text string, log *slog.Logger) error {
	if what == "" {
		if hasCheckpoints(run.Checkpoints) {
			return fmt.Errorf("%s already holds checkpoints: resume with --resume auto, or choose another --run-id or --output-dir", run.Checkpoints)
		}
		return nil
	}
	// The expected names and shapes, with buffers the load fills.
	dev := model.Device()
	params, err := nn.ExportParams(dev, model.Params())
	if err != nil {
		return err
	}
	opt, err := learner.Opt.State()
	if err != nil {
		return err
	}
	mt, ot := toCheckpoint(params), toCheckpoint(opt)
	var l *checkpoint.Loaded
	switch what {
	case "auto":
		l, err = checkpoint.LoadLatest(run.Checkpoints, mt, ot)
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			log.Info("resume auto: no checkpoint yet, starting fresh")
			return nil
		}
	default:
		l, err = checkpoint.Load(what, mt, ot)
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, s := range l.Skipped {
		log.Warn("resume: skipped a damaged checkpoint", "reason", s)
	}
	if err := nn.ImportParams(dev, model.Params(), fromCheckpoint(mt)); err != nil {
		return fmt.Errorf("resume %s: %w", l.Dir, err)
	}
	if err := learner.Opt.LoadState(fromCheckpoint(ot)); err != nil {
		return fmt.Errorf("resume %s: %w", l.Dir, err)
	}
	if l.State == nil {
		return fmt.Errorf("resume %s: no training state (a bare weights file cannot be resumed; use it to fine-tune instead)", l.Dir)
	}
	now := st.ConfigSHA256
	if err := json.Unmarshal(l.State, st); err != nil {
		return fmt.Errorf("resume %s: state.json: %w", l.Dir, err)
	}
	if st.ConfigSHA256 != "" && st.ConfigSHA256 != now {
		// Allowed (more epochs, a new learning rate), but the run is no
		// longer the one the checkpoint began: say what changed.
		changes := configChanges(l.Config, text)
		log.Warn("resume: the config differs from the checkpoint's; continuing with the new one",
			"checkpoint", l.Dir, "changed", strings.Join(changes, "; "))
	}
	st.ConfigSHA256 = now
	learner.Opt.SetSteps(int(st.Step))
	log.Info("resumed", "checkpoint", l.Dir, "epoch", st.Epoch, "step_in_epoch", st.StepInEpoch, "step", st.Step)
	return nil
}

// hasCheckpoints reports whether dir holds a saved checkpoint (a ckpt-*
// directory).
func hasCheckpoints(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ckpt-") {
			return true
		}
	}
	return false
}

// runner holds a run's live objects.
type runner struct {
	cfg     *Config
	o       Options
	run     checkpoint.Run
	log     *slog.Logger
	con     *console
	dev     nn.Device
	model   *nn.UNet
	learner *nn.Learner
	loader  *data.Loader
	st      State
	saver   checkpoint.Saver
	text    string

	// validation, made on first use
	valWS   *nn.Workspace
	valCrit *nn.Criterion
	valX    nn.Tensor
	valY    nn.Tensor
	valS    *data.Stream
	pred    *predictor
}

func (r *runner) close() {
	if r.valS != nil {
		r.valS.Close()
	}
	if r.valWS != nil {
		r.valCrit.Free()
		r.valWS.Free()
		r.dev.Free(r.valX)
		r.dev.Free(r.valY)
	}
	if r.pred != nil {
		r.pred.free()
	}
}

func (r *runner) train(ctx context.Context) (*Result, error) {
	cfg := r.cfg
	res := &Result{RunDir: r.run.Dir, LastDice: math.NaN(), BestDice: math.NaN()}
	if r.st.BestMetric != nil {
		res.BestDice = *r.st.BestMetric
	}
	if r.st.Epoch >= cfg.Train.Epochs {
		r.log.Info("nothing to do: the run already completed its epochs", "epochs", r.st.Epoch)
		res.Epochs, res.Steps = r.st.Epoch, r.st.Step
		res.Plots = r.plot()
		return res, nil
	}
	stream, err := r.loader.Train(data.StreamOptions{StartEpoch: r.st.Epoch, StartStep: r.st.StepInEpoch,
		Iterations: cfg.Train.IterationsPerEpoch})
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	f := feed.New(r.dev, feed.Options{})
	defer f.Close()

	iters := cfg.Train.IterationsPerEpoch
	total := int64(r.st.TotalSteps)
	startStep := r.st.Step
	runStart := time.Now()
	var stepEMA float64 // seconds per step, smoothed
	interrupted := false

	// fetch takes the next batch from the data stream (the wait is the
	// GPU starving) and hands it to the feeder, whose copy of batch i+1
	// runs on the copy stream while step i computes.
	type fetched struct {
		b           *feed.Batch
		epoch, step int
		wait        time.Duration
		err         error
	}
	fetch := func() fetched {
		t0 := time.Now()
		hb, err := stream.Next(ctx)
		w := time.Since(t0)
		if err != nil {
			return fetched{wait: w, err: err}
		}
		fb, err := f.Upload(feed.Host{Image: hb.Image, Label: hb.Label, N: hb.N, C: hb.C, Patch: hb.Patch, Release: hb.Release})
		if err != nil {
			hb.Release()
			return fetched{wait: w, err: err}
		}
		return fetched{b: fb, epoch: hb.Epoch, step: hb.Step, wait: w}
	}
	next := fetch()

	for epoch := r.st.Epoch; epoch < cfg.Train.Epochs && !interrupted; epoch++ {
		eStart := time.Now()
		var tm runlog.Timing
		lossSum, nLoss := 0.0, 0
		r.con.startEpoch(epoch+1, cfg.Train.Epochs, iters)
		firstStep := r.st.StepInEpoch
		r.o.Monitor.TakeMean() // start the epoch's averaging period (nil-safe)
		for s := firstStep; s < iters; s++ {
			cur := next
			tm.DataWaitS += cur.wait.Seconds()
			if cur.err != nil {
				if ctx.Err() != nil {
					interrupted = true
					break
				}
				return nil, fmt.Errorf("data: %w", cur.err)
			}
			if cur.epoch != epoch || cur.step != s {
				return nil, fmt.Errorf("trainer: data stream delivered epoch %d step %d, expected epoch %d step %d", cur.epoch, cur.step, epoch, s)
			}
			t0 := time.Now()
			x, y := f.Acquire(cur.b)
			cw := time.Since(t0)
			tm.CopyS += cw.Seconds()
			lastOfRun := epoch == cfg.Train.Epochs-1 && s == iters-1
			stopNow := r.o.StopAfterSteps > 0 && r.st.Step+1-startStep >= int64(r.o.StopAfterSteps)
			next = fetched{}
			if !lastOfRun && !stopNow && ctx.Err() == nil {
				next = fetch()
			}
			t1 := time.Now()
			lr := cfg.Optim.Schedule.LR(cfg.Optim.LR, int(r.st.Step), int(total))
			sr, err := r.learner.Step(x, y, lr)
			f.Done(cur.b)
			f.Reap()
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d: %w", epoch+1, s+1, err)
			}
			dt := time.Since(t1)
			tm.ComputeS += dt.Seconds()
			r.st.Step++
			r.st.StepInEpoch = s + 1
			if math.IsNaN(sr.Loss.Total) || math.IsInf(sr.Loss.Total, 0) {
				return nil, fmt.Errorf("epoch %d step %d: the loss is %v (lower optim.lr, or check the labels and the normalisation)", epoch+1, s+1, sr.Loss.Total)
			}
			lossSum += sr.Loss.Total
			nLoss++
			// From this step's Acquire to now: it includes the wait for the
			// next batch (fetched before the step), which is this step's
			// share of the data wait; cur.wait was the previous step's.
			stepWall := time.Since(t0).Seconds()
			if stepEMA == 0 {
				stepEMA = stepWall
			} else {
				stepEMA = 0.9*stepEMA + 0.1*stepWall
			}
			elapsed := time.Since(eStart).Seconds()
			r.con.step(progress{epoch: epoch + 1, epochs: cfg.Train.Epochs, step: s + 1, steps: iters,
				loss: lossSum / float64(nLoss), samplesPerS: float64(nLoss*cfg.Train.BatchSize) / elapsed,
				dataWaitPct: 100 * tm.DataWaitS / elapsed,
				eta:         time.Duration(stepEMA * float64(total-r.st.Step) * float64(time.Second)),
				gpu:         gpuString(r.o.Monitor)})
			if stopNow || ctx.Err() != nil {
				interrupted = true
				break
			}
		}
		r.con.endEpoch()
		if interrupted {
			break
		}
		r.st.Epoch = epoch + 1
		r.st.StepInEpoch = 0
		rec := runlog.Epoch{Epoch: epoch + 1, Step: r.st.Step, Time: time.Now().UTC().Format(time.RFC3339),
			LR: cfg.Optim.Schedule.LR(cfg.Optim.LR, int(r.st.Step), int(total)), TrainLoss: runlog.Float(lossSum / float64(max(nLoss, 1)))}
		var metric *float64
		if cfg.Validation.validates(epoch+1, cfg.Train.Epochs) && len(r.loader.ValCases()) > 0 {
			v0 := time.Now()
			m, err := r.validate(ctx, &rec)
			if err != nil {
				if ctx.Err() != nil {
					interrupted = true
				} else {
					return nil, err
				}
			}
			metric = m
			tm.ValidationS = time.Since(v0).Seconds()
		}
		tm.EpochS = time.Since(eStart).Seconds()
		rec.Timing = tm
		rec.SamplesPerS = float64(nLoss*cfg.Train.BatchSize) / max(tm.EpochS-tm.ValidationS, 1e-9)
		if g, ok := r.o.Monitor.TakeMean(); ok {
			rec.GPU = &runlog.GPU{UtilPct: g.UtilPct, MemUsedMiB: g.MemUsedMiB, MemTotalMiB: g.MemTotalMiB, PowerW: g.PowerW, TempC: g.TempC}
		}
		done := time.Since(runStart).Seconds()
		if steps := r.st.Step - startStep; steps > 0 {
			rec.ETAS = done / float64(steps) * float64(total-r.st.Step)
		}
		if err := runlog.Append(r.run.Metrics, rec); err != nil {
			return nil, err
		}
		r.logEpoch(rec)
		if metric != nil {
			res.LastDice = *metric
		}
		if err := r.save(false, metric); err != nil {
			return nil, err
		}
		if r.st.BestMetric != nil {
			res.BestDice = *r.st.BestMetric
		}
		if r.o.OnEpochEnd != nil {
			r.o.OnEpochEnd(r.st.Epoch)
		}
	}
	res.Epochs, res.Steps = r.st.Epoch, r.st.Step
	if interrupted {
		res.Interrupted = true
		if r.st.StepInEpoch > 0 {
			if err := r.save(true, nil); err != nil {
				return nil, err
			}
		}
		r.log.Info("interrupted: saved last", "epoch", r.st.Epoch, "step_in_epoch", r.st.StepInEpoch, "step", r.st.Step)
		if r.o.ResumeCommand != "" {
			fmt.Fprintf(r.con, "to resume: %s\n", r.o.ResumeCommand)
		}
	}
	res.Plots = r.plot()
	return res, nil
}

func gpuString(m *gpumon.Monitor) string {
	s, ok := m.Latest()
	if !ok {
		return ""
	}
	return fmt.Sprintf("GPU %.0f%% %.1f/%.1f GiB", s.UtilPct, s.MemUsedMiB/1024, s.MemTotalMiB/1024)
}

func (r *runner) logEpoch(e runlog.Epoch) {
	args := []any{"epoch", e.Epoch, "step", e.Step, "train_loss", fmt.Sprintf("%.4f", float64(e.TrainLoss)),
		"lr", fmt.Sprintf("%.3g", e.LR), "samples_per_s", fmt.Sprintf("%.2f", e.SamplesPerS),
		"epoch_s", fmt.Sprintf("%.1f", e.Timing.EpochS), "data_wait_s", fmt.Sprintf("%.2f", e.Timing.DataWaitS),
		"copy_s", fmt.Sprintf("%.2f", e.Timing.CopyS), "compute_s", fmt.Sprintf("%.1f", e.Timing.ComputeS),
		"validation_s", fmt.Sprintf("%.1f", e.Timing.ValidationS), "eta", fmtDuration(time.Duration(e.ETAS * float64(time.Second)))}
	if e.ValLoss != nil {
		args = append(args, "val_loss", fmt.Sprintf("%.4f", float64(*e.ValLoss)))
	}
	if e.ValDiceMean != nil {
		args = append(args, "val_dice", fmt.Sprintf("%.4f", float64(*e.ValDiceMean)), "val_dice_per_class", fmt.Sprint(e.ValDice))
	}
	if e.GPU != nil {
		args = append(args, "gpu_util_pct", fmt.Sprintf("%.0f", e.GPU.UtilPct), "gpu_mem_mib", fmt.Sprintf("%.0f", e.GPU.MemUsedMiB))
	}
	r.log.Info("epoch", args...)
}

// validate runs the configured validation and fills the record; it
// returns the metric for best-checkpoint tracking (mean Dice).
func (r *runner) validate(ctx context.Context, rec *runlog.Epoch) (*float64, error) {
	cfg := r.cfg
	var metric *float64
	setDice := func(d []float64) {
		rec.ValDice = nil
		for _, v := range d {
			rec.ValDice = append(rec.ValDice, runlog.Float(v))
		}
		mean := metrics.NanMean(d)
		f := runlog.Float(mean)
		rec.ValDiceMean = &f
		if !math.IsNaN(mean) {
			metric = &mean
		}
	}
	if cfg.Validation.Mode == "patch" || cfg.Validation.Mode == "both" {
		if err := r.ensurePatchValidation(); err != nil {
			return nil, err
		}
		sc, err := validatePatches(ctx, r.model, r.valWS, r.valCrit, r.valS, r.valX, r.valY)
		if err != nil {
			return nil, err
		}
		l := runlog.Float(sc.Loss)
		rec.ValLoss = &l
		setDice(sc.Dice)
	}
	if cfg.Validation.Mode == "sliding" || cfg.Validation.Mode == "both" {
		sc, err := r.validateSliding(ctx)
		if err != nil {
			return nil, err
		}
		setDice(sc.MeanDice) // sliding-window Dice is the better estimate
		for _, h := range sc.MeanHD95 {
			rec.ValHD95 = append(rec.ValHD95, runlog.Float(h))
		}
	}
	return metric, nil
}

func (r *runner) ensurePatchValidation() error {
	if r.valWS != nil {
		return nil
	}
	iters := r.cfg.Validation.Iterations
	if iters == 0 {
		iters = (len(r.loader.ValCases()) + r.cfg.Train.BatchSize - 1) / r.cfg.Train.BatchSize
	}
	s, err := r.loader.Validation(data.StreamOptions{Iterations: iters})
	if err != nil {
		return err
	}
	ws, err := r.model.NewWorkspace(r.cfg.Train.BatchSize, r.cfg.Train.PatchSize, false)
	if err != nil {
		s.Close()
		return err
	}
	crit, err := nn.NewCriterion(r.dev, r.cfg.Loss, ws.OutputShapes())
	if err != nil {
		s.Close()
		ws.Free()
		return err
	}
	r.valS, r.valWS, r.valCrit = s, ws, crit
	r.valX = r.dev.Alloc(ws.InputShape())
	r.valY = r.dev.Alloc(ws.LabelShape())
	return nil
}

func (r *runner) validateSliding(ctx context.Context) (SlidingScores, error) {
	if r.pred == nil {
		p, err := newPredictor(r.model, r.cfg.Train.BatchSize, r.cfg.Train.PatchSize)
		if err != nil {
			return SlidingScores{}, err
		}
		r.pred = p
	}
	cases := r.loader.ValCases()
	if m := r.cfg.Validation.MaxCases; m > 0 && m < len(cases) {
		cases = cases[:m]
	}
	var out []CaseScores
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return SlidingScores{}, err
		}
		v, err := r.loader.LoadCase(ctx, c)
		if err != nil {
			return SlidingScores{}, err
		}
		id := r.loader.Dataset().Cases[c].ID
		if v.Label == nil {
			return SlidingScores{}, fmt.Errorf("validation case %s has no label", id)
		}
		pred, err := predictLabels(r.pred, v, r.cfg.Validation, r.cfg.Train.PatchSize)
		if err != nil {
			return SlidingScores{}, fmt.Errorf("validation case %s: %w", id, err)
		}
		cs, err := scoreCase(id, pred, v, r.model.Config().NumClasses, r.cfg.Validation.HD95)
		if err != nil {
			return SlidingScores{}, err
		}
		out = append(out, cs)
	}
	return summarise(out), nil
}

// save writes a checkpoint of the current state (the checkpoint package
// re-creates the checkpoint directory first and commits atomically).
func (r *runner) save(mid bool, metric *float64) error {
	if err := r.run.MkdirAll(); err != nil {
		return err
	}
	params, err := nn.ExportParams(r.dev, r.model.Params())
	if err != nil {
		return err
	}
	opt, err := r.learner.Opt.State()
	if err != nil {
		return err
	}
	if metric != nil && (r.st.BestMetric == nil || r.cfg.Checkpoint.Better(*metric, *r.st.BestMetric)) {
		v := *metric
		r.st.BestMetric = &v
	}
	saved, err := r.saver.Save(&checkpoint.Checkpoint{Epoch: r.st.Epoch, Step: r.st.Step, MidEpoch: mid, Metric: metric,
		Model: toCheckpoint(params), Optimizer: toCheckpoint(opt), State: r.st, Config: r.text, Version: r.o.Version})
	if err != nil {
		return err
	}
	for _, w := range saved.Warnings {
		r.log.Warn("checkpoint", "warning", w)
	}
	args := []any{"dir", saved.Dir}
	if saved.Best {
		args = append(args, "best", true)
	}
	r.log.Info("saved checkpoint", args...)
	return nil
}

func (r *runner) plot() []string {
	eps, err := runlog.Read(r.run.Metrics)
	if err != nil || len(eps) == 0 {
		return nil
	}
	files, err := runlog.Plot(eps, r.run.Plots)
	if err != nil {
		r.log.Warn("plot", "error", err)
	}
	return files
}
