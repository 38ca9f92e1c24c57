package preprocess

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/volume"
)

// Resampling to a target voxel size (data.target_spacing).
//
// Grid convention: voxels are cells, and the resampled grid covers exactly
// the extent of the source grid: the outer faces of the first and last
// voxels coincide. Along an axis of n_in source and n_out output voxels,
// output voxel i samples the source at the continuous index
//
//	c = (i + 0.5)·n_in/n_out − 0.5, clamped to [0, n_in − 1]
//
// (border voxels repeat, as scikit-image's mode "edge"). This is what
// nnU-Net resamples with (scikit-image's resize, or PyTorch's
// F.interpolate with align_corners=False); it is not scipy.ndimage.zoom's
// default (grid_mode=False), which aligns the centres of the corner voxels
// instead. The voxel size of the output grid is therefore exactly
// spacing·n_in/n_out, which is the target spacing up to the rounding of
// the shape (see ResampledShape).
//
// Images are interpolated trilinearly (order 1) in float32, as PyTorch's
// F.interpolate(mode="trilinear", align_corners=False) does; labels by
// nearest neighbour ("nearest-exact"). nnU-Net's defaults differ: cubic
// splines (order 3) for images, linear interpolation of each label's
// one-hot mask for labels, and order 0 along the out-of-plane axis of
// strongly anisotropic data (spacing ratio > 3). Order 1 is several times
// cheaper, never leaves the range of its neighbours (no ringing at sharp
// edges such as bone/air in CT), and treats every axis alike; nearest
// keeps label values exactly and costs one read per voxel.
//
// Every output voxel is computed from its source neighbours alone, in a
// fixed order of operations, so resampling a sub-box of the output grid
// gives the bytes of the same voxels in a whole-volume resampling: the gz
// source relies on this to resample only the region a sample reads.

// ResampledShape returns the shape of a volume of the given shape and
// voxel size (both (D, H, W)) resampled to the voxel size target:
// round(shape·spacing/target) per axis (halves to even, as numpy's round
// that nnU-Net uses), at least 1.
func ResampledShape(shape [3]int, spacing, target [3]float64) [3]int {
	var out [3]int
	for a := range out {
		out[a] = max(1, int(math.RoundToEven(float64(shape[a])*spacing[a]/target[a])))
	}
	return out
}

// ResampleLinear returns src, a volume of shape from (D, H, W; W fastest),
// resampled to shape to with trilinear interpolation (see the grid
// convention above).
func ResampleLinear(src []float32, from, to [3]int) ([]float32, error) {
	if err := checkResample(len(src), from, to); err != nil {
		return nil, err
	}
	out := make([]float32, to[0]*to[1]*to[2])
	NewResampler(from, to).Linear(out, src, [3]int{}, to)
	return out, nil
}

// ResampleNearest returns the label map src of shape from resampled to
// shape to by nearest neighbour (same grid convention as ResampleLinear),
// so every output value is one of the input's.
func ResampleNearest(src []uint8, from, to [3]int) ([]uint8, error) {
	if err := checkResample(len(src), from, to); err != nil {
		return nil, err
	}
	out := make([]uint8, to[0]*to[1]*to[2])
	NewResampler(from, to).Nearest(out, src, [3]int{}, to)
	return out, nil
}

func checkResample(n int, from, to [3]int) error {
	for a := range 3 {
		if from[a] < 1 || to[a] < 1 {
			return fmt.Errorf("resample %v → %v: shapes must be positive", from, to)
		}
	}
	if want := from[0] * from[1] * from[2]; n != want {
		return fmt.Errorf("resample %v → %v: %d voxels, the shape holds %d", from, to, n, want)
	}
	return nil
}

// axisMap is one axis of a Resampler: per output index, the two source
// indices to interpolate between (hi == lo at the clamped borders), the
// weight of hi, and the nearest source index.
type axisMap struct {
	lo, hi, near []int
	w            []float32
}

func newAxisMap(nin, nout int) axisMap {
	m := axisMap{lo: make([]int, nout), hi: make([]int, nout), near: make([]int, nout), w: make([]float32, nout)}
	f := float64(nin) / float64(nout)
	for i := range nout {
		c := max((float64(i)+0.5)*f-0.5, 0)
		lo := int(math.Floor(c))
		if lo >= nin-1 {
			lo, c = nin-1, float64(nin-1)
		}
		m.lo[i], m.hi[i] = lo, min(lo+1, nin-1)
		m.w[i] = float32(c - float64(lo))
		m.near[i] = min(int(math.Floor(c+0.5)), nin-1)
	}
	return m
}

// span returns the source indices [lo, hi) that output indices [a, b)
// read (linear or nearest).
func (m *axisMap) span(a, b int) (int, int) {
	return m.lo[a], m.hi[b-1] + 1
}

