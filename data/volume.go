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
	// unless the case was cropped or resampled (zero in a Volume made by
	// hand, meaning Shape).
	SourceShape [3]int
	// Crop is the box of the files' grid the case was cropped to before
	// resampling (data.crop_to_nonzero); the zero Box means the whole
	// grid, uncropped.
	Crop volume.Box
	// ResampleOrder is the data.resample_order the case was resampled
	// with ("" or "linear": trilinear images, nearest labels; "nnunet").
	ResampleOrder string
	// Image holds one slice per channel.
	Image [][]float32
	// Label holds class indices (nil when the case has none).
	Label []uint8
	// FG indexes foreground voxels per class (nil without a label).
	FG *preprocess.ForegroundIndex
	// Spacing is the voxel size along (D, H, W) in the file's units. For
	// a resampled case it is the new grid's exact voxel size,
	// spacing·CropShape/Shape per axis: the target spacing up to the
	// rounding of the shape (see ResampledShape).
	Spacing [3]float64
	// Unit is the first image file's spatial unit (volume.Header.Unit;
	// "": the file states none), the unit of Spacing and Affine (as read
	// from the files: a prepared store does not keep it).
	Unit string
	// Affine is the first image file's voxel-to-world matrix, updated for
	// the crop's origin and the resampled grid.
	Affine volume.Affine
	// chunk is the chunk shape of the first image file when it is stored
	// in chunks (volume.Chunked; zero otherwise): it decides the boxes of
	// the sampled fingerprint (statsBoxes).
	chunk [3]int
}

// readBox copies box of every image channel into dst (one slice per
// channel), as fingerprintStats reads a volume in memory.
func (v *Volume) readBox(box volume.Box, dst [][]float32) error {
	sz := box.Size()
	for ch, im := range v.Image {
		k := 0
		for z := box.Lo[0]; z < box.Hi[0]; z++ {
			for y := box.Lo[1]; y < box.Hi[1]; y++ {
				o := (z*v.Shape[1]+y)*v.Shape[2] + box.Lo[2]
				copy(dst[ch][k:k+sz[2]], im[o:o+sz[2]])
				k += sz[2]
			}
		}
	}
	return nil
}

// sourceShape is SourceShape, or Shape for a Volume made by hand.
func (v *Volume) sourceShape() [3]int {
	if v.SourceShape == ([3]int{}) {
		return v.Shape
	}
	return v.SourceShape
}

// CropBox is the box of the files' grid v holds (before any resampling):
// Crop, or the whole grid when uncropped.
func (v *Volume) CropBox() volume.Box {
	if v.Crop == (volume.Box{}) {
		return volume.Whole(v.sourceShape())
	}
	return v.Crop
}

// OnSourceGrid reports whether v's grid is the files' grid: neither
// cropped nor resampled, so a prediction for v needs no mapping back.
func (v *Volume) OnSourceGrid() bool {
	return v.CropBox() == volume.Whole(v.sourceShape()) && v.Shape == v.sourceShape()
}

// LabelsOnSourceGrid maps labels, a label map on v's grid, onto the grid
// of the files v was read from, undoing the preprocessing in reverse
// order: the labels themselves resampled back to the cropped box
// (nearest neighbour; one-hot linear, nnU-Net's resize_segmentation, with
// resample_order nnunet), then pasted into the full grid with background
// (0) outside the box. Without either it returns labels itself. It is for
// a label map alone (v.Label); a prediction is mapped from the network's
// outputs instead, as nnU-Net exports one: ResampleToCropBox, labels
// there, PasteLabels.
func (v *Volume) LabelsOnSourceGrid(labels []uint8) ([]uint8, error) {
	if n := v.Shape[0] * v.Shape[1] * v.Shape[2]; len(labels) != n {
		return nil, fmt.Errorf("labels have %d voxels, the volume's grid %v holds %d", len(labels), v.Shape, n)
	}
	if v.OnSourceGrid() {
		return labels, nil
	}
	box := v.CropBox()
	cs := box.Size()
	out := labels
	if cs != v.Shape {
		var err error
		if v.ResampleOrder == "nnunet" {
			r := preprocess.NewNNUNetResampler(v.Shape, cs, v.Spacing, v.targetSpacingBack())
			out = make([]uint8, cs[0]*cs[1]*cs[2])
			r.Labels(out, labels)
		} else if out, err = preprocess.ResampleNearest(labels, v.Shape, cs); err != nil {
			return nil, err
		}
	}
	return v.PasteLabels(out)
}

