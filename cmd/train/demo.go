package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/infer"
)

// demoConfig is the bundled demo's config, relative to the repository root.
const demoConfig = "configs/demo.yaml"

// DemoOptions are the demo's: a training run (the root command's options,
// with configs/demo.yaml and --resume auto by default), then a validation
// of its best checkpoint.
type DemoOptions struct {
	Train *TrainOptions
}

// NewCmdDemo builds `train demo`; runF (nil: demoRun) receives the options.
func NewCmdDemo(f *Factory, runF func(context.Context, *DemoOptions) error) *cobra.Command {
	var tf trainFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train on the bundled hippocampus MRI data, validate by sliding window and plot (minutes on a laptop CPU)",
		Long: `demo runs the whole workflow on the bundled demo data (80 MSD Task04
hippocampus cases in testdata/demo): train with configs/demo.yaml (fold 0),
then validate the best checkpoint on the fold's held-out cases by sliding
window, writing each prediction and summary.json into the run's validation/
folder, and draw the curves into its plots/ folder. Run it from the
repository root. Running it again resumes (or just re-validates) the same run.`,
		Example: `  go run ./cmd/train demo
  go run ./cmd/train demo --output-dir /tmp/runs --epochs 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tf.config == "" {
				tf.config = demoConfig
			}
			if _, err := os.Stat(tf.config); err != nil {
				return fmt.Errorf("%s not found: run the demo from the voxtrain repository root (%w)", tf.config, err)
			}
			if tf.resume == "" {
				tf.resume = "auto"
			}
			topts, err := tf.options(f, cmd.Flags())
			if err != nil {
				return err
			}
			opts := &DemoOptions{Train: topts}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	tf.register(cmd.Flags())
	return cmd
}

// demoRun trains, then validates the best checkpoint (the last when there
// is no best) on the fold's held-out cases by sliding window.
func demoRun(ctx context.Context, opts *DemoOptions) error {
	res, err := trainRun(ctx, opts.Train)
	if err != nil {
		return err // an interruption too: no validation, and main exits with its code
	}
	ckpt := filepath.Join(res.RunDir, "checkpoints", "best")
	if _, err := os.Stat(ckpt); err != nil {
		ckpt = filepath.Join(res.RunDir, "checkpoints", "last")
	}
	cfg := opts.Train.Config
	dev, err := opts.Train.OpenDevice(cfg.Device, cfg.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	m, err := infer.LoadModel(ckpt, dev.Dev, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	out := opts.Train.IO.Out
	valDir := filepath.Join(res.RunDir, "validation")
	fmt.Fprintf(out, "validating %s on fold %d by sliding window\n", m.Dir, cfg.Data.Fold)
	v := m.Config.Validation
	v.Mirror, v.HD95 = false, false
	sc, err := m.Evaluate(ctx, infer.EvalOptions{Fold: -1, OutputDir: valDir, Validation: v})
	if err != nil {
		return err
	}
	names, _ := runClassNames(res.RunDir)
	printScores(out, sc, names)
	fmt.Fprintf(out, "predictions and summary.json: %s\nplots: %s\n", valDir, filepath.Join(res.RunDir, "plots"))
	return nil
}
