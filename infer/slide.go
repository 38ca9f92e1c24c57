// Package infer runs a segmentation model over whole volumes the way nnU-Net
// does: overlapping patches on a regular grid (step = patch × (1 − overlap),
// nnU-Net's tile_step_size 0.5), each patch's logits weighted by a Gaussian
// importance map (σ = patch/8) so patch borders count less, optional test-time
// mirroring, and argmax to labels. The sliding window (slide.go) knows
// nothing of the network: a Network is anything that maps a batch of
// patches to logits; DeviceNet runs a U-Net that way, Model is one loaded
// from a checkpoint with its config, and Evaluate scores it on a fold.
package infer

import (
	"context"
	"fmt"
	"math"
)

// Network computes logits for a batch of patches. in holds n patches of
// inChannels × D × H × W (NCDHW, W fastest), out receives n × outChannels ×
// D × H × W.
type Network interface {
	Forward(n int, in, out []float32) error
}

// Window describes a sliding-window run.
type Window struct {
	// Patch is the (D, H, W) patch size the model was trained on.
	Patch [3]int
	// Overlap is the fraction by which neighbouring patches overlap; the
	// target step is Patch × (1 − Overlap). nnU-Net uses 0.5.
	Overlap float64
	// BatchSize is how many patches go through one Forward call (≥ 1).
	BatchSize int
	// MirrorAxes lists spatial axes (0 = D, 1 = H, 2 = W) for test-time
	// mirroring: the prediction is the mean over every combination of flips
	// of these axes (2^len combinations), as nnU-Net's use_mirroring.
	MirrorAxes []int
	// NoGaussian weights every voxel of a patch equally instead of with the
	// Gaussian importance map.
	NoGaussian bool
}

// Steps returns the start offsets of the patches along one axis of length n
// (n ≥ patch) as nnU-Net's compute_steps_for_sliding_window does: the fewest
// steps no larger than patch·step, spread evenly from 0 to n − patch.
func Steps(n, patch int, stepFrac float64) []int {
	if n <= patch {
		return []int{0}
	}
	target := float64(patch) * stepFrac
	num := int(math.Ceil(float64(n-patch)/target)) + 1
	actual := float64(n-patch) / float64(num-1)
	out := make([]int, num)
	for i := range out {
		out[i] = int(math.Round(actual * float64(i)))
	}
	return out
}

// GaussianMap returns nnU-Net's importance map for a patch: a unit impulse
// at the patch centre (index size/2) blurred by a Gaussian with σ = size/8
// per axis (as scipy.ndimage.gaussian_filter, truncated at 4σ, constant
// borders), scaled to a maximum of 10, with zeros raised to the smallest
// non-zero value so every voxel has some weight.
func GaussianMap(p [3]int) []float32 {
	var axes [3][]float64
	for a := 0; a < 3; a++ {
		n := p[a]
		sigma := float64(n) / 8
		c := n / 2
		r := int(4*sigma + 0.5)
		k := make([]float64, 2*r+1)
		sum := 0.0
		for i := range k {
			x := float64(i - r)
			k[i] = math.Exp(-0.5 * x * x / (sigma * sigma))
			sum += k[i]
		}
		line := make([]float64, n)
		for i := range line {
			if d := i - c; d >= -r && d <= r {
				line[i] = k[d+r] / sum
			}
		}
		axes[a] = line
	}
	out := make([]float32, p[0]*p[1]*p[2])
	maxV := 0.0
	for d := 0; d < p[0]; d++ {
		for h := 0; h < p[1]; h++ {
			for w := 0; w < p[2]; w++ {
				maxV = math.Max(maxV, axes[0][d]*axes[1][h]*axes[2][w])
			}
		}
	}
	minNZ := float32(math.MaxFloat32)
	i := 0
	for d := 0; d < p[0]; d++ {
		for h := 0; h < p[1]; h++ {
			for w := 0; w < p[2]; w++ {
				v := float32(axes[0][d] * axes[1][h] * axes[2][w] / maxV * 10)
				out[i] = v
				if v > 0 && v < minNZ {
					minNZ = v
				}
				i++
			}
		}
	}
	for i, v := range out {
		if v == 0 {
			out[i] = minNZ
		}
	}
	return out
}

