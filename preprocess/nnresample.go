package preprocess

import (
	"math"
	"slices"
)

// nnU-Net's resampling (data.resample_order: nnunet), after
// nnunetv2/preprocessing/resampling/default_resampling.py's
// resample_data_or_seg with its default plans: images by cubic B-spline
// (order 3), labels by linear interpolation (order 1) of each class's
// one-hot mask thresholded at 0.5, predicted probabilities by linear
// interpolation; and when the voxel size is anisotropic (largest / smallest
// > 3 along one axis, of the source spacing, else of the target), only
// in-plane that way, with nearest neighbour (order 0) along the
// out-of-plane axis.
//
// nnU-Net resizes with scikit-image's resize(mode="edge",
// anti_aliasing=False), that is scipy.ndimage.zoom(grid_mode=True,
// mode="nearest") in float64 followed by a clip to the input's range; so
// does this code: the grid convention of resample.go (output voxel i reads
// the source at (i + 0.5)·n_in/n_out − 0.5, clamped), scipy's spline
// prefilter (pole √3 − 2) on each line padded by 12 edge voxels as scipy
// pads for mode "nearest", scipy's B-spline weights, and the output
// clipped to the range of the input (of each slice, when resampled
// in-plane). The cubic interpolation is done one axis at a time (the
// spline is a tensor product: the same value up to rounding as scipy's
// 64-tap sum). Unlike the linear Resampler, cubic splines depend on the
// whole line, so only whole volumes are resampled.

// anisoThreshold is nnU-Net's ANISO_THRESHOLD.
const anisoThreshold = 3

// splinePad is how many edge voxels scipy pads a line with before the
// spline prefilter for mode "nearest" (_prepad_for_spline_filter).
const splinePad = 12

// NNUNetResampler resamples whole volumes from one shape to another as
// nnU-Net does. It is read-only once made.
type NNUNetResampler struct {
	from, to [3]int
	// axis is the out-of-plane axis resampled by nearest neighbour, -1
	// when every axis is interpolated alike.
	axis int
}

// NewNNUNetResampler resamples volumes of shape from with voxel size
// spacing onto shape to with voxel size target, deciding the
// out-of-plane axis as nnU-Net's determine_do_sep_z_and_axis (without
// force_separate_z): the axis of the largest voxel size when spacing is
// anisotropic, else when target is, and none when that largest size is
// shared by two or three axes.
func NewNNUNetResampler(from, to [3]int, spacing, target [3]float64) *NNUNetResampler {
	axis := -1
	if anisotropic(spacing) {
		axis = lowresAxis(spacing)
	} else if anisotropic(target) {
		axis = lowresAxis(target)
	}
	return &NNUNetResampler{from: from, to: to, axis: axis}
}

// SeparateAxis returns the axis resampled by nearest neighbour (-1: none).
func (r *NNUNetResampler) SeparateAxis() int { return r.axis }

func anisotropic(s [3]float64) bool {
	return slices.Max(s[:])/slices.Min(s[:]) > anisoThreshold
}

// lowresAxis is get_lowres_axis: the axis of the largest voxel size, or -1
// when two or three axes share it.
func lowresAxis(s [3]float64) int {
	m, axis, n := slices.Max(s[:]), -1, 0
	for a, v := range s {
		if m/v == 1 {
			axis, n = a, n+1
		}
	}
	if n != 1 {
		return -1
	}
	return axis
}

// inPlane is the shape after the interpolated axes are resampled: to, with
// the separate axis (if any) still at its source size.
func (r *NNUNetResampler) inPlane() [3]int {
	s := r.to
	if r.axis >= 0 {
		s[r.axis] = r.from[r.axis]
	}
	return s
}

// Image writes src (a volume of r's source shape) resampled by cubic
// B-spline into dst (r's output shape), clipped to src's range (each
// slice's, when resampled in-plane), as nnU-Net resamples images.
func (r *NNUNetResampler) Image(dst, src []float32) { r.resample(dst, src, 3) }

// Linear writes src resampled by linear interpolation (nearest along the
// separate axis) into dst, as nnU-Net resamples predicted probabilities
// (resampling_fn_probabilities, order 1).
func (r *NNUNetResampler) Linear(dst, src []float32) { r.resample(dst, src, 1) }

