package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/trainer"
)

// demoConfig is the bundled demo's config, relative to the repository root.
const demoConfig = "configs/demo.yaml"

func newDemoCmd() *cobra.Command {
	var f trainFlags
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
			if f.config == "" {
				f.config = demoConfig
			}
			if _, err := os.Stat(f.config); err != nil {
				return fmt.Errorf("%s not found: run the demo from the voxtrain repository root (%w)", f.config, err)
			}
			if f.resume == "" {
				f.resume = "auto"
			}
			res, cfg, err := runTraining(cmd, &f)
			if err != nil {
				return err
			}
			if res.Interrupted {
				return nil
			}
			ckpt := filepath.Join(res.RunDir, "checkpoints", "best")
			if _, err := os.Stat(ckpt); err != nil {
				ckpt = filepath.Join(res.RunDir, "checkpoints", "last")
			}
			dev, closeDev, err := openComputeDevice(cfg.Device, cfg.Threads)
			if err != nil {
				return err
			}
			defer closeDev()
			m, err := trainer.LoadModel(ckpt, dev, 0)
			if err != nil {
				return err
			}
			defer m.Close()
			out := cmd.OutOrStdout()
			valDir := filepath.Join(res.RunDir, "validation")
			fmt.Fprintf(out, "validating %s on fold %d by sliding window\n", m.Dir, cfg.Data.Fold)
			sc, err := m.Evaluate(context.Background(), trainer.EvalOptions{Fold: -1, OutputDir: valDir,
				Validation: trainer.ValidationConfig{Overlap: 0.5}})
			if err != nil {
				return err
			}
			printScores(out, sc)
			fmt.Fprintf(out, "predictions and summary.json: %s\nplots: %s\n", valDir, filepath.Join(res.RunDir, "plots"))
			return nil
		},
	}
	addTrainFlags(cmd, &f)
	return cmd
}