// Predict runs m over a whole volume of inC channels (each D·H·W values,
// W fastest) and returns outC channels of averaged logits on the same grid.
// Volumes smaller than the patch are zero-padded evenly on both sides (as
// nnU-Net pads) and the result cropped back.
//
// It stops between batches of patches, with ctx's error, when ctx ends.
func Predict(ctx context.Context, m Network, channels [][]float32, shape [3]int, outC int, cfg Window) ([]float32, error) {
	inC := len(channels)
	if inC == 0 || outC <= 0 {
		return nil, fmt.Errorf("infer: %d input and %d output channels", inC, outC)
	}
	n := shape[0] * shape[1] * shape[2]
	for c, ch := range channels {
		if len(ch) != n {
			return nil, fmt.Errorf("infer: channel %d has %d values, shape %v needs %d", c, len(ch), shape, n)
		}
	}
	p := cfg.Patch
	for a := 0; a < 3; a++ {
		if p[a] <= 0 {
			return nil, fmt.Errorf("infer: patch size %v", p)
		}
	}
	if cfg.Overlap < 0 || cfg.Overlap >= 1 {
		return nil, fmt.Errorf("infer: overlap %v, want 0 ≤ overlap < 1", cfg.Overlap)
	}
	for _, a := range cfg.MirrorAxes {
		if a < 0 || a > 2 {
			return nil, fmt.Errorf("infer: mirror axis %d, want 0, 1 or 2", a)
		}
	}
	// Pad to at least the patch size.
	var padded [3]int
	var lo [3]int
	for a := 0; a < 3; a++ {
		padded[a] = max(shape[a], p[a])
		lo[a] = (padded[a] - shape[a]) / 2
	}
	pn := padded[0] * padded[1] * padded[2]
	src := channels
	if padded != shape {
		src = make([][]float32, inC)
		for c := range src {
			src[c] = make([]float32, pn)
			for d := 0; d < shape[0]; d++ {
				for h := 0; h < shape[1]; h++ {
					copy(src[c][((d+lo[0])*padded[1]+h+lo[1])*padded[2]+lo[2]:], channels[c][(d*shape[1]+h)*shape[2]:(d*shape[1]+h+1)*shape[2]])
				}
			}
		}
	}

	var starts [][3]int
	sd, sh, sw := Steps(padded[0], p[0], 1-cfg.Overlap), Steps(padded[1], p[1], 1-cfg.Overlap), Steps(padded[2], p[2], 1-cfg.Overlap)
	for _, d := range sd {
		for _, h := range sh {
			for _, w := range sw {
				starts = append(starts, [3]int{d, h, w})
			}
		}
	}
	acc, err := slideWindows(ctx, m, src, padded, outC, cfg, starts)
	if err != nil {
		return nil, err
	}
	if padded == shape {
		return acc, nil
	}
	res := make([]float32, outC*n)
	for c := 0; c < outC; c++ {
		for d := 0; d < shape[0]; d++ {
			for h := 0; h < shape[1]; h++ {
				o := ((c*shape[0]+d)*shape[1] + h) * shape[2]
				s := c*pn + ((d+lo[0])*padded[1]+h+lo[1])*padded[2] + lo[2]
				copy(res[o:o+shape[2]], acc[s:s+shape[2]])
			}
		}
	}
	return res, nil
}

// slideWindows runs m on the patches at starts (each inside a volume of
// shape padded) and returns outC channels of Gaussian-weighted mean
// logits over padded; voxels no patch covers are NaN (0/0). The patches
// are batched and accumulated in the order of starts, so a voxel gets the
// same sum from any list holding the same patches that cover it, in the
// same order (blockwise.go relies on that).
func slideWindows(ctx context.Context, m Network, src [][]float32, padded [3]int, outC int, cfg Window, starts [][3]int) ([]float32, error) {
	inC := len(src)
	p := cfg.Patch
	batch := max(cfg.BatchSize, 1)
	pn := padded[0] * padded[1] * padded[2]
	var weight []float32
	if cfg.NoGaussian {
		weight = make([]float32, p[0]*p[1]*p[2])
		for i := range weight {
			weight[i] = 1
		}
	} else {
		weight = GaussianMap(p)
	}
	acc := make([]float32, outC*pn)
	norm := make([]float32, pn)

	pv := p[0] * p[1] * p[2]
	in := make([]float32, batch*inC*pv)
	out := make([]float32, batch*outC*pv)
	sum := make([]float32, batch*outC*pv)
	flips := mirrorCombos(cfg.MirrorAxes)

	for b0 := 0; b0 < len(starts); b0 += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nb := min(batch, len(starts)-b0)
		clear(sum[:nb*outC*pv])
		for _, flip := range flips {
			for i := 0; i < nb; i++ {
				st := starts[b0+i]
				for c := 0; c < inC; c++ {
					extract(src[c], padded, st, p, in[(i*inC+c)*pv:(i*inC+c+1)*pv], flip)
				}
			}
			if err := m.Forward(nb, in[:nb*inC*pv], out[:nb*outC*pv]); err != nil {
				return nil, fmt.Errorf("infer: forward on patches %d..%d: %w", b0, b0+nb-1, err)
			}
			for k := 0; k < nb*outC; k++ {
				addFlipped(sum[k*pv:(k+1)*pv], out[k*pv:(k+1)*pv], p, flip)
			}
		}
		scale := 1 / float32(len(flips))
		for i := 0; i < nb; i++ {
			st := starts[b0+i]
			for c := 0; c < outC; c++ {
				accumulate(acc[c*pn:(c+1)*pn], sum[(i*outC+c)*pv:(i*outC+c+1)*pv], weight, scale, padded, st, p)
			}
			accumulate(norm, nil, weight, 1, padded, st, p)
		}
	}
	for c := 0; c < outC; c++ {
		a := acc[c*pn : (c+1)*pn]
		for i := range a {
			a[i] /= norm[i]
		}
	}
	return acc, nil
}

