// Package preprocess is the deterministic part of the data path, applied
// to a whole case (or a region of it) the same way at training, in the
// prepared store and at prediction: intensity normalisation (nnU-Net's
// z-score and CT schemes), the foreground index that foreground-centred
// crops draw from, and resampling to a target voxel size. Spec says which
// of them a dataset gets; package data applies it to cases.
package preprocess

import (
	"errors"
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
	// normalisation (nil: none). Absent from the JSON when nil, so stores
	// made without resampling keep their fingerprint.
	Target *[3]float64 `json:"target_spacing,omitempty"`
}

// SpecOf returns the preprocessing a data section asks for; its ct
// statistics must be resolved (see data.Setup).
func SpecOf(d config.Data) Spec {
	return Spec{Norm: d.Normalization, CTWindow: d.CTWindow, CTMean: d.CTMean, CTStd: d.CTStd,
		FGSamples: DefaultForegroundSamples, Target: d.Target()}
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
func (p *Spec) Stats(ch int, x []float32) (CTStats, error) {
	switch p.Scheme(ch) {
	case "zscore":
		m, sd, err := MeanStd(x, nil)
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
// the parameters Stats returned for it.
func (p *Spec) Normalize(ch int, x []float32, st CTStats) error {
	if p.Scheme(ch) == "none" {
		return nil
	}
	return CTNormalize(x, st)
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
