package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
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
		Use:     "plot RUN_DIR",
		Short:   "Draw a run's loss, Dice and timing curves as PNG",
		Long:    `plot reads RUN_DIR/metrics.jsonl and writes loss.png, dice.png and timing.png into RUN_DIR/plots.`,
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

// plotRun draws the run's curves.
func plotRun(opts *PlotOptions) error {
	eps, err := runlog.Read(filepath.Join(opts.RunDir, "metrics.jsonl"))
	if err != nil {
		return err
	}
	plots := filepath.Join(opts.RunDir, "plots")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return err
	}
	files, err := runlog.Plot(eps, plots)
	for _, f := range files {
		fmt.Fprintln(opts.IO.Out, "wrote", f)
	}
	return err
}
