package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/runlog"
)

// PlotOptions are `train plot`'s.
type PlotOptions struct {
	IO     *IOStreams
	RunDir string
}

// NewCmdPlot builds `train plot`; runF (nil: plotRun) receives the options.
func NewCmdPlot(f *Factory, runF func(context.Context, *PlotOptions) error) *cobra.Command {
	opts := &PlotOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "plot RUN_DIR",
		Short: "Draw a run's loss, Dice, learning-rate and timing curves as PNG",
		Long: `plot reads RUN_DIR/metrics.jsonl and writes into RUN_DIR/plots: loss.png,
dice.png (the mean validation Dice, its exponential moving average, and
each class's Dice under the name the dataset's dataset.json gives it, found
through the run's config.yaml), lr.png (the learning rate at each epoch's
end) and timing.png. The x axis counts epochs; the legends stand right of
the curves.`,
		Example: `  train plot runs/demo/fold_0/run_0`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.RunDir = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return plotRun(opts)
		},
	}
}

// plotRun draws the run's curves, the classes named when the run's
// dataset names them.
func plotRun(opts *PlotOptions) error {
	eps, err := runlog.Read(filepath.Join(opts.RunDir, "metrics.jsonl"))
	if err != nil {
		return err
	}
	plots := filepath.Join(opts.RunDir, "plots")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return err
	}
	names, err := runClassNames(opts.RunDir)
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "class names: %v (the legends number the classes)\n", err)
	}
	files, err := runlog.PlotWith(eps, plots, runlog.PlotOptions{ClassNames: names})
	for _, f := range files {
		fmt.Fprintln(opts.IO.Out, "wrote", f)
	}
	return err
}

// runClassNames names the foreground classes of the run in runDir as its
// dataset does: the run's config.yaml names the dataset, whose description
// (dataset.json) may name the labels. A run directory without config.yaml
// has none, and no error.
func runClassNames(runDir string) ([]string, error) {
	path := filepath.Join(runDir, "config.yaml")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil, nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	ds, err := data.OpenDataset(cfg.Data)
	if err != nil {
		return nil, err
	}
	return runlog.ClassNames(ds.LabelNames), nil
}
