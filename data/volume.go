package data

import (
	"errors"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/nifti"
)

// Volume is one case decoded and preprocessed: image channels normalised
// as configured (and resampled to data.target_spacing when set), the label
// as class indices, and the case's foreground index. Arrays are D×H×W
// (W = NIfTI x fastest).
type Volume struct {
	// Shape is (D, H, W) = NIfTI (z, y, x).
	Shape [3]int
	// SourceShape is the shape of the grid the case's files hold: Shape
	// unless the case was resampled to a target spacing (zero in a Volume
	// made by hand, meaning Shape).
	SourceShape [3]int
	// Image holds one slice per channel.
	Image [][]float32
	// Label holds class indices (nil when the case has none).
	Label []uint8
	// FG indexes foreground voxels per class (nil without a label).
	FG *augment.ForegroundIndex
	// Spacing is the voxel size along (D, H, W) in the file's units. For
	// a resampled case it is the new grid's exact voxel size,
	// spacing·SourceShape/Shape per axis: the target spacing up to the
	// rounding of the shape (see ResampledShape).
	Spacing [3]float64
	// Affine is the first image file's voxel-to-world matrix, updated for
	// the resampled grid when resampled.
	Affine nifti.Matrix4
}

// LabelsOnSourceGrid maps labels, a label map on v's grid (a prediction
// for v), onto the grid of the files v was read from by nearest neighbour,
// so it can be written beside the input. Without resampling it returns
// labels itself.
func (v *Volume) LabelsOnSourceGrid(labels []uint8) ([]uint8, error) {
	if n := v.Shape[0] * v.Shape[1] * v.Shape[2]; len(labels) != n {
		return nil, fmt.Errorf("labels have %d voxels, the volume's grid %v holds %d", len(labels), v.Shape, n)
	}
	if v.SourceShape == v.Shape || v.SourceShape == ([3]int{}) {
		return labels, nil
	}
	return ResampleNearest(labels, v.Shape, v.SourceShape)
}

// Bytes returns the memory the volume's voxels and index hold.
func (v *Volume) Bytes() int64 {
	n := int64(len(v.Label))
	for _, c := range v.Image {
		n += 4 * int64(len(c))
	}
	if v.FG != nil {
		for _, l := range v.FG.Locations {
			n += 4 * int64(len(l))
		}
	}
	return n
}

// prep is the deterministic preprocessing applied to every case: the part
// of the pipeline that does not depend on randomness, so it can be done
// once (the prepared store) or on every read with the same result.
type prep struct {
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

// prepFrom returns the preprocessing of a defaulted, validated config
// whose ct statistics are resolved (see resolveCT).
func prepFrom(cfg config.Data) prep {
	p := prep{Norm: cfg.Normalization, CTWindow: cfg.CTWindow, CTMean: cfg.CTMean, CTStd: cfg.CTStd,
		FGSamples: augment.DefaultForegroundSamples}
	if len(cfg.TargetSpacing) == 3 {
		p.Target = &[3]float64{cfg.TargetSpacing[0], cfg.TargetSpacing[1], cfg.TargetSpacing[2]}
	}
	return p
}

func (p *prep) scheme(ch int) string {
	if len(p.Norm) == 0 {
		return "zscore"
	}
	if ch < len(p.Norm) {
		return p.Norm[ch]
	}
	return p.Norm[len(p.Norm)-1]
}

// chanStats are one channel's normalisation parameters, in the form
// augment.CTNormalize takes: a z-score is CTNormalize with an unbounded
// window and the volume's mean and std.
type chanStats = augment.CTStats

// caseStats returns the normalisation parameters of every image channel
// of v, a whole decoded case, without changing v.
func (p *prep) caseStats(c Case, v *Volume) ([]chanStats, error) {
	st := make([]chanStats, len(v.Image))
	for i, im := range v.Image {
		var err error
		if st[i], err = p.stats(i, im); err != nil {
			return nil, fmt.Errorf("case %s channel %d: %w", c.ID, i, err)
		}
	}
	return st, nil
}

// indexForeground sets v.FG from v's label (none without one).
func (p *prep) indexForeground(c Case, v *Volume) error {
	v.FG = nil
	if v.Label == nil {
		return nil
	}
	fg, err := augment.BuildForegroundIndex(v.Label, v.Shape, p.FGSamples)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Label, err)
	}
	v.FG = fg
	return nil
}

