package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/postprocess"
)

// NewCmdPostprocess builds `train postprocess`, the parent of determine and
// apply.
func NewCmdPostprocess(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "postprocess",
		Short: "Choose (determine) and apply nnU-Net's connected-component post-processing",
		Long: `postprocess determine tries, on cross-validation predictions and their
references, nnU-Net's post-processing steps (keep the largest connected
component of all foreground, then of each class or region) and writes the
ones that help as postprocessing.json; postprocess apply runs such a plan over a
folder of label maps.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(NewCmdPostprocessDetermine(f, nil), NewCmdPostprocessApply(f, nil))
	return cmd
}

// PostprocessDetermineOptions are `train postprocess determine`'s.
type PostprocessDetermineOptions struct {
	IO              *IOStreams
	PredDir, RefDir string
	// Output is the plan ("": PredDir/postprocessing.json).
	Output string
	labelFlags
}

// NewCmdPostprocessDetermine builds `train postprocess determine`; runF
// (nil: postprocessDetermineRun) receives the options.
func NewCmdPostprocessDetermine(f *Factory, runF func(context.Context, *PostprocessDetermineOptions) error) *cobra.Command {
	opts := &PostprocessDetermineOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "determine --pred DIR --ref DIR [-o postprocessing.json]",
		Short: "Decide from cross-validation predictions which post-processing steps help",
		Long: `determine scores the predictions in --pred against the references in --ref
(summary.json in --pred, written when missing, as nnU-Net), then tries, as
nnU-Net's determine_postprocessing: keeping only the largest connected
component (26-connected) of all foreground labels together — kept when the
mean foreground Dice rises and no label's mean Dice falls — and then, with
more than one label, of each label in turn — kept when that label's mean
Dice rises.

A region-based dataset.json (nnU-Net v2 regions, e.g. "whole tumor":
[1, 2, 3], "tumor core": [2, 3], "enhancing tumor": 3, with
regions_class_order) is scored by region unless --labels is given, as
nnU-Net does: the first step still keeps the largest component of all
foreground labels together, kept when the mean Dice over the regions rises
and no region's falls; then, with more than one region, each region in
dataset.json's order keeps the largest component of the voxels whose label
is one of its values (the rest of them become background), kept when that
region's mean Dice rises. train predict --postprocessing and postprocess
apply run such region steps on the painted label maps.

It writes the plan (-o, default PRED/postprocessing.json: the
steps, each decision with the Dice before and after, the scores before and
after) and the post-processed predictions, with their summary.json, into
PRED/postprocessed.`,
		Example: `  train postprocess determine --pred /data/cv_predictions --ref /data/Task04_Hippocampus/labelsTr --dataset-json /data/Task04_Hippocampus/dataset.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.labelFlags.check(cmd.Flags()); err != nil {
				return err
			}
			if opts.Output == "" {
				opts.Output = filepath.Join(opts.PredDir, "postprocessing.json")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return postprocessDetermineRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.PredDir, "pred", "", "folder of predictions (e.g. every fold's validation predictions)")
	fl.StringVar(&opts.RefDir, "ref", "", "folder of the references, same file names")
	fl.StringVarP(&opts.Output, "output", "o", "", "the plan to write (default PRED/postprocessing.json)")
	opts.labelFlags.register(fl, "foreground labels")
	cmd.MarkFlagRequired("pred")
	cmd.MarkFlagRequired("ref")
	return cmd
}

