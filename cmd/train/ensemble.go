package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/ensemble"
	"github.com/voxtrain/voxtrain/evaluation"
)

// EnsembleOptions are `train ensemble`'s.
type EnsembleOptions struct {
	IO *IOStreams
	// Inputs are the prediction folders (at least two), Output the
	// ensemble's.
	Inputs []string
	Output string
	// SaveProbabilities also writes the mean probabilities as CASE.npz.
	SaveProbabilities bool
	// DatasetJSON, when set, says how probabilities become labels: a
	// region-based one (regions_class_order) paints nnU-Net regions from
	// sigmoid channels; any other, argmax. MultiLabel asks for bit-packed
	// sigmoid labels (a manifest's multi-label classes).
	DatasetJSON string
	MultiLabel  bool
}

// NewCmdEnsemble builds `train ensemble`; runF (nil: ensembleRun) receives
// the options.
func NewCmdEnsemble(f *Factory, runF func(context.Context, *EnsembleOptions) error) *cobra.Command {
	opts := &EnsembleOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "ensemble -i DIR1 DIR2 [DIR...] -o OUT",
		Short: "Average the saved probabilities of several prediction folders (nnUNetv2_ensemble)",
		Long: `ensemble combines predictions of the same cases made by different models
(configurations, e.g. 3d_fullres and 2d, each predicted with
--save-probabilities), as nnUNetv2_ensemble: for every case, CASE.npz must
be in every folder (a case missing from one is an error naming it); the
probabilities are averaged, turned into labels as train predict does, and
written as OUT/CASE with the ending of the first folder's label file for
that case (CASE.nii.gz, .nrrd, .mha, .tif) and its header (affine, voxel
size). One case is in memory at a time.

Labels: argmax over the channels (softmax models). With --dataset-json of a
region-based dataset (nnU-Net regions, regions_class_order) the channels are
sigmoid regions, each > 0.5 painted in regions_class_order, later regions
over earlier ones; --multi-label without regions gives the bit-packed
labels of multi-label models. --save-probabilities also writes the mean
probabilities as OUT/CASE.npz.`,
		Example: `  train ensemble -i /data/preds_3d_fullres /data/preds_2d -o /data/preds_ensemble
  train ensemble -i /data/brats_3d /data/brats_2d -o /data/brats_ens --dataset-json /data/Dataset137_BraTS/dataset.json`,
		// Positional arguments are the rest of a space-separated -i list
		// (nnU-Net's -i DIR1 DIR2); checked in RunE.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && len(opts.Inputs) == 0 {
				return usageErr(cmd, fmt.Errorf("unexpected argument %q (the folders go after -i)", args[0]))
			}
			opts.Inputs = append(opts.Inputs, args...)
			switch {
			case len(opts.Inputs) < 2:
				return usageErr(cmd, fmt.Errorf("-i: %d folder(s), want at least 2 prediction folders to ensemble", len(opts.Inputs)))
			case opts.Output == "":
				return usageErr(cmd, errors.New("--output (-o) is required"))
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return ensembleRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.Inputs, "input", "i", nil, "prediction folders holding CASE.npz (from predict or validate --save-probabilities): -i A B C")
	fl.StringVarP(&opts.Output, "output", "o", "", "folder for the ensemble's label files")
	fl.BoolVar(&opts.SaveProbabilities, "save-probabilities", false, "also write the mean probabilities as OUT/CASE.npz")
	fl.StringVar(&opts.DatasetJSON, "dataset-json", "", "dataset.json: a region-based one paints nnU-Net regions (regions_class_order) from sigmoid channels")
	fl.BoolVar(&opts.MultiLabel, "multi-label", false, "the channels are sigmoid classes (model.targets multi_label) without regions: bit-packed labels")
	return cmd
}

// labelOptions are the ensemble.Options that turn probabilities into
// labels as --dataset-json and --multi-label say.
func labelOptions(datasetJSON string, multiLabel bool) (ensemble.Options, error) {
	o := ensemble.Options{MultiLabel: multiLabel}
	if datasetJSON == "" {
		return o, nil
	}
	d, err := evaluation.ReadDataset(datasetJSON)
	if err != nil {
		return o, fmt.Errorf("--dataset-json: %w", err)
	}
	if d.Regions != nil {
		if d.RegionsClassOrder == nil {
			return o, fmt.Errorf("--dataset-json %s: region-based labels without regions_class_order, which says what each region paints", datasetJSON)
		}
		o.MultiLabel, o.RegionsClassOrder = true, d.RegionsClassOrder
	}
	return o, nil
}

func ensembleRun(opts *EnsembleOptions) error {
	o, err := labelOptions(opts.DatasetJSON, opts.MultiLabel)
	if err != nil {
		return err
	}
	o.SaveProbabilities, o.Log = opts.SaveProbabilities, opts.IO.Out
	if err := checkOutputDir(opts.Output); err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	written, err := ensemble.Folders(opts.Inputs, opts.Output, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "%d cases ensembled from %d folders into %s\n", len(written), len(opts.Inputs), opts.Output)
	return nil
}
