package data

import (
	"errors"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/preprocess"
)

// resampleCase writes src (a decoded, normalised case) resampled to the
// voxel size target into dst, reusing dst's buffers: image channels
// trilinear, the label nearest, shape, spacing and affine for the new
// grid, SourceShape the old shape. The foreground index is left to the
// caller (dst.FG is nil). When the shape does not change dst receives a
// copy of src, which is what resampling gives there.
func resampleCase(dst, src *Volume, target [3]float64) error {
	if err := checkSpacing(src.Spacing, target); err != nil {
		return err
	}
	if src == dst {
		return errors.New("resample: source and destination are the same volume")
	}
	to := preprocess.ResampledShape(src.Shape, src.Spacing, target)
	from := src.Shape
	n := to[0] * to[1] * to[2]
	dst.Shape, dst.SourceShape = to, from
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
	r := preprocess.NewResampler(from, to)
	for c := range src.Image {
		r.Linear(dst.Image[c], src.Image[c], [3]int{}, to)
	}
	if src.Label != nil {
		r.Nearest(dst.Label, src.Label, [3]int{}, to)
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
