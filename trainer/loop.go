package trainer

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
)

// train is the loop, nnU-Net's run_training: the run starts, then every
// epoch starts, takes its steps and ends (metrics, validation,
// checkpoint), and the run ends. A cancelled ctx or StopAfterSteps stops
// it after the current step; onTrainEnd then saves `last`.
func (t *trainer) train(ctx context.Context) (*Result, error) {
	if t.state.Epoch >= t.cfg.Train.Epochs {
		t.log.Info("nothing to do: the run already completed its epochs", "epochs", t.state.Epoch)
		return t.onTrainEnd()
	}
	if err := t.onTrainStart(ctx); err != nil {
		return nil, err
	}
	for t.state.Epoch < t.cfg.Train.Epochs && !t.stopped {
		t.onEpochStart()
		for step := t.state.StepInEpoch; step < t.iters && !t.stopped; step++ {
			if err := t.trainStep(ctx, step); err != nil {
				return nil, err
			}
		}
		t.console.endEpoch()
		if t.stopped {
			break
		}
		if err := t.onEpochEnd(ctx); err != nil {
			return nil, err
		}
	}
	return t.onTrainEnd()
}

// save writes a checkpoint of the current state (mid: `last`, mid-epoch;
// metric: the validation's, for `best`). In a job rank 0 writes it alone,
// between two barriers: no rank runs ahead into the next step while it is
// written, and none starts before every rank has reached the same state;
// the others only track the best metric.
func (t *trainer) save(mid bool, metric *float64) error {
	if err := t.job.barrier("before the checkpoint"); err != nil {
		return err
	}
	if t.job.writer() {
		if err := t.ckpts.save(&t.state, mid, metric); err != nil {
			return err
		}
	} else {
		t.ckpts.track(&t.state, metric)
	}
	return t.job.barrier("after the checkpoint")
}

// onTrainStart opens the training stream at the state's data cursor and
// prefetches the first batch, and starts a TensorBoard event file when
// logging.tensorboard asks (here, not in setup: a run that has nothing
// left to do writes no file).
func (t *trainer) onTrainStart(ctx context.Context) error {
	if t.cfg.Logging.TensorBoard && t.job.writer() {
		tb, err := runlog.OpenTensorBoard(t.dir.TensorBoard, time.Now(), t.state.Step)
		if err != nil {
			return err
		}
		t.tb = tb
		t.closers = append(t.closers, func() {
			if err := tb.Close(); err != nil {
				t.log.Warn("tensorboard", "error", err)
			}
		})
	}
	start := data.StreamOptions{StartEpoch: t.state.Epoch, StartStep: t.state.StepInEpoch}
	if start.StartStep >= t.iters {
		// The state was saved after the epoch's last step but before the
		// epoch ended (interrupted then, or during its validation): the
		// next batch is the next epoch's first. Say so: a stream without
		// workers would otherwise deliver one past the epoch's end.
		start.StartEpoch, start.StartStep = t.state.Epoch+1, 0
	}
	batches, err := t.loader.Train(start)
	if err != nil {
		return err
	}
	t.feed = newPrefetcher(batches, t.opt.Device)
	t.feed.keepSamples = t.opt.onSamples != nil
	t.clock.startRun(t.state.Step)
	t.feed.fetch(t.job.callCtx(ctx))
	return nil
}

// onEpochStart resets the epoch's timing and progress bar (its loss sum
// is in the state: zero at an epoch's start, restored by a resume).
func (t *trainer) onEpochStart() {
	t.clock.startEpoch()
	t.epochSteps = 0
	t.console.startEpoch(t.state.Epoch+1, t.cfg.Train.Epochs, t.iters)
	t.opt.Monitor.TakeMean() // start the epoch's GPU averaging period (nil-safe)
}

