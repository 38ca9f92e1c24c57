package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/infer"
)

// finalValidation is nnU-Net's validation at the end of training
// (nnUNetTrainer.perform_actual_validation), what validation.final asks
// for: the checkpoint it names (last, or best: the last when the run kept
// no best) predicts every held-out case of the fold whole, exported on the
// case's own grid, into runDir/validation/ with summary.json (and CASE.npz
// with validation.final_probabilities) — what `train validate
// --checkpoint … --output runDir/validation` writes. In a data-parallel
// job rank 0 alone runs it (rank says which this is), on the device the
// training used. A run that trained on every case (fold -1), or whose
// fold holds out none, has nothing to validate and says so.
func finalValidation(ctx context.Context, opts *TrainOptions, dev *ComputeDevice, runDir string, rank int) error {
	cfg := opts.Config
	v := cfg.Validation
	if v.Final == config.FinalNone || rank != 0 {
		return nil
	}
	out := opts.IO.Out
	if cfg.Data.Fold < 0 {
		fmt.Fprintln(out, "final validation skipped: fold -1 trains on every case and holds out none")
		return nil
	}
	ckpt := filepath.Join(runDir, "checkpoints", v.Final)
	if _, err := os.Stat(ckpt); err != nil && v.Final == config.FinalBest {
		fmt.Fprintln(out, "final validation: the run kept no best checkpoint (no validation gave a score); validating last")
		ckpt = filepath.Join(runDir, "checkpoints", config.FinalLast)
	}
	valDir := filepath.Join(runDir, "validation")
	if err := checkOutputDir(valDir); err != nil {
		return fmt.Errorf("final validation: %s: %w", valDir, err)
	}
	m, err := infer.LoadModel(ckpt, dev.Dev, 0)
	if err != nil {
		return fmt.Errorf("final validation: %w", err)
	}
	defer m.Close()
	fmt.Fprintf(out, "final validation: %s on fold %d's held-out cases by sliding window\n", m.Dir, cfg.Data.Fold)
	sc, err := m.Evaluate(ctx, infer.EvalOptions{Fold: -1, OutputDir: valDir, SaveProbabilities: v.FinalProbabilities,
		Validation: v, Log: out})
	switch {
	case errors.Is(err, infer.ErrNoCases):
		fmt.Fprintf(out, "final validation skipped: fold %d holds out no labelled case\n", cfg.Data.Fold)
		return nil
	case err != nil && ctx.Err() != nil:
		// A signal: the exit status says interrupted (the cancellation
		// stays in the chain), and a resume validates again.
		return fmt.Errorf("final validation interrupted (the training is complete and saved; --resume auto validates again): %w", err)
	case err != nil:
		return fmt.Errorf("final validation (the training is complete and saved; train validate --checkpoint %s --output %s runs it again): %w",
			ckpt, valDir, err)
	}
	names, _ := runClassNames(runDir)
	printScores(out, sc, names)
	what := "predictions"
	if v.FinalProbabilities {
		what = "predictions, probabilities (.npz)"
	}
	fmt.Fprintf(out, "%s and summary.json in %s\n", what, valDir)
	return nil
}
