package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/infer"
)

// modelFlags are validate's and predict's: which checkpoint, on which
// device, and how the sliding window runs.
type modelFlags struct {
	Checkpoint string
	Device     string
	Threads    int
	// Batch is the patches per forward pass (0: the training batch size).
	Batch int
	// Window holds the overlap and mirroring (and, for validate, HD95).
	Window config.Validation
}

func (m *modelFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&m.Checkpoint, "checkpoint", "", "checkpoint directory, or a run's checkpoints/best or checkpoints/last")
	m.registerRuntime(cmd)
	fl.BoolVar(&m.Window.Mirror, "mirror", false, "test-time mirroring along every axis (8 passes)")
	cmd.MarkFlagRequired("checkpoint")
}

// registerRuntime registers the flags saying how a loaded model runs
// (device, threads, batch, overlap): register's without the checkpoint
// and mirroring, which predict registers its own way.
func (m *modelFlags) registerRuntime(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&m.Device, "device", "cpu", deviceHelp)
	fl.IntVar(&m.Threads, "threads", 0, "CPU threads (0: all cores)")
	fl.IntVar(&m.Batch, "batch", 0, "patches per forward pass (0: the training batch size)")
	fl.Float64Var(&m.Window.Overlap, "overlap", config.Default().Validation.Overlap, "overlap of neighbouring sliding windows")
}

// check validates the flags that need no file.
func (m *modelFlags) check(fl *pflag.FlagSet) error {
	if _, err := parseDeviceSpec(m.Device); err != nil {
		return err
	}
	switch {
	case m.Threads < 0:
		return fmt.Errorf("--threads: %d, want ≥ 0 (0: all cores)", m.Threads)
	case m.Batch < 0:
		return fmt.Errorf("--batch: %d, want ≥ 1 (or 0: the training batch size)", m.Batch)
	case !(m.Window.Overlap >= 0 && m.Window.Overlap < 1):
		return fmt.Errorf("--overlap: %v, want 0 ≤ overlap < 1", m.Window.Overlap)
	}
	return nil
}

// load opens the device and the checkpoint's model; done releases both.
func (m *modelFlags) load(open func(string, int) (*ComputeDevice, error)) (*infer.Model, func(), error) {
	dev, err := open(m.Device, m.Threads)
	if err != nil {
		return nil, nil, err
	}
	model, err := infer.LoadModel(m.Checkpoint, dev.Dev, m.Batch)
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	return model, func() { model.Close(); dev.Close() }, nil
}

// ValidateOptions are `train validate`'s.
type ValidateOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)

	Model modelFlags
	// Fold scores that fold's validation cases (-1: the checkpoint's
	// fold); Data scores every labelled case of another dataset instead.
	Fold int
	Data string
	// Output receives predictions and summary.json ("": none).
	Output string
	// SaveProbabilities also writes each case's <case>.npz into Output,
	// as predict --save-probabilities does (for train ensemble and train
	// find-best).
	SaveProbabilities bool
}

// NewCmdValidate builds `train validate`; runF (nil: validateRun) receives
// the options.
func NewCmdValidate(f *Factory, runF func(context.Context, *ValidateOptions) error) *cobra.Command {
	opts := &ValidateOptions{IO: f.IO, OpenDevice: f.OpenDevice}
	cmd := &cobra.Command{
		Use:   "validate --checkpoint C [--fold k | --data D]",
		Short: "Segment whole validation cases by sliding window and score them (Dice, HD95)",
		Long: `validate loads a checkpoint (with the config it was trained with), predicts
every validation case of a fold — or every labelled case of another dataset
folder with --data — by sliding window with Gaussian weighting (nnU-Net's
inference), and prints per-case and mean Dice per class. With --output it
also writes each prediction as <case> with its reference's ending
(<case>.nii.gz, .nrrd, .mha, .tif: the dataset's file_ending, on the
case's grid, with its affine) and summary.json; --save-probabilities adds <case>.npz, the class
probabilities on the case's grid exactly as predict --save-probabilities
writes them (nnU-Net's --val --npz), which train ensemble and train
find-best need to ensemble configurations.`,
		Example: `  train validate --checkpoint runs/demo/fold_0/run_0/checkpoints/best
  train validate --checkpoint runs/demo/fold_0/run_0/checkpoints/best --data /data/Task04_Hippocampus --output preds/ --hd95
  train validate --checkpoint runs/demo/fold_0/run_0/checkpoints/last --output cv/3d_fullres --save-probabilities`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Model.check(cmd.Flags()); err != nil {
				return err
			}
			if cmd.Flags().Changed("fold") && opts.Fold < 0 {
				// In train, --fold -1 trains on every case and leaves none
				// to validate; here -1 cannot mean that, and meaning
				// something else would mix the two up.
				return fmt.Errorf("--fold %d: want a fold ≥ 0 (train's --fold -1 trains on every case and leaves none to validate); leave --fold out to score the checkpoint's own fold, or give --data DIR", opts.Fold)
			}
			if opts.SaveProbabilities && opts.Output == "" {
				return errors.New("--save-probabilities writes CASE.npz beside the predictions: give --output DIR too")
			}
			if cmd.Flags().Changed("fold") && opts.Data != "" {
				return fmt.Errorf("--fold and --data: give one (a fold of the training dataset, or another dataset)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return validateRun(cmd.Context(), opts)
		},
	}
	opts.Model.register(cmd)
	cmd.Flags().IntVar(&opts.Fold, "fold", -1, "score this fold's validation cases (default: the fold the checkpoint was trained on)")
	cmd.Flags().StringVar(&opts.Data, "data", "", "score every labelled case of this dataset folder instead")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "write predictions and summary.json here")
	cmd.Flags().BoolVar(&opts.SaveProbabilities, "save-probabilities", false, "with --output: also write each case's class probabilities as CASE.npz (as predict --save-probabilities)")
	cmd.Flags().BoolVar(&opts.Model.Window.HD95, "hd95", false, "also compute the 95th-percentile Hausdorff distance")
	return cmd
}

