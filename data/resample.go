package data

import (
	"errors"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// resampleCase writes src (a decoded, cropped, normalised case) resampled
// to the voxel size target into dst, reusing dst's buffers: image channels
// trilinear and the label nearest (order "" or "linear"), or as nnU-Net
// (order "nnunet": NNUNetResampler); shape, spacing and affine for the new
// grid, SourceShape and Crop as src's. The foreground index is left to the
// caller (dst.FG is nil). When the shape does not change dst receives a
// copy of src, which is what resampling gives there.
func resampleCase(dst, src *Volume, target [3]float64, order string) error {
	if err := checkSpacing(src.Spacing, target); err != nil {
		return err
	}
	if src == dst {
		return errors.New("resample: source and destination are the same volume")
	}
	to := preprocess.ResampledShape(src.Shape, src.Spacing, target)
	from := src.Shape
	// The resampled case is held whole too: a finer target spacing may
	// grow a case that was decoded past what memory takes.
	if err := volume.CheckInMemory(to, len(src.Image)); err != nil {
		return fmt.Errorf("resampled from %v to %v at spacing %v: %w", from, to, target, err)
	}
	n := to[0] * to[1] * to[2]
	dst.Shape, dst.SourceShape, dst.Crop, dst.ResampleOrder = to, src.sourceShape(), src.Crop, order
	dst.Unit = src.Unit
	dst.Image = resizeChannels(dst.Image, len(src.Image), n)
	dst.FG = nil
	if src.Label == nil {
		dst.Label = nil
	} else {
		dst.Label = grow(dst.Label, n)
	}
	if to == from {
		for c := range src.Image {
			copy(dst.Image[c], src.Image[c])
		}
		copy(dst.Label, src.Label)
		dst.Spacing, dst.Affine = src.Spacing, src.Affine
		return nil
	}
	if order == "nnunet" {
		r := preprocess.NewNNUNetResampler(from, to, src.Spacing, target)
		for c := range src.Image {
			r.Image(dst.Image[c], src.Image[c])
		}
		if src.Label != nil {
			r.Labels(dst.Label, src.Label)
		}
	} else {
		r := preprocess.NewResampler(from, to)
		for c := range src.Image {
			r.Linear(dst.Image[c], src.Image[c], [3]int{}, to)
		}
		if src.Label != nil {
			r.Nearest(dst.Label, src.Label, [3]int{}, to)
		}
	}
	for a := range 3 {
		dst.Spacing[a] = src.Spacing[a] * float64(from[a]) / float64(to[a])
	}
	dst.Affine = preprocess.ResampleAffine(src.Affine, from, to)
	return nil
}

// checkSpacing reports a header voxel size that cannot be resampled from.
func checkSpacing(spacing, target [3]float64) error {
	for a, s := range spacing {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("cannot resample to target_spacing %v: the header's voxel size along axis %d is %g", target, a, s)
		}
	}
	return nil
}
