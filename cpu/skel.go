package cpu

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// Soft skeletonisation for clDice (Shit et al., CVPR 2021), written to give
// PyTorch's values and gradients for the reference implementation
//
//	erode(x)  = min(min(−maxpool(−x, 3×1×1), −maxpool(−x, 1×3×1)), −maxpool(−x, 1×1×3))
//	open(x)   = maxpool(erode(x), 3×3×3)
//	skel_0    = relu(x − open(x))
//	x_{j+1}   = erode(x_j);  δ_j = relu(x_j − open(x_j));  skel_j = skel_{j−1} + relu(δ_j − skel_{j−1}·δ_j)
//
// with pooling windows that ignore out-of-volume voxels (PyTorch pads with
// −∞), ties in a pooling window going to the first voxel in scan order, and
// ties of the elementwise min splitting the gradient in halves, as
// PyTorch's autograd does. One channel of one sample is one independent
// volume; volumes run in parallel, each one sequentially (deterministic).

// vol is the geometry of one channel volume.
type vol struct{ d, h, w int }

func (g vol) n() int { return g.d * g.h * g.w }

// minPool1 returns the minimum of x over the 3-window along one axis
// (stride step, extent size, position pos on that axis) and its index, the
// first in scan order on ties.
func minPool1(x []float32, i, pos, size, step int) (float32, int) {
	lo, hi := max(pos-1, 0), min(pos+1, size-1)
	best, arg := x[i+(lo-pos)*step], i+(lo-pos)*step
	for p := lo + 1; p <= hi; p++ {
		j := i + (p-pos)*step
		if x[j] < best {
			best, arg = x[j], j
		}
	}
	return best, arg
}

// erodeAt returns the three directional min-pools at voxel (a, b, c) with
// their argmins.
func erodeAt(x []float32, g vol, a, b, c int) (p [3]float32, arg [3]int) {
	i := (a*g.h+b)*g.w + c
	p[0], arg[0] = minPool1(x, i, a, g.d, g.h*g.w)
	p[1], arg[1] = minPool1(x, i, b, g.h, g.w)
	p[2], arg[2] = minPool1(x, i, c, g.w, 1)
	return
}

// erode writes y = erode(x).
func erode(x, y []float32, g vol) {
	for a := 0; a < g.d; a++ {
		for b := 0; b < g.h; b++ {
			for c := 0; c < g.w; c++ {
				p, _ := erodeAt(x, g, a, b, c)
				y[(a*g.h+b)*g.w+c] = min(min(p[0], p[1]), p[2])
			}
		}
	}
}

// minGrad splits gradient dy of min(u, v) like PyTorch: all to the smaller,
// halves on a tie.
func minGrad(u, v, dy float32) (du, dv float32) {
	switch {
	case u < v:
		return dy, 0
	case v < u:
		return 0, dy
	default:
		return dy / 2, dy / 2
	}
}

// erodeBackward adds to dx the gradient of Σ dy·erode(x).
func erodeBackward(x, dy, dx []float32, g vol) {
	for a := 0; a < g.d; a++ {
		for b := 0; b < g.h; b++ {
			for c := 0; c < g.w; c++ {
				gy := dy[(a*g.h+b)*g.w+c]
				if gy == 0 {
					continue
				}
				p, arg := erodeAt(x, g, a, b, c)
				dq, dp2 := minGrad(min(p[0], p[1]), p[2], gy)
				dp0, dp1 := minGrad(p[0], p[1], dq)
				dx[arg[0]] += dp0
				dx[arg[1]] += dp1
				dx[arg[2]] += dp2
			}
		}
	}
}

// dilateAt returns the max of x over the 3×3×3 window at (a, b, c) and its
// index (first maximum in scan order).
func dilateAt(x []float32, g vol, a, b, c int) (float32, int) {
	best, arg := float32(0), -1
	for i := max(a-1, 0); i <= min(a+1, g.d-1); i++ {
		for j := max(b-1, 0); j <= min(b+1, g.h-1); j++ {
			row := (i*g.h + j) * g.w
			for k := max(c-1, 0); k <= min(c+1, g.w-1); k++ {
				if v := x[row+k]; arg < 0 || v > best {
					best, arg = v, row+k
				}
			}
		}
	}
	return best, arg
}

// dilate writes y = maxpool3(x).
func dilate(x, y []float32, g vol) {
	for a := 0; a < g.d; a++ {
		for b := 0; b < g.h; b++ {
			for c := 0; c < g.w; c++ {
				y[(a*g.h+b)*g.w+c], _ = dilateAt(x, g, a, b, c)
			}
		}
	}
}

// dilateBackward adds to dx the gradient of Σ dy·dilate(x).
func dilateBackward(x, dy, dx []float32, g vol) {
	for a := 0; a < g.d; a++ {
		for b := 0; b < g.h; b++ {
			for c := 0; c < g.w; c++ {
				gy := dy[(a*g.h+b)*g.w+c]
				if gy == 0 {
					continue
				}
				_, arg := dilateAt(x, g, a, b, c)
				dx[arg] += gy
			}
		}
	}
}

// skelTape holds the forward intermediates of one volume's skeleton:
// imgs[j] = x_j (j = 0..iters+1), opens[j] = open(x_j) = dilate(x_{j+1})
// and skels[j] (j = 0..iters).
type skelTape struct {
	imgs, opens, skels [][]float32
}

