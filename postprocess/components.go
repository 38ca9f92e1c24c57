// Package postprocess is nnU-Net v2's post-processing
// (nnunetv2/postprocessing/remove_connected_components.py): removing all
// but the largest connected component, of all foreground classes together
// and of single classes (or, for nnU-Net v2 regions, of each region's
// labels together), and determining from cross-validation predictions
// which of those steps to apply (Determine), as a plan that predictions
// then follow (Load, Plan.Apply).
package postprocess

import "fmt"

// Components labels the connected components of mask, a (D, H, W) volume
// with W fastest, under 26-connectivity (voxels sharing a face, an edge or
// a corner): acvl_utils' remove_all_but_largest_component, which nnU-Net
// calls, labels with skimage.measure.label(connectivity=None), i.e. full
// connectivity, input.ndim = 3 hops. comp[i] is voxel i's component,
// 1..len(sizes)−1, or 0 outside the mask; sizes[k] counts component k's
// voxels (sizes[0] is 0). Components are numbered in the order a scan in
// memory order first meets them.
func Components(mask []bool, shape [3]int) (comp []int32, sizes []int64) {
	D, H, W := shape[0], shape[1], shape[2]
	comp = make([]int32, len(mask))
	sizes = []int64{0}
	var queue []int32
	for start, in := range mask {
		if !in || comp[start] != 0 {
			continue
		}
		id := int32(len(sizes))
		comp[start] = id
		queue = append(queue[:0], int32(start))
		n := int64(0)
		for len(queue) > 0 {
			i := int(queue[len(queue)-1])
			queue = queue[:len(queue)-1]
			n++
			d, h, w := i/(H*W), i/W%H, i%W
			for dd := max(d-1, 0); dd <= min(d+1, D-1); dd++ {
				for hh := max(h-1, 0); hh <= min(h+1, H-1); hh++ {
					for ww := max(w-1, 0); ww <= min(w+1, W-1); ww++ {
						j := (dd*H+hh)*W + ww
						if mask[j] && comp[j] == 0 {
							comp[j] = id
							queue = append(queue, int32(j))
						}
					}
				}
			}
		}
		sizes = append(sizes, n)
	}
	return comp, sizes
}

// KeepLargest returns mask with only its largest component(s): every
// component of the largest size stays, as acvl_utils keeps every component
// whose size equals the maximum. An empty mask stays empty.
func KeepLargest(mask []bool, shape [3]int) []bool {
	comp, sizes := Components(mask, shape)
	var big int64
	for _, s := range sizes {
		big = max(big, s)
	}
	out := make([]bool, len(mask))
	for i, c := range comp {
		out[i] = c != 0 && sizes[c] == big
	}
	return out
}

// RemoveAllButLargest sets to background (0) every voxel of labels (taken
// together as one mask) outside the largest component of that mask:
// nnU-Net's remove_all_but_largest_component_from_segmentation. seg is
// changed in place.
func RemoveAllButLargest(seg []uint8, shape [3]int, labels []int) error {
	if n := shape[0] * shape[1] * shape[2]; n != len(seg) || shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0 {
		return fmt.Errorf("%d labels for a volume of shape %v", len(seg), shape)
	}
	var in [256]bool
	for _, l := range labels {
		if l < 0 || l > 255 {
			return fmt.Errorf("label %d outside 0..255", l)
		}
		in[l] = true
	}
	mask := make([]bool, len(seg))
	any := false
	for i, v := range seg {
		mask[i] = in[v]
		any = any || mask[i]
	}
	if !any {
		return nil
	}
	keep := KeepLargest(mask, shape)
	for i := range seg {
		if mask[i] && !keep[i] {
			seg[i] = 0
		}
	}
	return nil
}
