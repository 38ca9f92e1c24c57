package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/runlog"
)

// Model is a trained U-Net loaded from a checkpoint, with the resolved
// config it was trained with, ready for sliding-window prediction.
type Model struct {
	Config *Config
	Dir    string // the checkpoint loaded
	net    *nn.UNet
	pred   *predictor
}

// checkpointDir resolves what Load accepts (a checkpoint directory, a
// last/best pointer, or the model.safetensors inside one) to the
// directory holding config.yaml.
func checkpointDir(path string) (string, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.IsDir() {
		path = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(path, "config.yaml")); err != nil {
		return "", fmt.Errorf("checkpoint %s: no config.yaml beside the weights (give a checkpoint directory saved by train, or its last/best pointer)", path)
	}
	return path, nil
}

// LoadModel builds the model of the checkpoint at path on dev and loads
// its weights. Inference runs batches of batch patches (0: the training
// batch size).
func LoadModel(path string, dev nn.Device, batch int) (*Model, error) {
	dir, err := checkpointDir(path)
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	cfg, err := ParseConfig(text, filepath.Join(dir, "config.yaml"))
	if err != nil {
		return nil, err
	}
	if err := cfg.Resolve(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: config.yaml: %w", dir, err)
	}
	net, err := nn.NewUNet(dev, cfg.Model, cfg.Seed)
	if err != nil {
		return nil, err
	}
	params, err := nn.ExportParams(dev, net.Params())
	if err != nil {
		net.Free()
		return nil, err
	}
	mt := toCheckpoint(params)
	if _, err := checkpoint.Load(dir, mt, nil); err != nil {
		net.Free()
		return nil, err
	}
	if err := nn.ImportParams(dev, net.Params(), fromCheckpoint(mt)); err != nil {
		net.Free()
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if batch <= 0 {
		batch = cfg.Train.BatchSize
	}
	p, err := newPredictor(net, batch, cfg.Train.PatchSize)
	if err != nil {
		net.Free()
		return nil, err
	}
	return &Model{Config: cfg, Dir: dir, net: net, pred: p}, nil
}

// Close releases the model's device memory.
func (m *Model) Close() {
	m.pred.free()
	m.net.Free()
}

// Segment predicts the label map of a preprocessed volume.
func (m *Model) Segment(v *data.Volume, vc ValidationConfig) ([]uint8, error) {
	if vc.Overlap == 0 {
		vc.Overlap = 0.5
	}
	if len(v.Image) != m.net.Config().InChannels {
		return nil, fmt.Errorf("the model takes %d channels, the volume has %d", m.net.Config().InChannels, len(v.Image))
	}
	return predictLabels(m.pred, v, vc, m.Config.Train.PatchSize)
}

// PredictFile segments the image file(s) (one per channel, or one 4D file)
// and writes the labels to output as uint8 with the first input's header:
// dimensions, voxel sizes, qform and sform unchanged, so viewers (ITK-SNAP,
// 3D Slicer, FSLeyes) overlay it on the input.
func (m *Model) PredictFile(inputs []string, output string, vc ValidationConfig) error {
	v, err := data.ReadCase(m.Config.Data, data.Case{ID: filepath.Base(inputs[0]), Images: inputs}, 0)
	if err != nil {
		return err
	}
	labels, err := m.Segment(v, vc)
	if err != nil {
		return fmt.Errorf("predict %s: %w", inputs[0], err)
	}
	// Back onto the input's grid when data.target_spacing resampled it.
	if labels, err = v.LabelsOnSourceGrid(labels); err != nil {
		return fmt.Errorf("predict %s: %w", inputs[0], err)
	}
	return WriteLabels(output, inputs[0], labels)
}

// WriteLabels writes a label map on the grid of the reference image file.
func WriteLabels(output, reference string, labels []uint8) error {
	ref, err := nifti.ReadHeader(reference)
	if err != nil {
		return err
	}
	h := *ref
	h.Extensions = nil
	h.Datatype = nifti.Uint8
	h.Bitpix = 8
	h.SclSlope, h.SclInter = 0, 0
	h.CalMin, h.CalMax = 0, 0
	h.IntentCode, h.IntentName = 1002, "" // NIFTI_INTENT_LABEL
	h.Descrip = "voxtrain prediction"
	if h.Dim[0] > 3 {
		h.Dim[0] = 3 // drop a channel axis
		for i := 4; i < 8; i++ {
			h.Dim[i] = 1
		}
	}
	if n := h.NumVoxels(); n != int64(len(labels)) {
		return fmt.Errorf("write %s: %d labels for the %d voxels of %s", output, len(labels), n, reference)
	}
	vals := make([]float32, len(labels))
	for i, l := range labels {
		vals[i] = float32(l)
	}
	if dir := filepath.Dir(output); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", output, err)
		}
	}
	return nifti.WriteFloat32(output, &h, vals)
}