// trainStep takes optimiser step step of the current epoch on the batch
// prefetched for it, fetching the next one while it computes.
func (t *trainer) trainStep(ctx context.Context, step int) error {
	epoch, cfg := t.state.Epoch, t.cfg.Train
	cur := t.feed.take()
	t.clock.dataWait(cur.wait)
	if cur.err != nil {
		if ctx.Err() != nil && t.job == nil {
			t.stop(ctx)
			return nil
		}
		return fmt.Errorf("data: %w", cur.err)
	}
	if cur.epoch != epoch || cur.step != step {
		return fmt.Errorf("trainer: data stream delivered epoch %d step %d, expected epoch %d step %d", cur.epoch, cur.step, epoch, step)
	}
	start := time.Now()
	x, y := t.feed.acquire(cur)
	t.clock.copyWait(time.Since(start))
	lastOfRun := epoch == cfg.Epochs-1 && step == t.iters-1
	stopNow := t.opt.StopAfterSteps > 0 && t.state.Step+1-t.clock.firstStep >= int64(t.opt.StopAfterSteps)
	if !lastOfRun && !stopNow && ctx.Err() == nil {
		// In a job the fetch must not fail for a signal: the step after it
		// is taken unless every rank agrees to stop first (agreeStep).
		t.feed.fetch(t.job.callCtx(ctx))
	}
	computeStart := time.Now()
	lr := nn.LearningRate(t.cfg.Optim.Schedule, t.cfg.Optim.BaseLR(), int(t.state.Step), int(t.total))
	if t.opt.BeforeStep != nil {
		t.opt.BeforeStep(t.state.Step, t.model)
	}
	// Each sample's classes its crop does not annotate are left out of
	// the loss (all known but with a manifest's unlisted_classes: unknown).
	t.learner.Loss.SetUnknown(cur.unknown)
	sr, err := t.learner.Step(x, y, lr)
	t.feed.done(cur)
	if err != nil {
		return fmt.Errorf("epoch %d step %d: %w", epoch+1, step+1, err)
	}
	// Every rank stops after the same step: a signal or the step limit
	// on any rank stops them all (one small all-reduce, which also makes
	// the logged loss the global batch's).
	stop, loss, err := t.job.agreeStep(stopNow || ctx.Err() != nil, sr.Loss.Total)
	if err != nil {
		return fmt.Errorf("epoch %d step %d: %w", epoch+1, step+1, err)
	}
	t.clock.compute(time.Since(computeStart))
	t.state.Step++
	t.state.StepInEpoch = step + 1
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("epoch %d step %d: the loss is %v (lower optim.lr, or check the labels and the normalisation)", epoch+1, step+1, loss)
	}
	if t.opt.onSamples != nil {
		t.opt.onSamples(epoch, step, cur.samples)
	}
	t.state.EpochLossSum += loss
	t.state.EpochLossSteps++
	t.epochSteps++
	t.clock.stepDone(time.Since(start))
	t.showProgress(step)
	if stop {
		t.stop(ctx)
	}
	return nil
}

// stop makes the loop stop after the current step, recording why: the
// context's cause when it was cancelled, else the step limit.
func (t *trainer) stop(ctx context.Context) {
	if t.stopped {
		return
	}
	t.stopped = true
	t.stopCause = context.Cause(ctx)
	if t.stopCause == nil {
		t.stopCause = ErrStepLimit
		if t.opt.StopAfterSteps == 0 || t.state.Step-t.clock.firstStep < int64(t.opt.StopAfterSteps) {
			t.stopCause = ErrPeerStopped
		}
	}
}

