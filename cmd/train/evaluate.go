package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/voxtrain/voxtrain/evaluation"
)

// EvaluateOptions are `train evaluate`'s.
type EvaluateOptions struct {
	IO *IOStreams
	// PredDir holds the predictions, RefDir the references of the same
	// file names.
	PredDir, RefDir string
	labelFlags
	// Output is the summary file ("": PredDir/summary.json).
	Output string
	HD95   bool
}

// NewCmdEvaluate builds `train evaluate`; runF (nil: evaluateRun) receives
// the options.
func NewCmdEvaluate(f *Factory, runF func(context.Context, *EvaluateOptions) error) *cobra.Command {
	opts := &EvaluateOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "evaluate PRED_DIR REF_DIR",
		Short: "Score a folder of predicted label maps against references, as nnU-Net's evaluation",
		Long: `evaluate compares every label file in PRED_DIR with the file of the same
name in REF_DIR (nnUNetv2_evaluate_simple / nnUNetv2_evaluate_folder) and
writes nnU-Net v2's summary.json: per case and label TP, FP, FN, TN, Dice,
IoU, n_pred and n_ref, each metric's mean per label over the cases, and
their mean over the labels (foreground_mean). A reference without a
prediction, a prediction without a reference, or a pair of different shapes
is an error naming the files.

The labels scored are --labels, else those of --dataset-json, else every
foreground label found in any file. dataset.json also names the labels (in
the log and as summary.json's "label_names") and gives the file ending.

A region-based dataset.json (nnU-Net v2 regions: some label is a list, e.g.
"whole tumor": [1, 2, 3], with regions_class_order) is scored by region
unless --labels is given, as nnU-Net does: each region's mask is the voxels
whose label is one of its values, in the predicted label map and in the
reference; summary.json keys a region as nnU-Net does, "(1, 2, 3)", and a
plain value of such a dataset.json as its label, "3".`,
		Example: `  train evaluate evaluation/testdata/nnunet/pred evaluation/testdata/nnunet/ref --labels 1,2 -o scores/summary.json --hd95
  train evaluate /data/preds /data/Task04_Hippocampus/labelsTr --dataset-json /data/Task04_Hippocampus/dataset.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.PredDir, opts.RefDir = args[0], args[1]
			if err := opts.labelFlags.check(cmd.Flags()); err != nil {
				return err
			}
			if opts.Output == "" {
				opts.Output = filepath.Join(opts.PredDir, "summary.json")
			}
			if !strings.HasSuffix(opts.Output, ".json") {
				return fmt.Errorf("-o %s: want a .json file name (as nnU-Net's)", opts.Output)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return evaluateRun(opts)
		},
	}
	fl := cmd.Flags()
	opts.labelFlags.register(fl, "foreground labels to score")
	fl.StringVarP(&opts.Output, "output", "o", "", "summary file (default PRED_DIR/summary.json)")
	fl.BoolVar(&opts.HD95, "hd95", false, "also compute the 95th-percentile Hausdorff distance (an extra HD95 key per label)")
	return cmd
}

// labelFlags are the labels scored, the dataset.json naming them and the
// file ending compared, which evaluate and postprocess determine share.
type labelFlags struct {
	// Labels to score (nil: dataset.json's, else every label present).
	Labels []int
	// DatasetJSON names the labels (and gives them and the file ending
	// when --labels and --file-ending are not set).
	DatasetJSON string
	// FileEnding picks the files compared ("": dataset.json's, else the
	// label file ending of the references).
	FileEnding string
	// Ignore is the references' ignore label left out of the scores (0:
	// dataset.json's "ignore", else none).
	Ignore int
}

func (l *labelFlags) register(fl *pflag.FlagSet, labelsWhat string) {
	fl.IntSliceVar(&l.Labels, "labels", nil, labelsWhat+", e.g. 1,2 (default: dataset.json's, else every label present)")
	fl.StringVar(&l.DatasetJSON, "dataset-json", "", "dataset.json naming the labels (and giving them and the file ending)")
	fl.StringVar(&l.FileEnding, "file-ending", "", "compare the files with this ending (default: dataset.json's, else the references' own: .nii.gz, .nii, .nrrd, .mha, .tif, …)")
	fl.IntVar(&l.Ignore, "ignore-label", 0, "reference voxels with this label are left out of every count, as nnU-Net's ignore label (default: dataset.json's \"ignore\", else none)")
}

// check refuses a --labels list that is not foreground labels.
func (l *labelFlags) check(fl *pflag.FlagSet) error {
	if fl.Changed("labels") {
		if err := evaluation.CheckLabels(l.Labels); err != nil {
			return fmt.Errorf("--labels: %w", err)
		}
	}
	if fl.Changed("ignore-label") && (l.Ignore < 1 || l.Ignore > 255) {
		return fmt.Errorf("--ignore-label %d: want 1..255", l.Ignore)
	}
	for _, x := range l.Labels {
		if l.Ignore > 0 && x == l.Ignore {
			return fmt.Errorf("--labels %d is the --ignore-label", x)
		}
	}
	return nil
}

// scored is what --labels, --file-ending and --dataset-json resolve to:
// the labels or the regions to score, the labels' names and the file
// ending.
type scored struct {
	labels []int
	// regions are a region-based dataset.json's (nnU-Net v2), scored
	// instead of labels when --labels is not given.
	regions []evaluation.Region
	names   map[int]string
	ending  string
}

// resolve returns what --labels, --file-ending and --dataset-json ask to
// score, and sets Ignore from dataset.json when --ignore-label is unset.
func (l *labelFlags) resolve() (scored, error) {
	sc := scored{labels: l.Labels, ending: l.FileEnding}
	if l.DatasetJSON != "" {
		d, err := evaluation.ReadDataset(l.DatasetJSON)
		if err != nil {
			return scored{}, fmt.Errorf("--dataset-json: %w", err)
		}
		sc.names = d.Names
		if sc.labels == nil {
			if d.Regions != nil {
				sc.regions = d.Regions
			} else {
				sc.labels = d.Labels
			}
		}
		if sc.ending == "" {
			sc.ending = d.Ending
		}
		if l.Ignore == 0 {
			l.Ignore = d.Ignore
		}
	}
	return sc, nil
}

// evaluateRun scores the folder, logs each case and the means, and writes
// the summary.
func evaluateRun(opts *EvaluateOptions) error {
	sc, err := opts.resolve()
	if err != nil {
		return err
	}
	pairs, err := evaluation.MatchFiles(opts.PredDir, opts.RefDir, sc.ending)
	if err != nil {
		return err
	}
	s, err := evaluation.Folder(pairs, evaluation.Options{Labels: sc.labels, Regions: sc.regions, Names: sc.names, HD95: opts.HD95, Ignore: opts.Ignore, Log: opts.IO.Out})
	if err != nil {
		return err
	}
	if err := s.Write(opts.Output); err != nil {
		return err
	}
	printScores(opts.IO.Out, s, nil)
	fmt.Fprintf(opts.IO.Out, "summary: %s\n", opts.Output)
	return nil
}