func (r *NNUNetResampler) resample(dst, src []float32, order int) {
	if r.from == r.to {
		copy(dst, src)
		return
	}
	x := make([]float64, len(src))
	for i, v := range src {
		x[i] = float64(v)
	}
	shape := r.from
	// The clip bounds: the whole volume's, or each slice's along axis.
	var lo, hi []float64
	if r.axis < 0 {
		lo, hi = []float64{math.Inf(1)}, []float64{math.Inf(-1)}
	} else {
		lo, hi = make([]float64, shape[r.axis]), make([]float64, shape[r.axis])
		for i := range lo {
			lo[i], hi[i] = math.Inf(1), math.Inf(-1)
		}
	}
	forEach(shape, func(i int, p [3]int) {
		k := 0
		if r.axis >= 0 {
			k = p[r.axis]
		}
		lo[k], hi[k] = min(lo[k], x[i]), max(hi[k], x[i])
	})
	for a := 2; a >= 0; a-- {
		if a == r.axis || shape[a] == r.to[a] {
			continue
		}
		x, shape = resizeAxis(x, shape, a, r.to[a], order)
	}
	forEach(shape, func(i int, p [3]int) {
		k := 0
		if r.axis >= 0 {
			k = p[r.axis]
		}
		x[i] = min(max(x[i], lo[k]), hi[k])
	})
	if r.axis < 0 || shape[r.axis] == r.to[r.axis] {
		for i, v := range x {
			dst[i] = float32(v)
		}
		return
	}
	near := nearestMap(shape[r.axis], r.to[r.axis])
	forEach(r.to, func(i int, p [3]int) {
		p[r.axis] = near[p[r.axis]]
		dst[i] = float32(x[(p[0]*shape[1]+p[1])*shape[2]+p[2]])
	})
}

// Labels writes the label map src resampled into dst as nnU-Net's
// resize_segmentation with order 1: each class's one-hot mask
// interpolated linearly (scipy's 8-tap sum, in its order), the voxel
// taking the highest class whose mask reaches 0.5 (background where none
// does); along the separate axis, nearest neighbour on the labels.
func (r *NNUNetResampler) Labels(dst, src []uint8) {
	if r.from == r.to {
		copy(dst, src)
		return
	}
	var present [256]bool
	for _, l := range src {
		present[l] = true
	}
	mid := r.inPlane()
	var ax [3]linMap
	for a := range 3 {
		ax[a] = newLinMap(r.from[a], mid[a])
	}
	tmp := dst
	if mid != r.to {
		tmp = make([]uint8, mid[0]*mid[1]*mid[2])
	}
	sh, sw := r.from[1], r.from[2]
	forEach(mid, func(i int, p [3]int) {
		out := uint8(0)
		for c := 1; c < 256; c++ {
			if !present[c] {
				continue
			}
			t := 0.0
			for a := range 2 {
				for b := range 2 {
					for d := range 2 {
						v := 0.0
						if src[(ax[0].idx[p[0]][a]*sh+ax[1].idx[p[1]][b])*sw+ax[2].idx[p[2]][d]] == uint8(c) {
							v = 1
						}
						t += v * ax[0].w[p[0]][a] * ax[1].w[p[1]][b] * ax[2].w[p[2]][d]
					}
				}
			}
			if t >= 0.5 {
				out = uint8(c)
			}
		}
		tmp[i] = out
	})
	if mid == r.to {
		return
	}
	near := nearestMap(mid[r.axis], r.to[r.axis])
	forEach(r.to, func(i int, p [3]int) {
		p[r.axis] = near[p[r.axis]]
		dst[i] = tmp[(p[0]*mid[1]+p[1])*mid[2]+p[2]]
	})
}

// forEach calls f with every voxel's index and position of shape, in
// memory order.
func forEach(shape [3]int, f func(i int, p [3]int)) {
	i := 0
	for z := range shape[0] {
		for y := range shape[1] {
			for x := range shape[2] {
				f(i, [3]int{z, y, x})
				i++
			}
		}
	}
}

// coord is the source coordinate output index i reads along an axis of
// nin source and nout output voxels (scipy's zoom with grid_mode=True).
func coord(i, nin, nout int) float64 {
	return (float64(i)+0.5)*(float64(nin)/float64(nout)) - 0.5
}

// nearestMap is scipy's order-0 index per output index: floor(c + 0.5),
// clamped to the source (mode "nearest").
func nearestMap(nin, nout int) []int {
	m := make([]int, nout)
	for i := range m {
		m[i] = min(max(int(math.Floor(coord(i, nin, nout)+0.5)), 0), nin-1)
	}
	return m
}