// ProbabilitiesOnSourceGrid maps probs, c class channels on v's grid
// (channel-major), onto the grid of the files v was read from:
// ResampleToCropBox, then PasteProbabilities. Without resampling or crop
// it returns probs itself.
func (v *Volume) ProbabilitiesOnSourceGrid(probs []float32, c int, sigmoid bool) ([]float32, error) {
	crop, err := v.ResampleToCropBox(probs, c)
	if err != nil {
		return nil, err
	}
	return v.PasteProbabilities(crop, c, sigmoid)
}

// ResampleToCropBox resamples vals, c channels on v's grid (channel-major:
// a network's logits or probabilities), to the size of v's crop box on
// the files' grid, as nnU-Net resamples predicted logits back
// (resampling_fn_probabilities): linear interpolation, which with
// resample_order nnunet keeps nearest along the out-of-plane axis of
// anisotropic data. Linear interpolation is a convex combination with the
// same weights for every channel, so probabilities stay distributions.
// Without resampling it returns vals itself.
func (v *Volume) ResampleToCropBox(vals []float32, c int) ([]float32, error) {
	n := v.Shape[0] * v.Shape[1] * v.Shape[2]
	if c < 1 || len(vals) != c*n {
		return nil, fmt.Errorf("%d values: %d channels on the grid %v hold %d", len(vals), c, v.Shape, c*n)
	}
	cs := v.CropBox().Size()
	if cs == v.Shape {
		return vals, nil
	}
	cn := cs[0] * cs[1] * cs[2]
	out := make([]float32, c*cn)
	if v.ResampleOrder == "nnunet" {
		r := preprocess.NewNNUNetResampler(v.Shape, cs, v.Spacing, v.targetSpacingBack())
		for k := range c {
			r.Linear(out[k*cn:(k+1)*cn], vals[k*n:(k+1)*n])
		}
	} else {
		r := preprocess.NewResampler(v.Shape, cs)
		for k := range c {
			r.Linear(out[k*cn:(k+1)*cn], vals[k*n:(k+1)*n], [3]int{}, cs)
		}
	}
	return out, nil
}

// PasteProbabilities pastes probs, c class channels on v's crop box
// (ResampleToCropBox's grid), into the files' whole grid, where the voxels
// outside the box are background: probability 1 in a softmax model's
// channel 0; 0 in every sigmoid channel (multi-label, or one foreground
// channel). Without a crop it returns probs itself.
func (v *Volume) PasteProbabilities(probs []float32, c int, sigmoid bool) ([]float32, error) {
	box := v.CropBox()
	cs, src := box.Size(), v.sourceShape()
	cn := cs[0] * cs[1] * cs[2]
	if c < 1 || len(probs) != c*cn {
		return nil, fmt.Errorf("%d probabilities: %d classes on the crop box %v hold %d", len(probs), c, cs, c*cn)
	}
	if cs == src {
		return probs, nil
	}
	sn := src[0] * src[1] * src[2]
	full := make([]float32, c*sn)
	if !sigmoid && c > 1 {
		for i := range sn {
			full[i] = 1
		}
	}
	for k := range c {
		preprocess.Paste(full[k*sn:(k+1)*sn], src, probs[k*cn:(k+1)*cn], box)
	}
	return full, nil
}

// PasteLabels pastes labels on v's crop box (ResampleToCropBox's grid)
// into the files' whole grid, background (0) outside the box. Without a
// crop it returns labels itself.
func (v *Volume) PasteLabels(labels []uint8) ([]uint8, error) {
	box := v.CropBox()
	cs, src := box.Size(), v.sourceShape()
	if n := cs[0] * cs[1] * cs[2]; len(labels) != n {
		return nil, fmt.Errorf("labels have %d voxels, the crop box %v holds %d", len(labels), cs, n)
	}
	if cs == src {
		return labels, nil
	}
	full := make([]uint8, src[0]*src[1]*src[2])
	preprocess.Paste(full, src, labels, box)
	return full, nil
}

// targetSpacingBack is the voxel size of the files' grid (the target of
// mapping a prediction back): v's spacing times Shape/CropShape per axis.
func (v *Volume) targetSpacingBack() [3]float64 {
	cs := v.CropBox().Size()
	var s [3]float64
	for a := range s {
		s[a] = v.Spacing[a] * float64(v.Shape[a]) / float64(cs[a])
	}
	return s
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
