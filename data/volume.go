package data

import (
	"fmt"

	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
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
	FG *preprocess.ForegroundIndex
	// Spacing is the voxel size along (D, H, W) in the file's units. For
	// a resampled case it is the new grid's exact voxel size,
	// spacing·SourceShape/Shape per axis: the target spacing up to the
	// rounding of the shape (see ResampledShape).
	Spacing [3]float64
	// Affine is the first image file's voxel-to-world matrix, updated for
	// the resampled grid when resampled.
	Affine volume.Affine
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
	return preprocess.ResampleNearest(labels, v.Shape, v.SourceShape)
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