// Resampler maps a source grid onto an output grid. It is read-only once
// made, so one serves every worker.
type Resampler struct {
	src, dst [3]int
	ax       [3]axisMap
}

// NewResampler maps the grid of shape src onto the grid of shape dst.
func NewResampler(src, dst [3]int) *Resampler {
	r := &Resampler{src: src, dst: dst}
	for a := range 3 {
		r.ax[a] = newAxisMap(src[a], dst[a])
	}
	return r
}

// SourceSpan returns the source indices [lo, hi) along axis that the
// output indices [a, b) read (linear or nearest).
func (r *Resampler) SourceSpan(axis, a, b int) (lo, hi int) {
	return r.ax[axis].span(a, b)
}

// lerp is a + w·(b − a) with the product rounded to float32 on its own
// (the conversion forbids a fused multiply-add), so every platform gives
// the same bits.
func lerp(a, b, w float32) float32 { return a + float32(w*(b-a)) }

// Linear writes the output voxels of the box [lo, hi) of the output grid,
// interpolated trilinearly from src (a volume of r.src), into out (the
// box's voxels, W fastest).
func (r *Resampler) Linear(out, src []float32, lo, hi [3]int) {
	r.LinearFrom(out, src, volume.Whole(r.src), lo, hi)
}

// LinearFrom is Linear from src holding only the box from of the source
// grid (W fastest), which must hold every source voxel the output box
// reads (SourceSpan along each axis): the same arithmetic, so the same
// bytes, as Linear from the whole source.
func (r *Resampler) LinearFrom(out, src []float32, from volume.Box, lo, hi [3]int) {
	fs := from.Size()
	sh, sw := fs[1], fs[2]
	oz, oy, ox := from.Lo[0], from.Lo[1], from.Lo[2]
	az, ay, ax := &r.ax[0], &r.ax[1], &r.ax[2]
	k := 0
	for z := lo[0]; z < hi[0]; z++ {
		p0, p1, wz := (az.lo[z]-oz)*sh, (az.hi[z]-oz)*sh, az.w[z]
		for y := lo[1]; y < hi[1]; y++ {
			y0, y1, wy := ay.lo[y]-oy, ay.hi[y]-oy, ay.w[y]
			r00 := src[(p0+y0)*sw : (p0+y0+1)*sw]
			r01 := src[(p0+y1)*sw : (p0+y1+1)*sw]
			r10 := src[(p1+y0)*sw : (p1+y0+1)*sw]
			r11 := src[(p1+y1)*sw : (p1+y1+1)*sw]
			for x := lo[2]; x < hi[2]; x++ {
				x0, x1, wx := ax.lo[x]-ox, ax.hi[x]-ox, ax.w[x]
				a := lerp(lerp(r00[x0], r00[x1], wx), lerp(r01[x0], r01[x1], wx), wy)
				b := lerp(lerp(r10[x0], r10[x1], wx), lerp(r11[x0], r11[x1], wx), wy)
				out[k] = lerp(a, b, wz)
				k++
			}
		}
	}
}

// Nearest writes the output voxels of the box [lo, hi) by nearest
// neighbour from src into out (the box's voxels).
func (r *Resampler) Nearest(out, src []uint8, lo, hi [3]int) {
	r.NearestFrom(out, src, volume.Whole(r.src), lo, hi)
}

// NearestFrom is Nearest from src holding only the box from of the source
// grid (see LinearFrom).
func (r *Resampler) NearestFrom(out, src []uint8, from volume.Box, lo, hi [3]int) {
	fs := from.Size()
	sh, sw := fs[1], fs[2]
	oz, oy, ox := from.Lo[0], from.Lo[1], from.Lo[2]
	az, ay, ax := &r.ax[0], &r.ax[1], &r.ax[2]
	k := 0
	for z := lo[0]; z < hi[0]; z++ {
		for y := lo[1]; y < hi[1]; y++ {
			row := src[((az.near[z]-oz)*sh+ay.near[y]-oy)*sw:]
			for x := lo[2]; x < hi[2]; x++ {
				out[k] = row[ax.near[x]-ox]
				k++
			}
		}
	}
}

// ResampleAffine returns the voxel-to-world matrix of the output grid of
// a resampling from shape from to shape to (the grid convention above):
// output voxel i of an axis is source index f·i + (f − 1)/2 with
// f = from/to, so the axis's column scales by f and the origin moves by
// (f − 1)/2 of the source column. Volume axis (D, H, W) is affine column
// (2, 1, 0) (NIfTI z, y, x).
func ResampleAffine(m volume.Affine, from, to [3]int) volume.Affine {
	out := m
	for a := range 3 {
		f := float64(from[a]) / float64(to[a])
		col := 2 - a
		for row := range 3 {
			out[row][col] = m[row][col] * f
			out[row][3] += m[row][col] * (f - 1) / 2
		}
	}
	return out
}