// validateRun scores the checkpoint and prints per-case and mean Dice.
func validateRun(ctx context.Context, opts *ValidateOptions) error {
	if opts.Output != "" {
		// Checked before the checkpoint loads and the cases are scored,
		// not after minutes of inference.
		if err := checkOutputDir(opts.Output); err != nil {
			return fmt.Errorf("--output %s: %w", opts.Output, err)
		}
	}
	m, done, err := opts.Model.load(opts.OpenDevice)
	if err != nil {
		return err
	}
	defer done()
	out := opts.IO.Out
	fmt.Fprintf(out, "checkpoint %s\n", m.Dir)
	res, err := m.Evaluate(ctx, infer.EvalOptions{Fold: opts.Fold, Dataset: opts.Data, OutputDir: opts.Output,
		SaveProbabilities: opts.SaveProbabilities, Validation: opts.Model.Window, Log: out})
	if err != nil {
		return err
	}
	// The classes as the training dataset names them (the model's classes
	// are that dataset's, whatever --data scores); none when it cannot be
	// opened here.
	names, _ := runClassNames(m.Dir)
	printScores(out, res, names)
	if opts.Output != "" {
		what := "predictions"
		if opts.SaveProbabilities {
			what = "predictions, probabilities (.npz)"
		}
		fmt.Fprintf(out, "%s and summary.json in %s\n", what, opts.Output)
	}
	return nil
}

// checkOutputDir makes sure dir is a folder (made if missing) that files
// can be created in.
func checkOutputDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return errors.New("is a file, want a folder for the predictions and summary.json")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %w", err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// printScores prints the number of cases and each class's mean Dice (and
// HD95), the class named as names has it (names[k] is class k+1's, see
// runlog.ClassNames) or else as the summary has it (the scored dataset's
// dataset.json); a class with neither prints its index alone. The last line
// is summary.json's foreground_mean Dice (nnU-Net's: the plain mean of the
// class means). A summary of regions (train evaluate on a region-based
// dataset.json) prints each region as "region (1, 2, 3) (whole tumor)".
func printScores(w io.Writer, s *infer.Scores, names []string) {
	fmt.Fprintf(w, "%d cases\n", len(s.Cases))
	if s.Regions != nil {
		for j := range s.Regions {
			line := fmt.Sprintf("  %s: mean Dice %.4f", s.EntryName(j), s.Mean[j].Dice)
			if s.HD95 {
				line += fmt.Sprintf("  mean HD95 %.2f", s.Mean[j].HD95)
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintf(w, "mean Dice over regions: %.4f\n", s.ForegroundMean.Dice)
		return
	}
	for j, l := range s.Labels {
		label := fmt.Sprintf("class %d", l)
		name := s.Names[l]
		if l-1 < len(names) && names[l-1] != "" {
			name = names[l-1]
		}
		if name != "" {
			label += " (" + name + ")"
		}
		line := fmt.Sprintf("  %s: mean Dice %.4f", label, s.Mean[j].Dice)
		if s.HD95 {
			line += fmt.Sprintf("  mean HD95 %.2f", s.Mean[j].HD95)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "mean Dice over classes: %.4f\n", s.ForegroundMean.Dice)
}
