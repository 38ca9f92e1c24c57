package trainer

import (
	"context"
	"io"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
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

// Run trains according to cfg (validated). It returns with Interrupted
// set, after saving `last`, when ctx is cancelled (SIGINT, SIGTERM) or
// StopAfterSteps is reached.
func Run(ctx context.Context, cfg *config.Config, o Options) (*Result, error) {
	t, err := newTrainer(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.train(ctx)
}