// stats returns the normalisation parameters of channel ch of a whole
// volume x without changing x: the volume's mean and std for a z-score
// (with an unbounded window, so CTNormalize applies it), the dataset's for
// ct.
func (p *prep) stats(ch int, x []float32) (chanStats, error) {
	switch p.scheme(ch) {
	case "zscore":
		m, sd, err := augment.MeanStd(x, nil)
		return chanStats{Mean: m, Std: sd, Lower: math.Inf(-1), Upper: math.Inf(1)}, err
	case "ct":
		if len(p.CTWindow) != 2 {
			return chanStats{}, errors.New("ct normalisation without a window (data.ct_window unresolved)")
		}
		return chanStats{Mean: p.CTMean, Std: p.CTStd, Lower: p.CTWindow[0], Upper: p.CTWindow[1]}, nil
	}
	return chanStats{}, nil
}

// applyBox normalises only the voxels of box (a volume of shape) in x,
// with the parameters normalize returned for the whole volume: the same
// arithmetic per voxel, so the bytes inside the box are those of a whole
// normalisation.
func (p *prep) applyBox(ch int, x []float32, shape [3]int, box augment.Box, st chanStats) {
	if p.scheme(ch) == "none" || box.Empty() {
		return
	}
	full := box.Lo[1] == 0 && box.Hi[1] == shape[1] && box.Lo[2] == 0 && box.Hi[2] == shape[2]
	plane := shape[1] * shape[2]
	if full { // whole planes: one contiguous run
		augment.CTNormalize(x[box.Lo[0]*plane:box.Hi[0]*plane], st)
		return
	}
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			o := (z*shape[1] + y) * shape[2]
			augment.CTNormalize(x[o+box.Lo[2]:o+box.Hi[2]], st)
		}
	}
}

// readBufs lets a worker decode cases without allocating per sample.
type readBufs struct {
	raw []float32 // a 4D file's voxels
	lbl []float32 // a non-uint8 label as float32 before conversion
	src Volume    // the case as decoded, before resampling
}