// linMap is scipy's order-1 interpolation along one axis: per output
// index the two source indices (clamped) and their weights.
type linMap struct {
	idx [][2]int
	w   [][2]float64
}

func newLinMap(nin, nout int) linMap {
	m := linMap{idx: make([][2]int, nout), w: make([][2]float64, nout)}
	for i := range nout {
		c := coord(i, nin, nout)
		if nin == nout {
			c = float64(i)
		}
		f := math.Floor(c)
		t := c - f
		w0 := 1 - t
		s := int(f)
		m.idx[i] = [2]int{min(max(s, 0), nin-1), min(max(s+1, 0), nin-1)}
		m.w[i] = [2]float64{w0, 1 - w0}
	}
	return m
}

// splineWeights are scipy's cubic B-spline weights for the fractional
// offset t in [0, 1) of the four coefficients floor(c) − 1 … floor(c) + 2.
func splineWeights(t float64) [4]float64 {
	z := 1 - t
	var w [4]float64
	w[0] = z * z * z / 6
	w[1] = (t*t*(t-2)*3 + 4) / 6
	w[2] = (z*z*(z-2)*3 + 4) / 6
	w[3] = 1 - w[0] - w[1] - w[2]
	return w
}

// resizeAxis resamples x (a volume of shape) along axis to n voxels, by
// order 1 (linear) or 3 (cubic B-spline), and returns the result and its
// shape.
func resizeAxis(x []float64, shape [3]int, axis, n, order int) ([]float64, [3]int) {
	to := shape
	to[axis] = n
	out := make([]float64, to[0]*to[1]*to[2])
	nin := shape[axis]
	stride := [3]int{shape[1] * shape[2], shape[2], 1}[axis]
	ostride := [3]int{to[1] * to[2], to[2], 1}[axis]
	// The lines along axis: every position with p[axis] = 0.
	other := shape
	other[axis] = 1
	line := make([]float64, nin+2*splinePad)
	// Per output index: the first tap (cubic: on the padded line), the
	// second source index (linear) and the weights.
	type tap struct {
		start, next int
		w           [4]float64
	}
	taps := make([]tap, n)
	lm := newLinMap(nin, n)
	for i := range taps {
		c := coord(i, nin, n)
		f := math.Floor(c)
		if order == 3 {
			taps[i] = tap{start: int(f) - 1 + splinePad, w: splineWeights(c - f)}
		} else {
			taps[i] = tap{start: lm.idx[i][0], next: lm.idx[i][1], w: [4]float64{lm.w[i][0], lm.w[i][1]}}
		}
	}
	forEach(other, func(_ int, p [3]int) {
		base := (p[0]*shape[1]+p[1])*shape[2] + p[2]
		obase := (p[0]*to[1]+p[1])*to[2] + p[2]
		if order == 3 {
			for k := range line {
				line[k] = x[base+min(max(k-splinePad, 0), nin-1)*stride]
			}
			splinePrefilter(line)
			for i, tp := range taps {
				s := line[tp.start : tp.start+4]
				out[obase+i*ostride] = s[0]*tp.w[0] + s[1]*tp.w[1] + s[2]*tp.w[2] + s[3]*tp.w[3]
			}
			return
		}
		for i, tp := range taps {
			out[obase+i*ostride] = x[base+tp.start*stride]*tp.w[0] + x[base+tp.next*stride]*tp.w[1]
		}
	})
	return out, to
}

// splinePrefilter turns samples into cubic B-spline coefficients in place,
// scipy's spline_filter1d (order 3, mirror initial conditions).
func splinePrefilter(c []float64) {
	n := len(c)
	if n == 1 {
		return
	}
	z := math.Sqrt(3) - 2
	gain := (1 - z) * (1 - 1/z)
	for i := range c {
		c[i] *= gain
	}
	// Causal initialisation (mirror-symmetric boundary).
	zi, zn1 := z, math.Pow(z, float64(n-1))
	c0 := c[0] + zn1*c[n-1]
	for i := 1; i < n-1; i++ {
		c0 += zi * (c[i] + zn1*c[n-1-i])
		zi *= z
	}
	c[0] = c0 / (1 - zn1*zn1)
	for i := 1; i < n; i++ {
		c[i] += z * c[i-1]
	}
	c[n-1] = (z*c[n-2] + c[n-1]) * z / (z*z - 1)
	for i := n - 2; i >= 0; i-- {
		c[i] = z * (c[i+1] - c[i])
	}
}
