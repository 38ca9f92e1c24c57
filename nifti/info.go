package nifti

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Info is the machine-readable description of one NIfTI file that
// `train info --json` prints. Its JSON keys are a stable interface that other
// tools and tests rely on; non-finite numbers are written as null.
type Info struct {
	File         string   `json:"file"`
	NiftiVersion int      `json:"nifti_version"`
	Dim          [8]int64 `json:"dim"`
	Pixdim       [8]Float `json:"pixdim"`
	// QfacStored is pixdim[0] as the file stores it (0 stays 0); pixdim[0]
	// above is the qfac applied (±1), as nibabel reads it.
	QfacStored Float        `json:"qfac_stored"`
	Datatype   int16        `json:"datatype"`
	Bitpix     int16        `json:"bitpix"`
	VoxOffset  int64        `json:"vox_offset"`
	SclSlope   Float        `json:"scl_slope"`
	SclInter   Float        `json:"scl_inter"`
	QformCode  int32        `json:"qform_code"`
	SformCode  int32        `json:"sform_code"`
	Qform      *[4][4]Float `json:"qform"`
	Sform      [4][4]Float  `json:"sform"`
	Affine     *[4][4]Float `json:"affine"`
	Shape      []int        `json:"shape"`
	// Unit is the spatial unit of pixdim and the affines as
	// Header.SpatialUnit names it ("millimeter"; "" for xyzt_units 0):
	// the key every format's `train info --json` has.
	Unit      string     `json:"unit"`
	RawSHA256 string     `json:"raw_sha256"`
	Stats     *StatsJSON `json:"stats"`
}

// StatsJSON is Info's "stats" object.
type StatsJSON struct {
	Min  Float `json:"min"`
	Max  Float `json:"max"`
	Mean Float `json:"mean"`
	Sum  Float `json:"sum"`
}

// Float is a float64 that encodes NaN and ±Inf as JSON null (null reads
// back as NaN).
type Float = jsonfloat.Float

func toFloats(m Matrix4) [4][4]Float {
	var out [4][4]Float
	for i := range m {
		for j := range m[i] {
			out[i][j] = Float(m[i][j])
		}
	}
	return out
}

// Inspect reads a whole NIfTI file and describes it: header fields, the
// three affines, the SHA-256 of the raw voxel bytes in file order converted
// to little-endian, and statistics of the scaled data (nil for complex data).
// Also returns the header for human-readable printing.
func (r *Reader) Inspect(path string) (*Info, *Header, error) {
	h, raw, err := r.ReadRaw(path)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(raw)
	info := &Info{
		File:         path,
		NiftiVersion: h.Version,
		Dim:          h.Dim,
		Datatype:     int16(h.Datatype),
		Bitpix:       h.Bitpix,
		VoxOffset:    h.VoxOffset,
		SclSlope:     Float(h.SclSlope),
		SclInter:     Float(h.SclInter),
		QformCode:    h.QformCode,
		SformCode:    h.SformCode,
		Sform:        toFloats(h.SformAffine()),
		Shape:        h.Shape(),
		Unit:         h.SpatialUnit(),
		RawSHA256:    hex.EncodeToString(sum[:]),
	}
	for i, v := range h.Pixdim {
		info.Pixdim[i] = Float(v)
	}
	info.QfacStored = Float(h.StoredQfac)
	if q, err := h.QformAffine(); err == nil {
		qf := toFloats(q)
		info.Qform = &qf
	}
	if a, err := h.Affine(); err == nil {
		af := toFloats(a)
		info.Affine = &af
	}
	if s, err := Summarize(h, raw); err == nil {
		info.Stats = &StatsJSON{Float(s.Min), Float(s.Max), Float(s.Mean), Float(s.Sum)}
	}
	return info, h, nil
}
