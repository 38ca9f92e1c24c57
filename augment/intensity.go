package augment

import (
	"math"
	"math/rand/v2"
)

// Intensity transforms on one output channel (a D×H×W patch, W fastest),
// in place. Each kernel works on a range of D planes so a Workspace can
// split it over goroutines; reductions keep one partial result per plane
// and combine them in plane order, so the bytes never depend on the number
// of goroutines. intensity_test.go holds each kernel to its formula written
// out plainly in float64.

// planeStats are per-plane partial statistics.
type planeStats struct {
	n        float64
	mean, m2 float64 // mean and sum of squared deviations (Chan et al.)
	min, max float32
}

// statsPlanes computes the statistics of sign·x over planes [lo, hi).
func statsPlanes(x []float32, plane int, sign float32, out []planeStats, lo, hi int) {
	for z := lo; z < hi; z++ {
		p := x[z*plane : (z+1)*plane]
		sum := 0.0
		mn, mx := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range p {
			v *= sign
			sum += float64(v)
			mn = min(mn, v)
			mx = max(mx, v)
		}
		mean := sum / float64(plane)
		m2 := 0.0
		for _, v := range p {
			d := float64(v*sign) - mean
			m2 += float64(d * d)
		}
		out[z] = planeStats{n: float64(plane), mean: mean, m2: m2, min: mn, max: mx}
	}
}

// combineStats merges per-plane statistics in order.
func combineStats(parts []planeStats) planeStats {
	t := parts[0]
	for _, p := range parts[1:] {
		n := t.n + p.n
		d := p.mean - t.mean
		t.mean += float64(d * (p.n / n))
		t.m2 += p.m2 + float64(float64(d*d)*float64(t.n*p.n/n))
		t.n = n
		t.min = min(t.min, p.min)
		t.max = max(t.max, p.max)
	}
	return t
}

// std is the unbiased standard deviation (torch.std's default).
func (s planeStats) std() float64 {
	if s.n < 2 {
		return 0
	}
	return math.Sqrt(s.m2 / (s.n - 1))
}

// noisePlaneSeed derives the generator seed of one channel's plane, so the noise
// does not depend on which goroutine draws which plane.
func noisePlaneSeed(seed [2]uint64, c, z int) (uint64, uint64) {
	return seed[0] ^ (uint64(c)+1)*0x9e3779b97f4a7c15, seed[1] ^ (uint64(z)+1)*0xbf58476d1ce4e5b9
}

// noisePlanes adds std·N(0, 1) to planes [lo, hi).
func noisePlanes(x []float32, plane int, std float32, seed [2]uint64, c int, pcg *rand.PCG, r *rand.Rand, lo, hi int) {
	for z := lo; z < hi; z++ {
		pcg.Seed(noisePlaneSeed(seed, c, z))
		p := x[z*plane : (z+1)*plane]
		for i := 0; i < len(p); i += 2 {
			a, b := normPair(r)
			p[i] += float32(std * float32(a))
			if i+1 < len(p) {
				p[i+1] += float32(std * float32(b))
			}
		}
	}
}

// scalePlanes multiplies planes [lo, hi) by m (multiplicative brightness).
func scalePlanes(x []float32, plane int, m float32, lo, hi int) {
	for i, v := range x[lo*plane : hi*plane] {
		x[lo*plane+i] = v * m
	}
}

// contrastPlanes maps v -> (v − mean)·f + mean, clipped to [lo, hi] when
// clip is set.
func contrastPlanes(x []float32, plane int, mean, f, cmin, cmax float32, clip bool, lo, hi int) {
	p := x[lo*plane : hi*plane]
	for i, v := range p {
		v = float32((v-mean)*f) + mean
		if clip {
			v = min(max(v, cmin), cmax)
		}
		p[i] = v
	}
}

// gammaPlanes maps v = sign·x -> ((v − mn)/den)^g·rng + mn and stores
// sign·result.
func gammaPlanes(x []float32, plane int, sign, mn, den, rng float32, g float64, lo, hi int) {
	p := x[lo*plane : hi*plane]
	for i, v := range p {
		u := float32(float32(v*sign)-mn) / den
		r := float32(powUnit(float64(u), g))
		p[i] = sign * (float32(r*rng) + mn)
	}
}

