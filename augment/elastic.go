package augment

import (
	"math"
	"math/rand/v2"
)

// elasticGrid is a displacement field on a coarse grid of control points
// spanning the output patch: node k of axis a sits at output coordinate
// k·step[a], and between nodes the field is trilinear. Three components
// (D, H, W displacements, in output voxels), stored component-major.
type elasticGrid struct {
	active bool
	n      [3]int
	step   [3]float64
	v      []float32 // [3][n0][n1][n2]
	maxAbs [3]float32
	tmp    []float64
}

// draw fills the grid: independent standard normal displacements at every
// node, smoothed once by the binomial kernel [1 2 1]/4 along each axis,
// centred to zero mean per component, then scaled so the largest
// displacement of each component is magnitude.
func (g *elasticGrid) draw(rng *rand.Rand, patch [3]int, magnitude, scale float64) {
	g.active = true
	total := 1
	for a := range 3 {
		span := float64(patch[a] - 1)
		n := 2
		if span > 0 {
			n = max(2, int(math.Ceil(span/scale))+1)
		}
		g.n[a] = n
		g.step[a] = math.Max(span, 1) / float64(n-1)
		total *= n
	}
	if cap(g.v) < 3*total {
		g.v = make([]float32, 3*total)
		g.tmp = make([]float64, 2*total)
	}
	g.v = g.v[:3*total]
	cur, nxt := g.tmp[:total], g.tmp[total:2*total]
	for c := range 3 {
		for i := 0; i < total; i += 2 {
			x, y := normPair(rng)
			cur[i] = x
			if i+1 < total {
				cur[i+1] = y
			}
		}
		for a := range 3 {
			smooth121(nxt, cur, g.n, a)
			cur, nxt = nxt, cur
		}
		mean := 0.0
		for _, x := range cur {
			mean += x
		}
		mean /= float64(total)
		peak := 0.0
		for i, x := range cur {
			cur[i] = x - mean
			peak = math.Max(peak, math.Abs(cur[i]))
		}
		f := 0.0
		if peak > 0 {
			f = magnitude / peak
		}
		out := g.v[c*total : (c+1)*total]
		g.maxAbs[c] = 0
		for i, x := range cur {
			out[i] = float32(x * f)
			g.maxAbs[c] = max(g.maxAbs[c], float32(math.Abs(float64(out[i]))))
		}
	}
}

// smooth121 convolves src with [1 2 1]/4 along axis a, repeating edge nodes.
func smooth121(dst, src []float64, n [3]int, a int) {
	stride := [3]int{n[1] * n[2], n[2], 1}[a]
	for i := range src {
		k := (i / stride) % n[a]
		lo, hi := i-stride, i+stride
		if k == 0 {
			lo = i
		}
		if k == n[a]-1 {
			hi = i
		}
		dst[i] = float64(0.25*src[lo]) + float64(0.5*src[i]) + float64(0.25*src[hi])
	}
}

// cell returns the node index k (0 <= k <= n-2) and fraction f of output
// coordinate t on axis a.
func (g *elasticGrid) cell(a int, t float64) (int, float64) {
	u := t / g.step[a]
	k := int(math.Floor(u))
	k = min(max(k, 0), g.n[a]-2)
	return k, u - float64(k)
}

// at returns the field's trilinear value at output coordinates o (float64;
// the reference path).
func (g *elasticGrid) at(o [3]float64) [3]float64 {
	kz, fz := g.cell(0, o[0])
	ky, fy := g.cell(1, o[1])
	kx, fx := g.cell(2, o[2])
	total := g.n[0] * g.n[1] * g.n[2]
	var e [3]float64
	for c := range 3 {
		v := g.v[c*total : (c+1)*total]
		at := func(z, y, x int) float64 { return float64(v[(z*g.n[1]+y)*g.n[2]+x]) }
		l := func(a, b, t float64) float64 { return a + float64(t*(b-a)) }
		c00 := l(at(kz, ky, kx), at(kz, ky, kx+1), fx)
		c01 := l(at(kz, ky+1, kx), at(kz, ky+1, kx+1), fx)
		c10 := l(at(kz+1, ky, kx), at(kz+1, ky, kx+1), fx)
		c11 := l(at(kz+1, ky+1, kx), at(kz+1, ky+1, kx+1), fx)
		e[c] = l(l(c00, c01, fy), l(c10, c11, fy), fz)
	}
	return e
}

// rowNodes writes the field at every W node of output row (z, y) into
// e[3][n2] (bilinear in D and H; the W direction stays at the nodes).
func (g *elasticGrid) rowNodes(e *[3][]float64, z, y int) {
	kz, fz := g.cell(0, float64(z))
	ky, fy := g.cell(1, float64(y))
	n1, n2 := g.n[1], g.n[2]
	total := g.n[0] * n1 * n2
	for c := range 3 {
		v := g.v[c*total : (c+1)*total]
		r00 := v[(kz*n1+ky)*n2:][:n2]
		r01 := v[(kz*n1+ky+1)*n2:][:n2]
		r10 := v[((kz+1)*n1+ky)*n2:][:n2]
		r11 := v[((kz+1)*n1+ky+1)*n2:][:n2]
		out := e[c][:n2]
		for k := range out {
			a := float64(r00[k]) + float64(fy*(float64(r01[k])-float64(r00[k])))
			b := float64(r10[k]) + float64(fy*(float64(r11[k])-float64(r10[k])))
			out[k] = a + float64(fz*(b-a))
		}
	}
}
