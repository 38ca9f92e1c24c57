package preprocess

import (
	"github.com/voxtrain/voxtrain/volume"
)

// Cropping to the nonzero region, nnU-Net's
// nnunetv2/preprocessing/cropping/cropping.py: the nonzero mask is the
// voxels where any channel is nonzero with its holes filled
// (create_nonzero_mask: scipy's binary_fill_holes), and a case is cropped
// to the mask's bounding box (crop_to_nonzero). nnU-Net marks the label's
// background voxels outside the mask -1; those are background again at
// training (RemoveLabelTansform -1 → 0) and only tell the z-score which
// voxels to use, so voxtrain keeps no marker in the label and passes the
// mask to the z-score instead (NormMask).

// NonzeroMask returns the mask of the voxels of shape (D, H, W) where any
// channel of img is nonzero, with its holes filled as scipy's
// binary_fill_holes does with its default structure: every zero voxel
// that no 6-connected path of zero voxels joins to the volume's border is
// set. 1 marks the mask.
func NonzeroMask(img [][]float32, shape [3]int) []uint8 {
	n := shape[0] * shape[1] * shape[2]
	m := make([]uint8, n)
	for _, im := range img {
		for i, v := range im[:n] {
			if v != 0 {
				m[i] = 1
			}
		}
	}
	fillHoles(m, shape)
	return m
}

// fillHoles sets the zero voxels of m not reached from the border through
// 6-connected zero voxels. It floods from the border with an explicit
// stack (2 marks reached background), then maps 2 → 0 and 0 → 1.
func fillHoles(m []uint8, shape [3]int) {
	D, H, W := shape[0], shape[1], shape[2]
	plane := H * W
	var stack []int32
	push := func(i int) {
		if m[i] == 0 {
			m[i] = 2
			stack = append(stack, int32(i))
		}
	}
	for z := range D {
		for y := range H {
			for x := range W {
				if z == 0 || z == D-1 || y == 0 || y == H-1 || x == 0 || x == W-1 {
					push((z*H+y)*W + x)
				}
			}
		}
	}
	for len(stack) > 0 {
		i := int(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		z, r := i/plane, i%plane
		y, x := r/W, r%W
		if x > 0 {
			push(i - 1)
		}
		if x < W-1 {
			push(i + 1)
		}
		if y > 0 {
			push(i - W)
		}
		if y < H-1 {
			push(i + W)
		}
		if z > 0 {
			push(i - plane)
		}
		if z < D-1 {
			push(i + plane)
		}
	}
	for i, v := range m {
		if v == 2 {
			m[i] = 0
		} else {
			m[i] = 1
		}
	}
}

// MaskBox returns the bounding box of the set voxels of mask (shape
// (D, H, W)), nnU-Net's get_bbox_from_mask. A mask with no voxel set gives
// the whole volume (nnU-Net's box would be empty; keeping the case whole
// leaves it usable).
func MaskBox(mask []uint8, shape [3]int) volume.Box {
	lo, hi := shape, [3]int{}
	H, W := shape[1], shape[2]
	for z := range shape[0] {
		for y := range H {
			row := mask[(z*H+y)*W : (z*H+y+1)*W]
			first, last := -1, -1
			for x, v := range row {
				if v != 0 {
					if first < 0 {
						first = x
					}
					last = x
				}
			}
			if first < 0 {
				continue
			}
			lo = [3]int{min(lo[0], z), min(lo[1], y), min(lo[2], first)}
			hi = [3]int{max(hi[0], z+1), max(hi[1], y+1), max(hi[2], last+1)}
		}
	}
	if hi == ([3]int{}) {
		return volume.Whole(shape)
	}
	return volume.Box{Lo: lo, Hi: hi}
}

// CropInto copies box of src (a volume of shape, W fastest) into dst (the
// box's voxels, W fastest) and returns dst, grown when too small.
func CropInto[T any](dst, src []T, shape [3]int, box volume.Box) []T {
	sz := box.Size()
	n := sz[0] * sz[1] * sz[2]
	if cap(dst) < n {
		dst = make([]T, n)
	}
	dst = dst[:n]
	k := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			o := (z*shape[1]+y)*shape[2] + box.Lo[2]
			k += copy(dst[k:k+sz[2]], src[o:o+sz[2]])
		}
	}
	return dst
}

// Paste writes src (the voxels of box, W fastest) into dst (a volume of
// shape) at box: the inverse of CropInto, for predictions mapped back
// onto the full input grid.
func Paste[T any](dst []T, shape [3]int, src []T, box volume.Box) {
	sz := box.Size()
	k := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			o := (z*shape[1]+y)*shape[2] + box.Lo[2]
			k += copy(dst[o:o+sz[2]], src[k:k+sz[2]])
		}
	}
}

// NormMask returns the voxels a z-score with use_mask_for_norm takes its
// statistics from, nnU-Net's seg >= 0 after crop_to_nonzero: the nonzero
// mask, plus, when there is a label, its nonzero voxels (crop_to_nonzero
// marks -1 only where the label is background). It sets them in mask
// (which it returns) from nonzero, both of the same length.
func NormMask(nonzero, label []uint8) []uint8 {
	if label == nil {
		return nonzero
	}
	for i, l := range label {
		if l != 0 {
			nonzero[i] = 1
		}
	}
	return nonzero
}