// decodeCase reads case c's files into v, reusing v's buffers: image
// channels as stored (scaled, not normalised), the label as class indices.
// planes > 0 asks only for the first planes (D) of each 3D image file;
// other voxels of v.Image are then left as they were.
func decodeCase(c Case, channels int, v *Volume, bufs *readBufs, planes int) error {
	var rd nifti.Reader
	var shape3 [3]int
	ch := 0
	for fi, path := range c.Images {
		// One open per file: the header decides how much to read.
		err := func() error {
			f, err := rd.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			h := f.Header()
			sh := h.Shape()
			s3, n4, err := spatialShape(sh)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if fi == 0 {
				shape3 = s3
				v.Shape, v.SourceShape = s3, s3
				v.Spacing = [3]float64{h.Pixdim[3], h.Pixdim[2], h.Pixdim[1]}
				if a, err := h.Affine(); err == nil {
					v.Affine = a
				}
				nch := channels
				if nch == 0 {
					nch = n4 * len(c.Images)
				}
				if len(c.Images) > 1 && n4 != 1 {
					return fmt.Errorf("%s: a 4D image (%d volumes) in a case listed as one file per channel", path, n4)
				}
				if nch != n4*len(c.Images) {
					return fmt.Errorf("case %s: the files hold %d channels, the dataset declares %d", c.ID, n4*len(c.Images), nch)
				}
				v.Image = resizeChannels(v.Image, nch, s3[0]*s3[1]*s3[2])
			} else if s3 != shape3 || n4 != 1 {
				return fmt.Errorf("%s: shape %v differs from the first channel's (%d, %d, %d)", path, sh, shape3[2], shape3[1], shape3[0])
			}
			vox := s3[0] * s3[1] * s3[2]
			if n4 == 1 && planes > 0 && planes < s3[0] && h.Datatype.Scalar() {
				// Only the first planes are needed: stop inflating after them.
				ch++
				return f.ReadFloat32Prefix(v.Image[ch-1][:planes*s3[1]*s3[2]])
			}
			if n4 == 1 {
				ch++
				return f.ReadFloat32Into(v.Image[ch-1])
			}
			bufs.raw = grow(bufs.raw, vox*n4)
			if err := f.ReadFloat32Into(bufs.raw); err != nil {
				return err
			}
			for t := 0; t < n4; t++ {
				copy(v.Image[ch], bufs.raw[t*vox:(t+1)*vox])
				ch++
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	v.FG = nil
	if c.Label == "" {
		v.Label = nil
		return nil
	}
	f, err := rd.Open(c.Label)
	if err != nil {
		return err
	}
	defer f.Close()
	h := f.Header()
	s3, n4, err := spatialShape(h.Shape())
	if err != nil || n4 != 1 || s3 != shape3 {
		return fmt.Errorf("%s: label shape %v does not match the image's (%d, %d, %d)", c.Label, h.Shape(), shape3[2], shape3[1], shape3[0])
	}
	vox := s3[0] * s3[1] * s3[2]
	if slope, inter, err := h.Scaling(); err == nil && h.Datatype == nifti.Uint8 && slope == 1 && inter == 0 {
		// The common case: uint8 voxels are class indices already. Read them
		// into v's buffer, and only the planes asked for.
		v.Label = grow(v.Label, vox)
		n := vox
		if planes > 0 && planes < s3[0] {
			n = planes * s3[1] * s3[2]
		}
		return f.ReadRawPrefix(v.Label[:n])
	}
	bufs.lbl = grow(bufs.lbl, vox)
	if err := f.ReadFloat32Into(bufs.lbl); err != nil {
		return err
	}
	v.Label = grow(v.Label, vox)
	for i, x := range bufs.lbl {
		u := int32(x)
		if float32(u) != x || uint32(u) > 255 {
			return fmt.Errorf("%s: voxel %d has value %g, not a class index 0..255", c.Label, i, x)
		}
		v.Label[i] = uint8(u)
	}
	return nil
}

// ReadCase decodes case c's files and applies the same deterministic
// preprocessing (normalisation, foreground index) as training with data
// section cfg, without a loader: for prediction on files outside a dataset
// and for evaluation. channels is the expected channel count (0: whatever
// the files hold).
//
// ct normalisation needs its statistics in cfg (a run's config.yaml holds
// them; see Setup).
func ReadCase(cfg config.Data, c Case, channels int) (*Volume, error) {
	if cfg.NeedsCTStatistics() {
		return nil, errUnresolvedCT(cfg)
	}
	p := prepFrom(cfg)
	v, _, err := readCase(c, channels, &p, nil, nil)
	return v, err
}

// readCase decodes and preprocesses case c: normalised image channels
// (resampled to p.Target when set), the label and its foreground index.
// When into is not nil its buffers are reused (and the result is into). It
// returns the normalisation statistics used, per channel.
func readCase(c Case, channels int, p *prep, into *Volume, bufs *readBufs) (*Volume, []chanStats, error) {
	v := into
	if v == nil {
		v = &Volume{}
	}
	if bufs == nil {
		bufs = &readBufs{}
	}
	dec := v
	if p.Target != nil {
		dec = &bufs.src
	}
	if err := decodeCase(c, channels, dec, bufs, 0); err != nil {
		return nil, nil, err
	}
	st, err := p.caseStats(c, dec)
	if err != nil {
		return nil, nil, err
	}
	for i, im := range dec.Image {
		if p.scheme(i) == "none" {
			continue
		}
		if err := augment.CTNormalize(im, st[i]); err != nil {
			return nil, nil, fmt.Errorf("case %s channel %d: %w", c.ID, i, err)
		}
	}
	if p.Target != nil {
		if err := resampleCase(v, dec, *p.Target); err != nil {
			return nil, nil, fmt.Errorf("case %s (%s): %w", c.ID, c.Images[0], err)
		}
	}
	if err := p.indexForeground(c, v); err != nil {
		return nil, nil, err
	}
	return v, st, nil
}

// spatialShape turns a nibabel shape (x, y, z[, t]) into (D, H, W) and the
// number of volumes along t.
func spatialShape(sh []int) ([3]int, int, error) {
	switch {
	case len(sh) == 3:
		return [3]int{sh[2], sh[1], sh[0]}, 1, nil
	case len(sh) == 4:
		return [3]int{sh[2], sh[1], sh[0]}, sh[3], nil
	case len(sh) == 2:
		return [3]int{1, sh[1], sh[0]}, 1, nil
	case len(sh) > 4:
		for _, n := range sh[4:] {
			if n != 1 {
				return [3]int{}, 0, fmt.Errorf("shape %v: more than 4 dimensions", sh)
			}
		}
		return [3]int{sh[2], sh[1], sh[0]}, sh[3], nil
	}
	return [3]int{}, 0, fmt.Errorf("shape %v is not a 3D or 4D volume", sh)
}

func resizeChannels(img [][]float32, n, vox int) [][]float32 {
	if cap(img) < n {
		img = make([][]float32, n)
	}
	img = img[:n]
	for i := range img {
		img[i] = grow(img[i], vox)
	}
	return img
}

// grow returns b with length n, reusing its memory when large enough.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
