package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/nn"
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
	// InitWeightsFlag says that cfg.Train.InitWeights was given for this
	// start (train's --init-weights), not only carried in the config
	// file. The weights begin a new run: with a resume of a run that has
	// checkpoints the flag is refused, while the key alone is not applied
	// (the run continues from its checkpoint; the key records how it
	// began), so that a requeued job with the same config resumes.
	InitWeightsFlag bool
	// Comm makes the run one rank of a data-parallel job of Comm.Size()
	// processes (for embedding programs and tests; the caller closes it).
	// nil: the run reads its place from the environment (dist.FromEnviron:
	// torchrun's or SLURM's variables, as `train launch` and srun set
	// them) and joins the job itself when its world size is above 1.
	Comm dist.Comm
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
	// BeforeStep, when set, is called before each optimiser step with the
	// number of steps taken so far and the model about to be updated,
	// which it must not change (for embedding programs and tests).
	BeforeStep func(step int64, model *nn.UNet)

	// onSamples, when set, is called after each step with the samples
	// this rank trained it on (tests follow the sample sequence).
	onSamples func(epoch, step int, samples []data.Sample)

	// beforeValidation, when set, is called as the validation of epoch
	// (1-based) starts: tests interrupt a run there.
	beforeValidation func(epoch int)
}

// Result describes a finished (or interrupted) run.
type Result struct {
	RunDir string
	Epochs int   // completed epochs
	Steps  int64 // optimiser steps in total
	// Interrupted is set when the run stopped early; Run then also
	// returns an *Interrupted error.
	Interrupted bool
	// LastDice is the mean validation Dice of the last validation (NaN if
	// none); BestDice the best so far.
	LastDice, BestDice float64
	Plots              []string
}

// ErrStepLimit is the cause of an *Interrupted error when
// Options.StopAfterSteps ended the run.
var ErrStepLimit = errors.New("the step limit (StopAfterSteps) was reached")

// ErrPeerStopped is the cause of an *Interrupted error on a rank of a
// data-parallel job that stopped because another rank was stopped (a
// signal or its step limit there): every rank stops after the same step.
var ErrPeerStopped = errors.New("another rank of the job stopped")

// Interrupted is the error Run returns, together with the Result, when the
// run stopped before completing its epochs and saved `last` first: its
// context was cancelled (SIGINT, SIGTERM) or Options.StopAfterSteps was
// reached. Resuming (Options.Resume "auto") continues the exact sequence.
// It is an error so that a run that did not finish never looks like one
// that did (a scheduler must requeue it), and a type so that callers tell
// it from a failure with errors.As.
type Interrupted struct {
	// Cause is why the run stopped: context.Cause of Run's context (the
	// error the caller cancelled it with, such as the signal) or
	// ErrStepLimit.
	Cause error
	// Epoch is the number of completed epochs, StepInEpoch the steps of
	// the next one taken, Step the optimiser steps in all: where the
	// saved state resumes.
	Epoch, StepInEpoch int
	Step               int64
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("stopped early (%v): saved last at step %d (%d epochs completed, %d steps into the next); resume to continue",
		e.Cause, e.Step, e.Epoch, e.StepInEpoch)
}

// Unwrap returns the cause, so errors.Is and errors.As see the signal.
func (e *Interrupted) Unwrap() error { return e.Cause }

// Run trains according to cfg (validated). When ctx is cancelled (SIGINT,
// SIGTERM) or StopAfterSteps is reached it finishes the step, saves
// `last` and returns the Result with Interrupted set together with an
// *Interrupted error; any other error means the run failed.
func Run(ctx context.Context, cfg *config.Config, o Options) (*Result, error) {
	t, err := newTrainer(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.train(ctx)
}