// mirrorAxes returns the axes test-time mirroring flips for windows of the
// given patch: every axis the patch spans more than one voxel of. Along an
// axis one voxel deep (a 2d configuration's slices) each window sees one
// slice, so a flip there predicts every slice as it is and only doubles
// the work; nnU-Net's 2d mirrors in-plane only as well.
func mirrorAxes(patch [3]int) []int {
	var axes []int
	for a, p := range patch {
		if p > 1 {
			axes = append(axes, a)
		}
	}
	return axes
}

// mirrorCombos returns every subset of axes as a flip mask, identity first.
func mirrorCombos(axes []int) [][3]bool {
	out := [][3]bool{{}}
	for _, a := range axes {
		n := len(out)
		for i := 0; i < n; i++ {
			f := out[i]
			if f[a] {
				continue
			}
			f[a] = true
			out = append(out, f)
		}
	}
	return out
}

// extract copies the patch at start from vol (shape vs) into dst, flipped
// along the axes marked in flip.
func extract(vol []float32, vs, start, p [3]int, dst []float32, flip [3]bool) {
	for d := 0; d < p[0]; d++ {
		sd := d
		if flip[0] {
			sd = p[0] - 1 - d
		}
		for h := 0; h < p[1]; h++ {
			sh := h
			if flip[1] {
				sh = p[1] - 1 - h
			}
			row := vol[((start[0]+sd)*vs[1]+start[1]+sh)*vs[2]+start[2]:]
			o := dst[(d*p[1]+h)*p[2] : (d*p[1]+h+1)*p[2]]
			if flip[2] {
				for w := range o {
					o[w] = row[p[2]-1-w]
				}
			} else {
				copy(o, row[:p[2]])
			}
		}
	}
}

// addFlipped adds src (a patch predicted on flipped input) to dst after
// flipping it back.
func addFlipped(dst, src []float32, p [3]int, flip [3]bool) {
	for d := 0; d < p[0]; d++ {
		sd := d
		if flip[0] {
			sd = p[0] - 1 - d
		}
		for h := 0; h < p[1]; h++ {
			sh := h
			if flip[1] {
				sh = p[1] - 1 - h
			}
			o := dst[(d*p[1]+h)*p[2] : (d*p[1]+h+1)*p[2]]
			s := src[(sd*p[1]+sh)*p[2] : (sd*p[1]+sh+1)*p[2]]
			if flip[2] {
				for w := range o {
					o[w] += s[p[2]-1-w]
				}
			} else {
				for w := range o {
					o[w] += s[w]
				}
			}
		}
	}
}

// accumulate adds weight·scale·patch (or weight alone when patch is nil) into
// the volume vol of shape vs at start.
func accumulate(vol, patch, weight []float32, scale float32, vs, start, p [3]int) {
	for d := 0; d < p[0]; d++ {
		for h := 0; h < p[1]; h++ {
			o := vol[((start[0]+d)*vs[1]+start[1]+h)*vs[2]+start[2]:][:p[2]]
			wt := weight[(d*p[1]+h)*p[2]:][:p[2]]
			if patch == nil {
				for w := range o {
					o[w] += wt[w]
				}
				continue
			}
			s := patch[(d*p[1]+h)*p[2]:][:p[2]]
			for w := range o {
				o[w] += wt[w] * s[w] * scale
			}
		}
	}
}

// Argmax returns, per voxel, the index of the largest of c channels of n
// voxels each (channel-major, as Predict returns); ties go to the lower
// index, as numpy's argmax.
func Argmax(logits []float32, c, n int) []uint8 {
	out := make([]uint8, n)
	for i := 0; i < n; i++ {
		best, bi := logits[i], 0
		for k := 1; k < c; k++ {
			if v := logits[k*n+i]; v > best {
				best, bi = v, k
			}
		}
		out[i] = uint8(bi)
	}
	return out
}
