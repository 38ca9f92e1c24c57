package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
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
// is no best) on the fold's held-out cases by sliding window: the run's
// final validation, asked for here when the config asks for none.
func demoRun(ctx context.Context, opts *DemoOptions) error {
	if v := &opts.Train.Config.Validation; v.Final == config.FinalNone {
		v.Final = config.FinalBest
		if opts.Train.Config.Checkpoint.BestMode == "" {
			v.Final = config.FinalLast
		}
	}
	_, err := trainRun(ctx, opts.Train)
	return err // an interruption too: no validation, and main exits with its code
}