// affinePlanes maps v = sign·x -> (v − a)·f + b and stores sign·result.
func affinePlanes(x []float32, plane int, sign, a, f, b float32, lo, hi int) {
	p := x[lo*plane : hi*plane]
	for i, v := range p {
		p[i] = sign * (float32((float32(v*sign)-a)*f) + b)
	}
}

// gaussKernel builds nnU-Net's blur kernel (batchgeneratorsv2
// gaussian_blur.py: size = nearest odd to 6σ+0.5, taps
// exp(−x²/2σ²) normalised) into k.
func gaussKernel(k []float32, sigma float64) []float32 {
	n := roundToNearestOdd(float64(sigma*6) + 0.5)
	k = k[:0]
	var w [65]float64
	sum := 0.0
	for i := 0; i < n; i++ {
		x := float64(2*i-(n-1)) / float64(2*sigma) // (i − (n−1)/2)/σ
		w[i] = dexp(-0.5 * float64(x*x))
		sum += w[i]
	}
	for i := 0; i < n; i++ {
		k = append(k, float32(w[i]/sum))
	}
	return k
}

// roundToNearestOdd is batchgeneratorsv2's _round_to_nearest_odd (Python's
// round, half to even), capped to 65 taps (σ <= 10.75; the config caps σ at 32
// but the kernel size then saturates).
func roundToNearestOdd(x float64) int {
	r := int(math.RoundToEven(x))
	if r%2 == 0 {
		if x-float64(r) >= 0 {
			r++
		} else {
			r--
		}
	}
	return min(max(r, 1), 65)
}

// reflectIndex maps an index into [0, n) as torch's "reflect" padding (the edge
// voxel is not repeated), folding as often as needed.
func reflectIndex(i, n int) int {
	if n == 1 {
		return 0
	}
	period := 2 * (n - 1)
	i %= period
	if i < 0 {
		i += period
	}
	if i >= n {
		i = period - i
	}
	return i
}

// blurW convolves rows of planes [lo, hi) along W. line is scratch of at
// least W + len(k) - 1.
func blurW(x []float32, p [3]int, k []float32, line []float32, lo, hi int) {
	w := p[2]
	r := len(k) / 2
	line = line[:w+2*r]
	for row := lo * p[1]; row < hi*p[1]; row++ {
		src := x[row*w : (row+1)*w]
		for i := range line {
			line[i] = src[reflectIndex(i-r, w)]
		}
		for i := range src {
			win := line[i : i+len(k)]
			acc := float32(k[0] * win[0])
			for j := 1; j < len(k); j++ {
				acc += float32(k[j] * win[j])
			}
			src[i] = acc
		}
	}
}

// blurH convolves planes [lo, hi) along H. tmp is scratch of one plane.
func blurH(x []float32, p [3]int, k []float32, tmp []float32, lo, hi int) {
	h, w := p[1], p[2]
	plane := h * w
	tmp = tmp[:plane]
	for z := lo; z < hi; z++ {
		pl := x[z*plane : (z+1)*plane]
		copy(tmp, pl)
		for y := 0; y < h; y++ {
			blurLines(pl[y*w:(y+1)*w], tmp, w, h, y, k)
		}
	}
}

// blurD convolves planes [lo, hi) of x along D, reading an unmodified copy
// of the whole channel from src.
func blurD(x, src []float32, p [3]int, k []float32, lo, hi int) {
	d := p[0]
	plane := p[1] * p[2]
	for z := lo; z < hi; z++ {
		blurLines(x[z*plane:(z+1)*plane], src, plane, d, z, k)
	}
}

// blurLines is the convolution along H or D: it sets out to the sum over
// taps j of k[j] times the line at index c+j-r (reflected into [0, n)) of
// src, whose lines are stride apart and len(out) long. Each product is
// rounded to float32 before it is added (see detmath.go).
func blurLines(out, src []float32, stride, n, c int, k []float32) {
	r := len(k) / 2
	in := src[reflectIndex(c-r, n)*stride:][:len(out)]
	for i := range out {
		out[i] = float32(k[0] * in[i])
	}
	for j := 1; j < len(k); j++ {
		in := src[reflectIndex(c+j-r, n)*stride:][:len(out)]
		kj := k[j]
		for i := range out {
			out[i] += float32(kj * in[i])
		}
	}
}