// EvalOptions select what Evaluate scores.
type EvalOptions struct {
	// Fold picks the validation cases of that fold of the training
	// dataset (the config's splits); -1 uses the config's fold.
	Fold int
	// Dataset, when set, scores every labelled case of that dataset
	// folder (MSD or nnU-Net layout) instead.
	Dataset string
	// OutputDir receives <case>.nii.gz predictions and summary.json
	// ("" writes nothing).
	OutputDir string
	// Validation sets overlap, mirroring and HD95.
	Validation ValidationConfig
	// Log receives a line per case (nil: none).
	Log io.Writer
}

// Evaluate predicts and scores whole cases with m, on the grid of the
// cases' files (a case resampled to data.target_spacing is predicted on
// the resampled grid and its labels mapped back before scoring).
func (m *Model) Evaluate(ctx context.Context, o EvalOptions) (SlidingScores, error) {
	dcfg := m.Config.Data
	var ds *data.Dataset
	var cases []int
	var err error
	if o.Dataset != "" {
		dcfg.Dataset, dcfg.Cases, dcfg.Format = o.Dataset, nil, ""
		ds, err = data.OpenDataset(dcfg)
		if err != nil {
			return SlidingScores{}, err
		}
		for i, c := range ds.Cases {
			if c.Label != "" {
				cases = append(cases, i)
			}
		}
	} else {
		if o.Fold >= 0 {
			dcfg.Fold = o.Fold
		}
		if dcfg.Fold < 0 {
			return SlidingScores{}, errors.New("evaluate: the run trained on every case (fold -1); give --fold or --data")
		}
		ds, err = data.OpenDataset(dcfg)
		if err != nil {
			return SlidingScores{}, err
		}
		_, cases, err = data.FoldCases(ds, dcfg)
		if err != nil {
			return SlidingScores{}, err
		}
	}
	if len(cases) == 0 {
		return SlidingScores{}, errors.New("evaluate: no labelled cases to score")
	}
	var out []CaseScores
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return SlidingScores{}, err
		}
		cs := ds.Cases[c]
		v, err := data.ReadCase(dcfg, cs, m.net.Config().InChannels)
		if err != nil {
			return SlidingScores{}, err
		}
		labels, err := m.Segment(v, o.Validation)
		if err != nil {
			return SlidingScores{}, fmt.Errorf("case %s: %w", cs.ID, err)
		}
		// A case resampled to data.target_spacing is scored on its files'
		// grid, as nnU-Net does: the prediction mapped back (nearest) against
		// the label as stored, with the files' voxel size for HD95 — the
		// same voxels the written prediction holds.
		ref := v
		if labels, err = v.LabelsOnSourceGrid(labels); err != nil {
			return SlidingScores{}, fmt.Errorf("case %s: %w", cs.ID, err)
		}
		if v.SourceShape != v.Shape && v.SourceShape != ([3]int{}) {
			src := dcfg
			src.TargetSpacing = nil
			if ref, err = data.ReadCase(src, cs, m.net.Config().InChannels); err != nil {
				return SlidingScores{}, err
			}
		}
		sc, err := scoreCase(cs.ID, labels, ref, m.net.Config().NumClasses, o.Validation.HD95)
		if err != nil {
			return SlidingScores{}, err
		}
		out = append(out, sc)
		if o.OutputDir != "" {
			if err := WriteLabels(filepath.Join(o.OutputDir, cs.ID+".nii.gz"), cs.Images[0], labels); err != nil {
				return SlidingScores{}, err
			}
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s  dice %s\n", cs.ID, fmtFloats(sc.Dice))
		}
	}
	res := summarise(out)
	if o.OutputDir != "" {
		b, err := json.MarshalIndent(jsonScores(res), "", " ")
		if err != nil {
			return res, err
		}
		if err := checkpoint.WriteFileAtomic(filepath.Join(o.OutputDir, "summary.json"), append(b, '\n'), 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

func fmtFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4f", x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// summaryJSON is summary.json: NaN Dice (a class absent from prediction and
// reference) and infinite HD95 (absent from one of them) are written as null.
type summaryJSON struct {
	Cases              []caseJSON     `json:"cases"`
	MeanDice           []runlog.Float `json:"mean_dice"`
	MeanDiceAllClasses runlog.Float   `json:"mean_dice_all_classes"`
	MeanHD95           []runlog.Float `json:"mean_hd95,omitempty"`
}

type caseJSON struct {
	ID   string         `json:"id"`
	Dice []runlog.Float `json:"dice"`
	HD95 []runlog.Float `json:"hd95,omitempty"`
}

func jsonFloats(v []float64) []runlog.Float {
	out := make([]runlog.Float, len(v))
	for i, x := range v {
		out[i] = runlog.Float(x)
	}
	return out
}

func jsonScores(s SlidingScores) summaryJSON {
	out := summaryJSON{MeanDice: jsonFloats(s.MeanDice), MeanDiceAllClasses: runlog.Float(s.Mean()), MeanHD95: jsonFloats(s.MeanHD95)}
	for _, c := range s.Cases {
		out.Cases = append(out.Cases, caseJSON{ID: c.ID, Dice: jsonFloats(c.Dice), HD95: jsonFloats(c.HD95)})
	}
	return out
}