// onEpochEnd closes an epoch whose steps are all taken: validation when
// due, the epoch's record in metrics.jsonl (and TensorBoard) and the log, a
// checkpoint (best
// tracked by the validation metric). An interruption during the validation
// leaves the epoch open, for a resumed run to close.
func (t *trainer) onEpochEnd(ctx context.Context) error {
	epoch := t.state.Epoch + 1
	rec := runlog.Epoch{Epoch: epoch, Step: t.state.Step, Time: time.Now().UTC().Format(time.RFC3339),
		LR:        nn.LearningRate(t.cfg.Optim.Schedule, t.cfg.Optim.BaseLR(), int(t.state.Step), int(t.total)),
		TrainLoss: runlog.Float(t.state.EpochLossSum / float64(max(t.state.EpochLossSteps, 1)))}
	var metric *float64
	if t.val.due(epoch, t.cfg.Train.Epochs) {
		if t.opt.beforeValidation != nil {
			t.opt.beforeValidation(epoch)
		}
		// In a job the validation's sums are collective calls: every rank
		// finishes it, whatever the signals, and they stop together after.
		m, took, err := t.val.run(t.job.callCtx(ctx), &rec)
		if err != nil {
			if ctx.Err() == nil || t.job != nil {
				return err
			}
			// Interrupted (SIGTERM) before the score was known. Closing the
			// epoch now would lose its score for good; finishing the
			// validation could outlast the scheduler's grace period. So the
			// epoch stays open: the state still says all its steps are
			// taken (StepInEpoch == iters), onTrainEnd saves that as last,
			// and a resumed run takes no step and closes the epoch again,
			// validation and metrics line included.
			t.log.Info("interrupted during validation: it runs again on resume", "epoch", epoch)
			t.stop(ctx)
			return nil
		}
		metric = m
		t.clock.validated(took)
	}
	return t.closeEpoch(rec, metric)
}

// closeEpoch counts the epoch done and records it: metrics.jsonl and the
// log get rec, a checkpoint is saved with metric.
func (t *trainer) closeEpoch(rec runlog.Epoch, metric *float64) error {
	t.state.Epoch++
	t.state.StepInEpoch = 0
	t.state.EpochLossSum, t.state.EpochLossSteps = 0, 0
	t.clock.endEpoch(&rec, t.epochSteps*t.cfg.Train.BatchSize*t.job.size(), t.state.Step, t.total)
	if g, ok := t.opt.Monitor.TakeMean(); ok {
		rec.GPU = &runlog.GPU{UtilPct: g.UtilPct, MemUsedMiB: g.MemUsedMiB, MemTotalMiB: g.MemTotalMiB, PowerW: g.PowerW, TempC: g.TempC}
	}
	if t.job.writer() {
		if err := runlog.Append(t.dir.Metrics, rec); err != nil {
			return err
		}
	}
	if t.tb != nil {
		if err := t.tb.Write(rec, time.Now()); err != nil {
			return err
		}
	}
	t.logEpoch(rec)
	if metric != nil {
		t.res.LastDice = *metric
	}
	if err := t.save(false, metric); err != nil {
		return err
	}
	if t.state.BestMetric != nil {
		t.res.BestDice = *t.state.BestMetric
	}
	if t.opt.OnEpochEnd != nil {
		t.opt.OnEpochEnd(t.state.Epoch)
	}
	return nil
}

// onTrainEnd saves `last` after an interruption mid-epoch (and says how to
// resume), draws the curves and returns the run's result, with an
// *Interrupted error when the run stopped early.
func (t *trainer) onTrainEnd() (*Result, error) {
	t.res.Epochs, t.res.Steps = t.state.Epoch, t.state.Step
	if t.state.BestMetric != nil {
		t.res.BestDice = *t.state.BestMetric
	}
	if t.stopped {
		t.res.Interrupted = true
		if t.state.StepInEpoch > 0 {
			if err := t.save(true, nil); err != nil {
				return nil, err
			}
		}
		t.log.Info("interrupted: saved last", "epoch", t.state.Epoch, "step_in_epoch", t.state.StepInEpoch, "step", t.state.Step)
		if t.opt.ResumeCommand != "" {
			fmt.Fprintf(t.console, "to resume: %s\n", t.opt.ResumeCommand)
		}
	}
	if t.job.writer() {
		t.res.Plots = t.plot()
	}
	if t.stopped {
		return &t.res, &Interrupted{Cause: t.stopCause, Epoch: t.state.Epoch, StepInEpoch: t.state.StepInEpoch, Step: t.state.Step}
	}
	return &t.res, nil
}