// lowResSize is the downsampled length of an axis of n voxels at scale s
// (Python's round, as nnU-Net computes the new shape).
func lowResSize(n int, s float32) int {
	return max(1, int(math.RoundToEven(float64(n)*float64(s))))
}

// nearestExactIndex is torch's nearest-exact source index for output j when
// resizing n -> m voxels.
func nearestExactIndex(j, n, m int) int {
	return min(int(math.Floor((float64(j)+0.5)*(float64(n)/float64(m)))), n-1)
}

// linearTaps is torch's linear interpolation (align_corners=False) from m
// source to n output voxels: output j reads i0, i1 with weights l0, l1.
func linearTaps(j, m, n int) (i0, i1 int, l0, l1 float32) {
	src := float32(float32(float32(j)+0.5)*(float32(m)/float32(n))) - 0.5
	if src < 0 {
		src = 0
	}
	i0 = int(src)
	i1 = i0
	if i0 < m-1 {
		i1++
	}
	l1 = src - float32(i0)
	return i0, i1, 1 - l1, l1
}

// lowResTaps holds one axis's upsampling taps.
type lowResTaps struct {
	i0, i1 []int32
	l0, l1 []float32
}

func (t *lowResTaps) build(m, n int) {
	if cap(t.i0) < n {
		t.i0, t.i1 = make([]int32, n), make([]int32, n)
		t.l0, t.l1 = make([]float32, n), make([]float32, n)
	}
	t.i0, t.i1, t.l0, t.l1 = t.i0[:n], t.i1[:n], t.l0[:n], t.l1[:n]
	for j := range n {
		a, b, la, lb := linearTaps(j, m, n)
		t.i0[j], t.i1[j], t.l0[j], t.l1[j] = int32(a), int32(b), la, lb
	}
}

// downsamplePlanes fills planes [lo, hi) of small (m0×m1×m2) with the
// nearest-exact downsampling of x (p0×p1×p2).
func downsamplePlanes(small, x []float32, p, m [3]int, lo, hi int) {
	for z := lo; z < hi; z++ {
		sz := nearestExactIndex(z, p[0], m[0])
		for y := range m[1] {
			sy := nearestExactIndex(y, p[1], m[1])
			row := x[(sz*p[1]+sy)*p[2]:][:p[2]]
			out := small[(z*m[1]+y)*m[2]:][:m[2]]
			for i := range out {
				out[i] = row[nearestExactIndex(i, p[2], m[2])]
			}
		}
	}
}

// upW expands rows of planes [lo, hi) from m2 to p2 voxels: in is
// (n0×n1×m2), out is (n0×n1×p2).
func upW(out, in []float32, n1, m2, p2 int, t *lowResTaps, lo, hi int) {
	for row := lo * n1; row < hi*n1; row++ {
		src := in[row*m2:][:m2]
		dst := out[row*p2:][:p2]
		for j := range dst {
			dst[j] = float32(t.l0[j]*src[t.i0[j]]) + float32(t.l1[j]*src[t.i1[j]])
		}
	}
}

// upH expands planes [lo, hi) along H from m1 to p1 rows of w voxels.
func upH(out, in []float32, m1, p1, w int, t *lowResTaps, lo, hi int) {
	for z := lo; z < hi; z++ {
		for y := range p1 {
			a := in[(z*m1+int(t.i0[y]))*w:][:w]
			b := in[(z*m1+int(t.i1[y]))*w:][:w]
			l0, l1 := t.l0[y], t.l1[y]
			dst := out[(z*p1+y)*w:][:w]
			for i := range dst {
				dst[i] = float32(l0*a[i]) + float32(l1*b[i])
			}
		}
	}
}

// upD expands output planes [lo, hi) along D from m0 planes.
func upD(out, in []float32, plane int, t *lowResTaps, lo, hi int) {
	for z := lo; z < hi; z++ {
		a := in[int(t.i0[z])*plane:][:plane]
		b := in[int(t.i1[z])*plane:][:plane]
		l0, l1 := t.l0[z], t.l1[z]
		dst := out[z*plane:][:plane]
		for i := range dst {
			dst[i] = float32(l0*a[i]) + float32(l1*b[i])
		}
	}
}
