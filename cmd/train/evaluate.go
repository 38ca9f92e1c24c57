package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/metrics"
	"github.com/voxtrain/voxtrain/runlog"
	"github.com/voxtrain/voxtrain/trainer"
)

// evalFlags are shared by validate and predict.
type evalFlags struct {
	checkpoint string
	device     string
	threads    int
	batch      int
	overlap    float64
	mirror     bool
}

func addEvalFlags(cmd *cobra.Command, f *evalFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.checkpoint, "checkpoint", "", "checkpoint directory, or a run's checkpoints/best or checkpoints/last")
	fl.StringVar(&f.device, "device", "cpu", "cpu, cuda, cuda:N, cuda:N,tf32 or cuda:N,bf16")
	fl.IntVar(&f.threads, "threads", 0, "CPU threads (0: all cores)")
	fl.IntVar(&f.batch, "batch", 0, "patches per forward pass (0: the training batch size)")
	fl.Float64Var(&f.overlap, "overlap", 0.5, "overlap of neighbouring sliding windows")
	fl.BoolVar(&f.mirror, "mirror", false, "test-time mirroring along every axis (8 passes)")
	cmd.MarkFlagRequired("checkpoint")
}

// load opens the device and the checkpoint's model; done releases both.
func (f *evalFlags) load() (m *trainer.Model, done func(), err error) {
	dev, closeDev, err := openComputeDevice(f.device, f.threads)
	if err != nil {
		return nil, nil, err
	}
	m, err = trainer.LoadModel(f.checkpoint, dev, f.batch)
	if err != nil {
		closeDev()
		return nil, nil, err
	}
	return m, func() { m.Close(); closeDev() }, nil
}

func newValidateCmd() *cobra.Command {
	var f evalFlags
	var fold int
	var dataset, outDir string
	var hd95 bool
	cmd := &cobra.Command{
		Use:   "validate --checkpoint C [--fold k | --data D]",
		Short: "Segment whole validation cases by sliding window and score them (Dice, HD95)",
		Long: `validate loads a checkpoint (with the config it was trained with), predicts
every validation case of a fold — or every labelled case of another dataset
folder with --data — by sliding window with Gaussian weighting (nnU-Net's
inference), and prints per-case and mean Dice per class. With --output it
also writes each prediction as <case>.nii.gz (on the case's grid, with its
affine) and summary.json.`,
		Example: `  train validate --checkpoint runs/demo/fold_0/run_0/checkpoints/best
  train validate --checkpoint runs/demo/fold_0/run_0/checkpoints/best --data /data/Task04_Hippocampus --output preds/ --hd95`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, done, err := f.load()
			if err != nil {
				return err
			}
			defer done()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "checkpoint %s\n", m.Dir)
			res, err := m.Evaluate(context.Background(), trainer.EvalOptions{Fold: fold, Dataset: dataset, OutputDir: outDir,
				Validation: trainer.ValidationConfig{Overlap: f.overlap, Mirror: f.mirror, HD95: hd95}, Log: out})
			if err != nil {
				return err
			}
			printScores(out, res)
			if outDir != "" {
				fmt.Fprintf(out, "predictions and summary.json in %s\n", outDir)
			}
			return nil
		},
	}
	addEvalFlags(cmd, &f)
	cmd.Flags().IntVar(&fold, "fold", -1, "score this fold's validation cases (default: the fold the checkpoint was trained on)")
	cmd.Flags().StringVar(&dataset, "data", "", "score every labelled case of this dataset folder instead")
	cmd.Flags().StringVar(&outDir, "output", "", "write predictions and summary.json here")
	cmd.Flags().BoolVar(&hd95, "hd95", false, "also compute the 95th-percentile Hausdorff distance")
	return cmd
}

func printScores(w io.Writer, s trainer.SlidingScores) {
	fmt.Fprintf(w, "%d cases\n", len(s.Cases))
	for c, d := range s.MeanDice {
		line := fmt.Sprintf("  class %d: mean Dice %.4f", c+1, d)
		if c < len(s.MeanHD95) {
			line += fmt.Sprintf("  mean HD95 %.2f", s.MeanHD95[c])
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "mean Dice over classes: %.4f\n", metrics.NanMean(s.MeanDice))
}

func newPredictCmd() *cobra.Command {
	var f evalFlags
	var inputs []string
	var output string
	cmd := &cobra.Command{
		Use:   "predict --checkpoint C --input in.nii.gz --output out.nii.gz",
		Short: "Segment one image by sliding window and write the label map with the input's header",
		Long: `predict segments an image (one --input per channel, or one 4D file) with a
trained checkpoint, applying the same preprocessing as training, and writes
the labels as uint8 NIfTI on the input's grid: same dimensions, voxel sizes,
qform and sform, so ITK-SNAP, 3D Slicer and FSLeyes overlay it on the input.`,
		Example: `  train predict --checkpoint runs/demo/fold_0/run_0/checkpoints/best \
      --input testdata/demo/imagesTr/hippocampus_001.nii.gz --output hippocampus_001_pred.nii.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(inputs) == 0 || output == "" {
				return fmt.Errorf("--input and --output are required")
			}
			m, done, err := f.load()
			if err != nil {
				return err
			}
			defer done()
			if err := m.PredictFile(inputs, output, trainer.ValidationConfig{Overlap: f.overlap, Mirror: f.mirror}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", output)
			return nil
		},
	}
	addEvalFlags(cmd, &f)
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "input image (repeat for several channels, in channel order)")
	cmd.Flags().StringVar(&output, "output", "", "output label file (.nii or .nii.gz)")
	return cmd
}

func newPlotCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "plot RUN_DIR",
		Short:   "Draw a run's loss, Dice and timing curves as PNG",
		Long:    `plot reads RUN_DIR/metrics.jsonl and writes loss.png, dice.png and timing.png into RUN_DIR/plots.`,
		Example: `  train plot runs/demo/fold_0/run_0`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			eps, err := runlog.Read(filepath.Join(dir, "metrics.jsonl"))
			if err != nil {
				return err
			}
			plots := filepath.Join(dir, "plots")
			if err := os.MkdirAll(plots, 0o755); err != nil {
				return err
			}
			files, err := runlog.Plot(eps, plots)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", f)
			}
			return err
		},
	}
}