func postprocessDetermineRun(opts *PostprocessDetermineOptions) error {
	sc, err := opts.resolve()
	if err != nil {
		return err
	}
	pairs, err := evaluation.MatchFiles(opts.PredDir, opts.RefDir, sc.ending)
	if err != nil {
		return err
	}
	out := opts.IO.Out
	ppDir := filepath.Join(opts.PredDir, "postprocessed")
	res, err := determinePostprocessing(pairs, sc, opts.Ignore, ppDir, opts.Output, out)
	if err != nil {
		return err
	}
	// The predictions' own summary.json is left alone when there is one
	// (nnU-Net's rule too): it may hold more (HD95 from train validate).
	sumPath := filepath.Join(opts.PredDir, "summary.json")
	if _, err := os.Stat(sumPath); errors.Is(err, os.ErrNotExist) {
		if err := res.Baseline.Write(sumPath); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d step(s) kept; mean foreground Dice %.5f → %.5f\n", len(res.Plan.Steps),
		res.Baseline.ForegroundMean.Dice, res.Postprocess.ForegroundMean.Dice)
	fmt.Fprintf(out, "plan: %s\npost-processed predictions and summary.json: %s\n", opts.Output, ppDir)
	return nil
}

// determinePostprocessing decides nnU-Net's post-processing on the
// prediction/reference pairs (postprocess.Determine, scoring what sc
// says), writes the post-processed predictions with their summary.json
// into ppDir and the plan to planPath: postprocess determine's work, which
// find-best does on the chosen candidate.
func determinePostprocessing(pairs []evaluation.Pair, sc scored, ignore int, ppDir, planPath string, log io.Writer) (*postprocess.Result, error) {
	// With regions, Labels nil: Determine takes nnU-Net's foreground
	// labels from the regions (every value they list but 0).
	res, err := postprocess.Determine(pairs, postprocess.Options{Labels: sc.labels, Regions: sc.regions, Names: sc.names, Ignore: ignore, Log: log})
	if err != nil {
		return nil, err
	}
	preds := make([]string, len(pairs))
	for i, p := range pairs {
		preds[i] = p.Prediction
	}
	written, err := res.Plan.ApplyFiles(preds, ppDir, nil)
	if err != nil {
		return nil, err
	}
	for i := range res.Postprocess.Cases {
		res.Postprocess.Cases[i].PredictionFile = written[i]
	}
	if err := res.Postprocess.Write(filepath.Join(ppDir, "summary.json")); err != nil {
		return nil, err
	}
	if err := res.Plan.Write(planPath); err != nil {
		return nil, err
	}
	return res, nil
}

// PostprocessApplyOptions are `train postprocess apply`'s.
type PostprocessApplyOptions struct {
	IO            *IOStreams
	Plan          string
	InDir, OutDir string
	FileEnding    string
}

// NewCmdPostprocessApply builds `train postprocess apply`; runF (nil:
// postprocessApplyRun) receives the options.
func NewCmdPostprocessApply(f *Factory, runF func(context.Context, *PostprocessApplyOptions) error) *cobra.Command {
	opts := &PostprocessApplyOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "apply --plan postprocessing.json IN_DIR OUT_DIR",
		Short: "Post-process every label map of a folder as a plan says",
		Long: `apply runs the steps of a postprocessing.json (written by postprocess
determine) over every label file in IN_DIR and writes each, under the same
name and with its input's header, into OUT_DIR.`,
		Example: `  train postprocess apply --plan /data/cv_predictions/postprocessing.json /data/test_predictions /data/test_postprocessed`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.InDir, opts.OutDir = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return postprocessApplyRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Plan, "plan", "", "postprocessing.json to follow")
	cmd.Flags().StringVar(&opts.FileEnding, "file-ending", "", "post-process the files with this ending (default: every label file ending: .nii.gz, .nii, .hdr, .nrrd, .mha, .tif, …)")
	cmd.MarkFlagRequired("plan")
	return cmd
}

func postprocessApplyRun(opts *PostprocessApplyOptions) error {
	plan, err := postprocess.Load(opts.Plan)
	if err != nil {
		return err
	}
	files, err := postprocess.LabelFiles(opts.InDir, opts.FileEnding)
	if err != nil {
		return err
	}
	written, err := plan.ApplyFiles(files, opts.OutDir, opts.IO.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "%d file(s) post-processed (%d step(s)) into %s\n", len(written), len(plan.Steps), opts.OutDir)
	return nil
}