// showProgress updates the progress bar (or prints a line) after a step.
func (t *trainer) showProgress(step int) {
	elapsed := t.clock.epochElapsed().Seconds()
	t.console.step(progress{epoch: t.state.Epoch + 1, epochs: t.cfg.Train.Epochs, step: step + 1, steps: t.iters,
		loss: t.state.EpochLossSum / float64(t.state.EpochLossSteps), samplesPerS: float64(t.epochSteps*t.cfg.Train.BatchSize*t.job.size()) / elapsed,
		dataWaitPct: 100 * t.clock.timing.DataWaitS / elapsed, eta: t.clock.stepETA(t.total - t.state.Step),
		gpu: gpuString(t.opt.Monitor)})
}

func gpuString(m *gpumon.Monitor) string {
	s, ok := m.Latest()
	if !ok {
		return ""
	}
	return fmt.Sprintf("GPU %.0f%% %.1f/%.1f GiB", s.UtilPct, s.MemUsedMiB/1024, s.MemTotalMiB/1024)
}

// logEpoch writes an epoch's record to the log.
func (t *trainer) logEpoch(e runlog.Epoch) {
	args := []any{"epoch", e.Epoch, "step", e.Step, "train_loss", fmt.Sprintf("%.4f", float64(e.TrainLoss)),
		"lr", fmt.Sprintf("%.3g", e.LR), "samples_per_s", fmt.Sprintf("%.2f", e.SamplesPerS),
		"epoch_s", fmt.Sprintf("%.1f", e.Timing.EpochS), "data_wait_s", fmt.Sprintf("%.2f", e.Timing.DataWaitS),
		"copy_s", fmt.Sprintf("%.2f", e.Timing.CopyS), "compute_s", fmt.Sprintf("%.1f", e.Timing.ComputeS),
		"validation_s", fmt.Sprintf("%.1f", e.Timing.ValidationS), "eta", fmtDuration(time.Duration(e.ETAS * float64(time.Second)))}
	if e.ValLoss != nil {
		args = append(args, "val_loss", fmt.Sprintf("%.4f", float64(*e.ValLoss)))
	}
	if e.ValDiceMean != nil {
		args = append(args, "val_dice", fmt.Sprintf("%.4f", float64(*e.ValDiceMean)), "val_dice_per_class", perClassDice(e.ValDice, t.classNames))
	}
	if e.GPU != nil {
		args = append(args, "gpu_util_pct", fmt.Sprintf("%.0f", e.GPU.UtilPct), "gpu_mem_mib", fmt.Sprintf("%.0f", e.GPU.MemUsedMiB))
	}
	t.log.Info("epoch", args...)
}

// perClassDice is an epoch line's per-class Dice: each foreground class
// by its dataset name (class_<k> where it has none), blanks and = in a
// name written as _, so the value stays one word per class:
// "Anterior=0.8123 Posterior=0.7456".
func perClassDice(dice []runlog.Float, names []string) string {
	words := make([]string, len(dice))
	for k, d := range dice {
		name := strings.Map(func(r rune) rune {
			if r == '=' || unicode.IsSpace(r) {
				return '_'
			}
			return r
		}, runlog.ClassName(names, k))
		words[k] = fmt.Sprintf("%s=%.4f", name, float64(d))
	}
	return strings.Join(words, " ")
}

// plot draws the run's curves from metrics.jsonl, the classes named as
// the dataset names them (a failure is logged).
func (t *trainer) plot() []string {
	eps, err := runlog.Read(t.dir.Metrics)
	if err != nil || len(eps) == 0 {
		return nil
	}
	files, err := runlog.PlotWith(eps, t.dir.Plots, runlog.PlotOptions{ClassNames: t.classNames})
	if err != nil {
		t.log.Warn("plot", "error", err)
	}
	return files
}
