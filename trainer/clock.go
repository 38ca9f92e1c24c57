package trainer

import (
	"time"

	"github.com/voxtrain/voxtrain/runlog"
)

// clock times a run: each epoch's split of wall time into data wait,
// host→device copy, compute and validation (runlog.Timing), a smoothed
// step time for the progress line's ETA, and the run's own rate for the
// epoch record's ETA.
type clock struct {
	runStart   time.Time
	firstStep  int64 // optimiser steps done before this invocation
	epochStart time.Time
	timing     runlog.Timing
	stepEMA    float64 // seconds per step, smoothed
}

// startRun starts the run's clock at optimiser step step.
func (c *clock) startRun(step int64) {
	c.runStart, c.firstStep = time.Now(), step
}

// startEpoch starts an epoch's timing.
func (c *clock) startEpoch() {
	c.epochStart, c.timing = time.Now(), runlog.Timing{}
}

func (c *clock) dataWait(d time.Duration) { c.timing.DataWaitS += d.Seconds() }
func (c *clock) copyWait(d time.Duration) { c.timing.CopyS += d.Seconds() }
func (c *clock) compute(d time.Duration)  { c.timing.ComputeS += d.Seconds() }

// stepDone smooths the wall time of a whole step: from its batch's
// acquisition to its end, which includes the wait for the next batch
// (fetched during the step).
func (c *clock) stepDone(wall time.Duration) {
	if c.stepEMA == 0 {
		c.stepEMA = wall.Seconds()
	} else {
		c.stepEMA = 0.9*c.stepEMA + 0.1*wall.Seconds()
	}
}

// epochElapsed is the time since the epoch started.
func (c *clock) epochElapsed() time.Duration { return time.Since(c.epochStart) }

// stepETA estimates the time for the remaining steps from the smoothed
// step time.
func (c *clock) stepETA(remaining int64) time.Duration {
	return time.Duration(c.stepEMA * float64(remaining) * float64(time.Second))
}

// validated records the time a validation took.
func (c *clock) validated(d time.Duration) { c.timing.ValidationS = d.Seconds() }

// endEpoch fills rec's timing, training rate (samples over the epoch's
// time outside validation) and ETA (from this invocation's steps so far)
// at optimiser step step of total.
func (c *clock) endEpoch(rec *runlog.Epoch, samples int, step, total int64) {
	c.timing.EpochS = c.epochElapsed().Seconds()
	rec.Timing = c.timing
	rec.SamplesPerS = float64(samples) / max(c.timing.EpochS-c.timing.ValidationS, 1e-9)
	if steps := step - c.firstStep; steps > 0 {
		rec.ETAS = time.Since(c.runStart).Seconds() / float64(steps) * float64(total-step)
	}
}