// softSkel runs the forward pass on one volume x; the skeleton is
// tape.skels[iters].
func softSkel(x []float32, g vol, iters int) *skelTape {
	n := g.n()
	t := &skelTape{}
	t.imgs = append(t.imgs, x)
	for j := 0; j <= iters; j++ {
		next := make([]float32, n)
		erode(t.imgs[j], next, g)
		t.imgs = append(t.imgs, next)
		open := make([]float32, n)
		dilate(next, open, g)
		t.opens = append(t.opens, open)
	}
	s0 := make([]float32, n)
	for i := range s0 {
		s0[i] = max(x[i]-t.opens[0][i], 0)
	}
	t.skels = append(t.skels, s0)
	for j := 1; j <= iters; j++ {
		prev := t.skels[j-1]
		s := make([]float32, n)
		img, open := t.imgs[j], t.opens[j]
		for i := range s {
			delta := max(img[i]-open[i], 0)
			s[i] = prev[i] + max(delta-prev[i]*delta, 0)
		}
		t.skels = append(t.skels, s)
	}
	return t
}

// softSkelBackward returns ∂(Σ dskel·skel)/∂x for the tape's volume.
func softSkelBackward(t *skelTape, dskel []float32, g vol, iters int) []float32 {
	n := g.n()
	dimgs := make([][]float32, iters+2)
	for j := range dimgs {
		dimgs[j] = make([]float32, n)
	}
	ds := append([]float32(nil), dskel...)
	dopen := make([]float32, n)
	for j := iters; j >= 0; j-- {
		img, open := t.imgs[j], t.opens[j]
		if j == 0 {
			for i := range ds {
				du := float32(0)
				if img[i]-open[i] > 0 {
					du = ds[i]
				}
				dimgs[0][i] += du
				dopen[i] = -du
			}
		} else {
			prev := t.skels[j-1]
			for i := range ds {
				u := img[i] - open[i]
				delta := max(u, 0)
				var dt float32
				if delta-prev[i]*delta > 0 {
					dt = ds[i]
				}
				ddelta := dt * (1 - prev[i])
				ds[i] -= dt * delta
				du := float32(0)
				if u > 0 {
					du = ddelta
				}
				dimgs[j][i] += du
				dopen[i] = -du
			}
		}
		dilateBackward(t.imgs[j+1], dopen, dimgs[j+1], g)
	}
	for j := iters + 1; j >= 1; j-- {
		erodeBackward(t.imgs[j-1], dimgs[j], dimgs[j-1], g)
	}
	return dimgs[0]
}

// skelDims checks the tensors of a skeleton op.
func skelDims(op string, x, y nn.Tensor, iters, fromC int) (n int, g vol, c int) {
	n, dd, h, w, c := dims5(op, x)
	mustShape(op, y, cpuTensor(x).shape)
	if iters < 0 || fromC < 0 {
		panic(fmt.Sprintf("cpu.%s: iters %d, fromC %d must be non-negative", op, iters, fromC))
	}
	return n, vol{dd, h, w}, c
}

// gather copies channel ch of sample b of a channels-last tensor into dst.
func gather(src []float32, b, ch, c int, dst []float32) {
	base := b * len(dst) * c
	for i := range dst {
		dst[i] = src[base+i*c+ch]
	}
}

// SoftSkeleton writes the soft skeleton of every channel ≥ fromC of x to skel.
func (d *Device) SoftSkeleton(x, skel nn.Tensor, iters, fromC int) {
	n, g, c := skelDims("SoftSkeleton", x, skel, iters, fromC)
	xs, ss := cpuTensor(x).data, cpuTensor(skel).data
	nv := g.n()
	d.parallel(n*c, func(i int) {
		b, ch := i/c, i%c
		base := b * nv * c
		if ch < fromC {
			for v := 0; v < nv; v++ {
				ss[base+v*c+ch] = 0
			}
			return
		}
		img := make([]float32, nv)
		gather(xs, b, ch, c, img)
		s := softSkel(img, g, iters).skels[iters]
		for v, val := range s {
			ss[base+v*c+ch] = val
		}
	})
}

// SoftSkeletonBackward adds ∂(Σ dskel·SoftSkeleton(x))/∂x to dx.
func (d *Device) SoftSkeletonBackward(x, dskel, dx nn.Tensor, iters, fromC int) {
	n, g, c := skelDims("SoftSkeletonBackward", x, dskel, iters, fromC)
	mustShape("SoftSkeletonBackward", dx, cpuTensor(x).shape)
	xs, gs, dxs := cpuTensor(x).data, cpuTensor(dskel).data, cpuTensor(dx).data
	nv := g.n()
	d.parallel(n*c, func(i int) {
		b, ch := i/c, i%c
		if ch < fromC {
			return
		}
		base := b * nv * c
		img := make([]float32, nv)
		gather(xs, b, ch, c, img)
		dsk := make([]float32, nv)
		gather(gs, b, ch, c, dsk)
		grad := softSkelBackward(softSkel(img, g, iters), dsk, g, iters)
		for v, val := range grad {
			dxs[base+v*c+ch] += val
		}
	})
}
