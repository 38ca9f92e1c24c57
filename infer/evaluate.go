package infer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/volume"
)

// EvalOptions select what Evaluate scores.
type EvalOptions struct {
	// Fold picks the validation cases of that fold of the training
	// dataset (the config's splits); -1 uses the config's fold.
	Fold int
	// Dataset, when set, scores every labelled case of that dataset
	// folder (MSD or nnU-Net layout) instead.
	Dataset string
	// OutputDir receives the predictions, <case> with its reference's
	// ending (<case>.nii.gz, .nrrd, .mha, .tif, …), and summary.json (""
	// writes nothing).
	OutputDir string
	// SaveProbabilities also writes <case>.npz into OutputDir, the class
	// probabilities on the case's grid exactly as train predict's
	// --save-probabilities writes them (WriteProbabilities), so that
	// cross-validation predictions of several configurations can be
	// ensembled (nnU-Net's --val --npz).
	SaveProbabilities bool
	// Validation sets overlap, mirroring and HD95.
	Validation config.Validation
	// Log receives a line per case (nil: none).
	Log io.Writer
}

// ErrNoCases is Evaluate's error when the fold holds out no case (or the
// dataset has no labelled one).
var ErrNoCases = errors.New("evaluate: no labelled cases to score")

// Evaluate predicts and scores whole cases with m, on the grid of the
// cases' files (a case resampled to data.target_spacing is predicted on
// the resampled grid and mapped back before scoring as nnU-Net exports
// it: the logits resampled, then argmax).
func (m *Model) Evaluate(ctx context.Context, o EvalOptions) (*Scores, error) {
	dcfg := m.Config.Data
	var ds *data.Dataset
	var cases []int
	var err error
	if o.Dataset != "" {
		dcfg.Dataset, dcfg.Cases, dcfg.Format = o.Dataset, nil, "auto"
		ds, err = data.OpenDataset(dcfg)
		if err != nil {
			return nil, err
		}
		for i, c := range ds.Cases {
			if c.Label != "" {
				cases = append(cases, i)
			}
		}
	} else {
		if o.Fold >= 0 {
			dcfg.Fold = o.Fold
			if err := dcfg.Validate(); err != nil {
				return nil, fmt.Errorf("evaluate --fold %d: %w", o.Fold, err)
			}
		}
		if dcfg.Fold < 0 {
			return nil, errors.New("evaluate: the run trained on every case (fold -1); give --fold or --data")
		}
		ds, err = data.OpenDataset(dcfg)
		if err != nil {
			return nil, err
		}
		_, cases, err = data.FoldCases(ds, dcfg)
		if err != nil {
			return nil, err
		}
	}
	if len(cases) == 0 {
		return nil, ErrNoCases
	}
	classes := m.net.Config().NumClasses
	multi := m.net.Config().MultiLabel()
	names := ds.LabelNames
	if multi {
		// Class c is label c+1 in the scores (SummariseMultiLabel).
		names = map[int]string{}
		for c, n := range ds.MultiLabelNames {
			names[c+1] = n
		}
	}
	if o.SaveProbabilities && o.OutputDir == "" {
		return nil, errors.New("evaluate: probabilities are written beside the predictions: give an output folder")
	}
	keepProbs := o.SaveProbabilities
	var out []evaluation.Case
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cs := ds.Cases[c]
		v, err := data.ReadCase(dcfg, cs, m.net.Config().InChannels)
		if err != nil {
			return nil, err
		}
		// A case cropped or resampled to data.target_spacing is scored on
		// its files' grid, as nnU-Net does: the prediction mapped back
		// as nnU-Net exports it (exportPrediction) against the label as
		// stored, with the files' voxel size for HD95 — the same voxels
		// the written prediction holds.
		x, err := m.predictExported(ctx, v, o.Validation, keepProbs)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", cs.ID, err)
		}
		labels, probs := x.labels, x.probs
		ref := v
		if !v.OnSourceGrid() {
			src := dcfg
			src.TargetSpacing, src.CropToNonzero = nil, false
			if ref, err = data.ReadCase(src, cs, m.net.Config().InChannels); err != nil {
				return nil, err
			}
		}
		var sc evaluation.Case
		if multi {
			// The written labels are nnU-Net's painted regions or the
			// classes' bits; scored as bits, regions through the
			// dataset's table (as nnU-Net's np.isin(seg, region)).
			bits := labels
			if ds.RegionBits != nil {
				bits = make([]uint8, len(labels))
				for i, l := range labels {
					bits[i] = ds.RegionBits[l]
				}
			}
			sc, err = ScoreCaseMultiLabel(cs.ID, bits, ref, classes, o.Validation.HD95, m.Config.Loss.Ignore() >= 0, cs.Unknown)
		} else {
			sc, err = ScoreCase(cs.ID, labels, ref, classes, o.Validation.HD95, m.Config.Loss.Ignore())
		}
		if err != nil {
			return nil, err
		}
		sc.ReferenceFile = cs.Label
		if o.OutputDir != "" {
			// Named as the case's reference (the dataset's file_ending,
			// as nnU-Net's validation folder).
			sc.PredictionFile = filepath.Join(o.OutputDir, cs.ID+outputExt(volume.FileEnding(cs.Label)))
			if keepProbs {
				// Before the labels, as predict writes them: a label
				// file that exists has its .npz.
				shape := v.SourceShape
				if shape == ([3]int{}) {
					shape = v.Shape
				}
				if err := WriteProbabilities(filepath.Join(o.OutputDir, cs.ID+".npz"), probs, shape); err != nil {
					return nil, err
				}
			}
			if err := WriteLabels(sc.PredictionFile, cs.Images[0], labels); err != nil {
				return nil, err
			}
		}
		out = append(out, sc)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s  Dice %s\n", cs.ID, fmtDice(sc, names))
		}
	}
	evaluation.SortCases(out) // nnU-Net's order: its means' bits depend on it
	res := Summarise(classes, ds.LabelNames, o.Validation.HD95, out)
	if multi {
		// nnU-Net regions keyed as nnU-Net's validation summary.json
		// keys them; a manifest's classes by channel.
		if res, err = SummariseChannels(ds, o.Validation.HD95, out); err != nil {
			return nil, err
		}
	}
	if o.OutputDir != "" {
		if err := res.Write(filepath.Join(o.OutputDir, "summary.json")); err != nil {
			return res, err
		}
	}
	return res, nil
}

// fmtDice is a case's Dice per class, each under its dataset name where
// dataset.json gives one ("Anterior 0.8812  Posterior 0.8590"), else its
// index ("1 0.8812  2 0.8590").
func fmtDice(c evaluation.Case, names map[int]string) string {
	s := make([]string, len(c.Metrics))
	for i, m := range c.Metrics {
		name := names[i+1]
		if name == "" {
			name = fmt.Sprint(i + 1)
		}
		s[i] = fmt.Sprintf("%s %.4f", name, m.Dice)
	}
	return strings.Join(s, "  ")
}
