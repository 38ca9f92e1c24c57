package runlog

import (
	"fmt"
	"time"

	"github.com/voxtrain/voxtrain/internal/tbevent"
)

// TensorBoard writes a run's epoch records as TensorBoard scalars into one
// new event file (config logging.tensorboard). Each start or resume of a
// run opens its own file in the run's tensorboard/ directory; TensorBoard
// reads every file of a directory as one run.
//
// The x axis is the global step (optimiser steps so far, metrics.jsonl's
// step), as tf.summary, PyTorch's SummaryWriter and Lightning write it:
// curves of runs with different iterations_per_epoch line up by the
// updates made, and a step is never repeated, whereas an epoch is a
// run-specific unit. The epoch is a curve of its own ("epoch") for
// reading one off the other.
type TensorBoard struct {
	w *tbevent.Writer
}

// OpenTensorBoard starts a new event file in dir for a run that starts,
// or resumes, at global step from (0 for a fresh run), at wall time start.
//
// After the file version it writes a SessionLog START at step from+1:
// TensorBoard drops what earlier files of the directory recorded at that
// step or later when it reads a START (every START but a directory's
// first), so the epochs a resumed run repeats — those recorded after the
// checkpoint it resumed from — show once, with their new values, as in
// metrics.jsonl, where the last line of an epoch wins.
func OpenTensorBoard(dir string, start time.Time, from int64) (*TensorBoard, error) {
	w, err := tbevent.Create(dir, start)
	if err != nil {
		return nil, err
	}
	if err := w.Write(tbevent.Event{WallTime: tbevent.Seconds(start), Step: from + 1, SessionLog: tbevent.SessionStart}); err != nil {
		w.Close()
		return nil, err
	}
	return &TensorBoard{w: w}, nil
}

// Path is the event file's path.
func (tb *TensorBoard) Path() string { return tb.w.Path() }

// Write appends e's scalars (Scalars) as one event at step e.Step and wall
// time wall, and syncs the file.
func (tb *TensorBoard) Write(e Epoch, wall time.Time) error {
	if err := tb.w.Write(tbevent.Event{WallTime: tbevent.Seconds(wall), Step: e.Step, Summary: Scalars(e)}); err != nil {
		return fmt.Errorf("epoch %d: %w", e.Epoch, err)
	}
	return nil
}

// Close closes the event file.
func (tb *TensorBoard) Close() error { return tb.w.Close() }

// Scalars are the values of an epoch's record as TensorBoard scalars
// (float32, TensorBoard's simple_value), by tag, in this order:
//
//	epoch                   epoch
//	train/loss              train_loss
//	train/lr                lr
//	train/samples_per_s     samples_per_s
//	val/loss                val_loss       (epochs that validated)
//	val/dice_mean           val_dice_mean  (epochs that validated)
//	val/dice/class_<k>      val_dice[k-1]  (foreground classes k = 1…)
//	val/hd95/class_<k>      val_hd95[k-1]
//	time/epoch_s            timing.epoch_s
//	time/data_wait_s        timing.data_wait_s
//	time/copy_s             timing.copy_s
//	time/compute_s          timing.compute_s
//	time/validation_s       timing.validation_s
//	time/eta_s              eta_s
//	gpu/util_pct            gpu.util_pct   (with NVML)
//	gpu/mem_used_mib        gpu.mem_used_mib
//	gpu/mem_total_mib       gpu.mem_total_mib
//	gpu/power_w             gpu.power_w
//	gpu/temp_c              gpu.temp_c
//
// The part before the slash is the section TensorBoard groups a curve
// in. NaN stays NaN (the Dice of a class absent from every validation
// case), where metrics.jsonl writes null.
func Scalars(e Epoch) []tbevent.Value {
	var out []tbevent.Value
	add := func(tag string, v float64) { out = append(out, tbevent.Value{Tag: tag, Simple: float32(v)}) }
	add("epoch", float64(e.Epoch))
	add("train/loss", float64(e.TrainLoss))
	add("train/lr", e.LR)
	add("train/samples_per_s", e.SamplesPerS)
	if e.ValLoss != nil {
		add("val/loss", float64(*e.ValLoss))
	}
	if e.ValDiceMean != nil {
		add("val/dice_mean", float64(*e.ValDiceMean))
	}
	for i, d := range e.ValDice {
		add(fmt.Sprintf("val/dice/class_%d", i+1), float64(d))
	}
	for i, h := range e.ValHD95 {
		add(fmt.Sprintf("val/hd95/class_%d", i+1), float64(h))
	}
	add("time/epoch_s", e.Timing.EpochS)
	add("time/data_wait_s", e.Timing.DataWaitS)
	add("time/copy_s", e.Timing.CopyS)
	add("time/compute_s", e.Timing.ComputeS)
	add("time/validation_s", e.Timing.ValidationS)
	add("time/eta_s", e.ETAS)
	if g := e.GPU; g != nil {
		add("gpu/util_pct", g.UtilPct)
		add("gpu/mem_used_mib", g.MemUsedMiB)
		add("gpu/mem_total_mib", g.MemTotalMiB)
		add("gpu/power_w", g.PowerW)
		add("gpu/temp_c", g.TempC)
	}
	return out
}
