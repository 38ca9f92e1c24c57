// Package preprocess is the deterministic part of the data path, applied
// to a whole case (or a region of it) the same way at training, in the
// prepared store and at prediction: intensity normalisation (nnU-Net's
// z-score and CT schemes), the foreground index that foreground-centred
// crops draw from, and resampling to a target voxel size. Spec says which
// of them a dataset gets; package data applies it to cases.
package preprocess

import (
	"errors"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// Spec is the preprocessing of every case of a dataset: the part of the
// pipeline that does not depend on randomness, so it can be done once (the
// prepared store) or on every read with the same result. Its JSON is part
// of a prepared store's fingerprint: a change of it rebuilds the store.
type Spec struct {
	Norm     []string  `json:"normalization"` // per channel (one value: all)
	CTWindow []float64 `json:"ct_window,omitempty"`
	CTMean   float64   `json:"ct_mean,omitempty"`
	CTStd    float64   `json:"ct_std,omitempty"`
	// FGSamples is the foreground index's per-class cap.
	FGSamples int `json:"fg_samples"`
	// Target is the voxel size (D, H, W) every case is resampled to after
	// normalisation (nil: none); an axis of 0 keeps each case's own
	// spacing along it (nnU-Net's 2d: no resampling across slices; see
	// TargetIn). Absent from the JSON when nil, so stores made without
	// resampling keep their fingerprint.
	Target *[3]float64 `json:"target_spacing,omitempty"`
	// Crop crops every case to the bounding box of its nonzero mask
	// before normalisation (NonzeroMask, MaskBox), as nnU-Net always does.
	Crop bool `json:"crop_to_nonzero,omitempty"`
	// MaskNorm is use_mask_for_norm per channel (one value: all): a
	// z-score with its statistics over the nonzero mask only, voxels
	// outside set to 0 (nil: none).
	MaskNorm []bool `json:"use_mask_for_norm,omitempty"`
	// Resample is how resampling to Target interpolates: "" (linear:
	// images trilinear, labels nearest) or "nnunet" (NNUNetResampler).
	// The new fields are absent from the JSON at their defaults, so stores
	// made before them keep their fingerprint.
	Resample string `json:"resample_order,omitempty"`
	// TargetUnit is the unit Target is in (data.spacing_unit, as
	// volume.Header.Unit spells it; "": unknown, Target is in each case's
	// own unit). Not in the JSON: a training dataset in another unit is
	// refused (package data), so a store's cases are resampled to
	// Target's numbers whatever it is; prediction converts Target into
	// each input's unit (TargetIn).
	TargetUnit string `json:"-"`
}

// TargetIn returns the voxel size a case of the given spacing, in unit
// (volume.Header.Unit), is resampled to: Target converted into unit
// (unchanged when either states no unit, volume.UnitScale), its 0 axes
// taking the case's own spacing; nil when there is no Target. A unit that
// is not a length is an error naming it.
func (p *Spec) TargetIn(unit string, spacing [3]float64) (*[3]float64, error) {
	if p.Target == nil {
		return nil, nil
	}
	f, err := volume.UnitScale(p.TargetUnit, unit)
	if err != nil {
		return nil, fmt.Errorf("data.target_spacing %v %s in the file's unit: %w", *p.Target, volume.UnitName(p.TargetUnit), err)
	}
	t := *p.Target
	for a := range t {
		if t[a] == 0 {
			t[a] = spacing[a]
		} else {
			t[a] *= f
		}
	}
	return &t, nil
}

// SpecOf returns the preprocessing a data section asks for; its ct
// statistics must be resolved (see data.Setup).
func SpecOf(d config.Data) Spec {
	return Spec{Norm: d.Normalization, CTWindow: d.CTWindow, CTMean: d.CTMean, CTStd: d.CTStd,
		FGSamples: DefaultForegroundSamples, Target: d.Target(),
		Crop: d.CropToNonzero, MaskNorm: maskNorm(d.UseMaskForNorm), Resample: resampleOrder(d.ResampleOrder),
		TargetUnit: d.TargetUnit()}
}

// maskNorm is use_mask_for_norm without its all-false default, so that a
// config that sets it false keeps the fingerprint of one that leaves it out.
func maskNorm(m []bool) []bool {
	for _, b := range m {
		if b {
			return m
		}
	}
	return nil
}

// resampleOrder is resample_order as Spec holds it: "" for the default.
func resampleOrder(o string) string {
	if o == "linear" {
		return ""
	}
	return o
}

// UsesMask reports whether channel ch is z-scored within the nonzero mask.
func (p *Spec) UsesMask(ch int) bool {
	if len(p.MaskNorm) == 0 || p.Scheme(ch) != "zscore" {
		return false
	}
	if ch < len(p.MaskNorm) {
		return p.MaskNorm[ch]
	}
	return p.MaskNorm[len(p.MaskNorm)-1]
}

// NeedsMask reports whether any of n channels is z-scored within the
// nonzero mask.
func (p *Spec) NeedsMask(n int) bool {
	for ch := range n {
		if p.UsesMask(ch) {
			return true
		}
	}
	return false
}

// Whole reports whether a case must be preprocessed whole: cropping, the
// nonzero mask and cubic splines depend on the whole volume, so no region
// of the result can be computed from its neighbourhood alone.
func (p *Spec) Whole() bool {
	return p.Crop || len(p.MaskNorm) > 0 || (p.Resample != "" && p.Target != nil)
}

// Scheme returns channel ch's normalisation: "zscore", "ct" or "none".
func (p *Spec) Scheme(ch int) string {
	if len(p.Norm) == 0 {
		return "zscore"
	}
	if ch < len(p.Norm) {
		return p.Norm[ch]
	}
	return p.Norm[len(p.Norm)-1]
}

// Stats returns the normalisation parameters of channel ch of a whole
// volume x without changing x, in the form CTNormalize takes: the
// volume's mean and std with an unbounded window for a z-score, the
// dataset's window, mean and std for ct.
//
// mask, when not nil, is the nonzero mask (NormMask) a channel that
// UsesMask takes its statistics from.
func (p *Spec) Stats(ch int, x []float32, mask []uint8) (CTStats, error) {
	switch p.Scheme(ch) {
	case "zscore":
		if !p.UsesMask(ch) {
			mask = nil
		}
		m, sd, err := MeanStd(x, mask)
		return CTStats{Mean: m, Std: sd, Lower: math.Inf(-1), Upper: math.Inf(1)}, err
	case "ct":
		if len(p.CTWindow) != 2 {
			return CTStats{}, errors.New("ct normalisation without a window (data.ct_window unresolved)")
		}
		return CTStats{Mean: p.CTMean, Std: p.CTStd, Lower: p.CTWindow[0], Upper: p.CTWindow[1]}, nil
	}
	return CTStats{}, nil
}

// Normalize normalises channel ch of a whole volume x in place with st,
// the parameters Stats returned for it. A channel that UsesMask is
// normalised inside mask and set to 0 outside, as nnU-Net's
// ZScoreNormalization with use_mask_for_norm leaves it (the voxels
// outside the nonzero mask are 0 there already).
func (p *Spec) Normalize(ch int, x []float32, st CTStats, mask []uint8) error {
	if p.Scheme(ch) == "none" {
		return nil
	}
	if err := CTNormalize(x, st); err != nil {
		return err
	}
	if p.UsesMask(ch) {
		if len(mask) != len(x) {
			return errors.New("use_mask_for_norm without the nonzero mask")
		}
		for i, m := range mask {
			if m == 0 {
				x[i] = 0
			}
		}
	}
	return nil
}

// NormalizeBox normalises only the voxels of box in x, channel ch of a
// volume of shape, with st, the parameters Stats returned for the whole
// volume: the same arithmetic per voxel, so the bytes inside the box are
// those of a whole normalisation.
func (p *Spec) NormalizeBox(ch int, x []float32, shape [3]int, box volume.Box, st CTStats) {
	if p.Scheme(ch) == "none" || box.Empty() {
		return
	}
	full := box.Lo[1] == 0 && box.Hi[1] == shape[1] && box.Lo[2] == 0 && box.Hi[2] == shape[2]
	plane := shape[1] * shape[2]
	if full { // whole planes: one contiguous run
		CTNormalize(x[box.Lo[0]*plane:box.Hi[0]*plane], st)
		return
	}
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			o := (z*shape[1] + y) * shape[2]
			CTNormalize(x[o+box.Lo[2]:o+box.Hi[2]], st)
		}
	}
}
