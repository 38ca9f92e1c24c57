package augment

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// runOne plans a sample with config cfg (spatially the identity: a crop of
// the whole small volume) and returns the input crop, the output and the
// sample.
func runOne(t *testing.T, cfg config.Augment, shape [3]int, seed uint64, channels int) ([][]float32, Dest, *Plan) {
	t.Helper()
	a := mustNew(t, cfg, shape, channels)
	var img [][]float32
	for c := 0; c < channels; c++ {
		img = append(img, testutil.SmoothVolume(shape, seed+uint64(c)))
	}
	var s Plan
	if err := a.Draw(&s, rand.New(rand.NewPCG(seed, 1)), shape, nil, false); err != nil {
		t.Fatal(err)
	}
	if !s.exact {
		t.Fatal("intensity tests expect an identity spatial transform")
	}
	d := newDest(a, false)
	if err := a.Apply(&s, Input{Image: img, Shape: shape}, d, &Workspace{}); err != nil {
		t.Fatal(err)
	}
	return img, d, &s
}

func only(t *testing.T, set func(c *config.Augment)) config.Augment {
	c := mustPreset(t, config.PresetNone)
	set(&c)
	return c
}

func meanStd(x []float64) (float64, float64) {
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return m, math.Sqrt(s / float64(len(x)-1))
}

var smallShape = [3]int{6, 7, 9}

func TestBrightnessFormula(t *testing.T) {
	in, d, s := runOne(t, only(t, func(c *config.Augment) { c.Brightness.P = 1 }), smallShape, 3, 2)
	for c := range in {
		m := float64(s.ch[c].brightness)
		if m < 0.75 || m > 1.25 || m == 1 {
			t.Fatalf("multiplier %v", m)
		}
		want := make([]float64, len(in[c]))
		for i, v := range in[c] {
			want[i] = float64(v) * m
		}
		testutil.CloseTo(t, "brightness", d.Image[c], want, 1e-6)
	}
}

func TestContrastFormula(t *testing.T) {
	for _, preserve := range []bool{true, false} {
		cfg := only(t, func(c *config.Augment) {
			c.Contrast.P = 1
			c.Contrast.Range = [2]float64{1.3, 1.3}
			c.Contrast.PreserveRange = preserve
		})
		in, d, s := runOne(t, cfg, smallShape, 4, 1)
		f := float64(s.ch[0].contrast)
		x := make([]float64, len(in[0]))
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, v := range in[0] {
			x[i] = float64(v)
			lo, hi = math.Min(lo, x[i]), math.Max(hi, x[i])
		}
		m, _ := meanStd(x)
		want := make([]float64, len(x))
		clipped := 0
		for i, v := range x {
			want[i] = (v-m)*f + m
			if preserve && (want[i] < lo || want[i] > hi) {
				want[i] = math.Min(math.Max(want[i], lo), hi)
				clipped++
			}
		}
		if preserve && clipped == 0 {
			t.Fatal("contrast 1.3 clipped nothing: test too weak")
		}
		testutil.CloseTo(t, "contrast", d.Image[0], want, 1e-5)
	}
}

// refGamma is batchgeneratorsv2's GammaTransform in float64.
func refGamma(in []float32, g float64, invert, retain bool) []float64 {
	x := make([]float64, len(in))
	for i, v := range in {
		x[i] = float64(v)
		if invert {
			x[i] = -x[i]
		}
	}
	m, sd := meanStd(x)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range x {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	r := hi - lo
	for i, v := range x {
		x[i] = math.Pow((v-lo)/math.Max(r, 1e-7), g)*r + lo
	}
	if retain {
		m2, sd2 := meanStd(x)
		for i, v := range x {
			x[i] = (v-m2)*(sd/math.Max(sd2, 1e-7)) + m
		}
	}
	if invert {
		for i := range x {
			x[i] = -x[i]
		}
	}
	return x
}

func TestGammaFormula(t *testing.T) {
	for _, invert := range []bool{false, true} {
		for _, retain := range []bool{false, true} {
			cfg := only(t, func(c *config.Augment) {
				g := config.Gamma{P: 1, Range: [2]float64{0.7, 1.5}, RetainStats: retain}
				if invert {
					c.GammaInverted = g
				} else {
					c.Gamma = g
				}
			})
			in, d, s := runOne(t, cfg, smallShape, 5, 2)
			for c := range in {
				g := s.ch[c].gamma
				if invert {
					g = s.ch[c].gammaInv
				}
				if g < 0.7 || g > 1.5 {
					t.Fatalf("gamma %v", g)
				}
				testutil.CloseTo(t, "gamma", d.Image[c], refGamma(in[c], float64(g), invert, retain), 2e-5)
			}
		}
	}
}

func TestNoiseIsAdditiveGaussian(t *testing.T) {
	shape := [3]int{16, 16, 16}
	cfg := only(t, func(c *config.Augment) { c.Noise = config.Noise{P: 1, Std: [2]float64{0.2, 0.2}} })
	in, d, s := runOne(t, cfg, shape, 6, 2)
	if s.ch[0].noise != 0.2 || s.ch[1].noise != 0.2 {
		t.Fatalf("std %v %v, want 0.2 on every channel", s.ch[0].noise, s.ch[1].noise)
	}
	for c := range in {
		diff := make([]float64, len(in[c]))
		for i := range diff {
			diff[i] = float64(d.Image[c][i] - in[c][i])
		}
		m, sd := meanStd(diff)
		if math.Abs(m) > 0.02 || math.Abs(sd-0.2) > 0.01 {
			t.Fatalf("channel %d noise mean %.4f std %.4f, want 0 and 0.2", c, m, sd)
		}
		// Standard normal tails: about 0.27 % beyond 3 sigma.
		far := 0
		for _, v := range diff {
			if math.Abs(v) > 0.6 {
				far++
			}
		}
		if frac := float64(far) / float64(len(diff)); frac > 0.006 {
			t.Fatalf("%.4f beyond 3 sigma", frac)
		}
	}
	// Channels get different noise.
	n0 := d.Image[0][100] - in[0][100]
	n1 := d.Image[1][100] - in[1][100]
	if n0 == n1 {
		t.Fatal("channels share their noise")
	}
}

// refBlur is a direct separable Gaussian in float64 with math.Exp weights
// and reflect padding.
func refBlur(in []float32, p [3]int, sigma [3]float32) []float64 {
	x := make([]float64, len(in))
	for i, v := range in {
		x[i] = float64(v)
	}
	stride := [3]int{p[1] * p[2], p[2], 1}
	for ax := 2; ax >= 0; ax-- {
		if sigma[ax] == 0 {
			continue
		}
		s := float64(sigma[ax])
		n := roundToNearestOdd(s*6 + 0.5)
		k := make([]float64, n)
		sum := 0.0
		for i := range k {
			u := (float64(i) - float64(n-1)/2) / s
			k[i] = math.Exp(-0.5 * u * u)
			sum += k[i]
		}
		y := make([]float64, len(x))
		for i := range x {
			pos := (i / stride[ax]) % p[ax]
			acc := 0.0
			for j := range k {
				q := reflectIndex(pos+j-n/2, p[ax])
				acc += k[j] / sum * x[i+(q-pos)*stride[ax]]
			}
			y[i] = acc
		}
		x = y
	}
	return x
}

func TestBlurFormula(t *testing.T) {
	shape := [3]int{8, 9, 11}
	cfg := only(t, func(c *config.Augment) { c.Blur = config.Blur{P: 1, Sigma: [2]float64{0.5, 3}, PPerChannel: 1} })
	in, d, s := runOne(t, cfg, shape, 7, 2)
	for c := range in {
		sg := s.ch[c].blur
		if sg[0] == sg[1] || sg[1] == sg[2] {
			t.Fatalf("sigmas %v not drawn per axis", sg)
		}
		testutil.CloseTo(t, "blur", d.Image[c], refBlur(in[c], shape, sg), 1e-5)
	}
}

func TestGaussKernelMatchesNNUNetSizes(t *testing.T) {
	// batchgeneratorsv2: size = nearest odd to 6σ+0.5 (Python round).
	for _, c := range []struct {
		sigma float64
		n     int
	}{{0.5, 3}, {0.75, 5}, {1, 7}, {2, 13}} {
		k := gaussKernel(make([]float32, 0, 65), c.sigma)
		if len(k) != c.n {
			t.Fatalf("σ %v: %d taps, want %d", c.sigma, len(k), c.n)
		}
		sum := float32(0)
		for i := range k {
			sum += k[i]
			if k[i] != k[len(k)-1-i] {
				t.Fatal("kernel not symmetric")
			}
		}
		if math.Abs(float64(sum)-1) > 1e-6 {
			t.Fatalf("kernel sums to %v", sum)
		}
	}
}

// refLowRes is torch's interpolate(nearest-exact) down, then trilinear
// (align_corners=False) up, per voxel in float64.
func refLowRes(in []float32, p [3]int, m [3]int) []float64 {
	small := make([]float64, m[0]*m[1]*m[2])
	ne := func(j, n, m int) int { return min(int(math.Floor((float64(j)+0.5)*float64(n)/float64(m))), n-1) }
	for z := 0; z < m[0]; z++ {
		for y := 0; y < m[1]; y++ {
			for x := 0; x < m[2]; x++ {
				small[(z*m[1]+y)*m[2]+x] = float64(in[(ne(z, p[0], m[0])*p[1]+ne(y, p[1], m[1]))*p[2]+ne(x, p[2], m[2])])
			}
		}
	}
	tap := func(j, m, n int) (int, int, float64) {
		src := (float64(j)+0.5)*float64(m)/float64(n) - 0.5
		if src < 0 {
			src = 0
		}
		i0 := int(src)
		i1 := min(i0+1, m-1)
		return i0, i1, src - float64(i0)
	}
	out := make([]float64, len(in))
	for z := 0; z < p[0]; z++ {
		z0, z1, lz := tap(z, m[0], p[0])
		for y := 0; y < p[1]; y++ {
			y0, y1, ly := tap(y, m[1], p[1])
			for x := 0; x < p[2]; x++ {
				x0, x1, lx := tap(x, m[2], p[2])
				at := func(a, b, c int) float64 { return small[(a*m[1]+b)*m[2]+c] }
				v := 0.0
				for _, zz := range [2]struct {
					i int
					w float64
				}{{z0, 1 - lz}, {z1, lz}} {
					for _, yy := range [2]struct {
						i int
						w float64
					}{{y0, 1 - ly}, {y1, ly}} {
						v += zz.w * yy.w * ((1-lx)*at(zz.i, yy.i, x0) + lx*at(zz.i, yy.i, x1))
					}
				}
				out[(z*p[1]+y)*p[2]+x] = v
			}
		}
	}
	return out
}

func TestLowResFormula(t *testing.T) {
	shape := [3]int{10, 12, 14}
	cfg := only(t, func(c *config.Augment) {
		c.LowRes = config.LowRes{P: 1, Scale: [2]float64{0.5, 0.7}, PPerChannel: 1, Axes: []int{0, 1, 2}}
	})
	in, d, s := runOne(t, cfg, shape, 8, 2)
	for c := range in {
		sc := s.ch[c].lowRes
		m := [3]int{lowResSize(shape[0], sc), lowResSize(shape[1], sc), lowResSize(shape[2], sc)}
		if m == shape {
			t.Fatal("no downsampling")
		}
		testutil.CloseTo(t, "low res", d.Image[c], refLowRes(in[c], shape, m), 1e-5)
	}
	// Only the listed axes are downsampled.
	cfg.LowRes.Axes = []int{1, 2}
	in, d, s = runOne(t, cfg, shape, 9, 1)
	sc := s.ch[0].lowRes
	m := [3]int{shape[0], lowResSize(shape[1], sc), lowResSize(shape[2], sc)}
	testutil.CloseTo(t, "low res in-plane", d.Image[0], refLowRes(in[0], shape, m), 1e-5)
}

func TestBGContrastSampling(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	below := 0
	for i := 0; i < 4000; i++ {
		f := bgContrast(r, [2]float64{0.75, 1.25})
		if f < 0.75 || f > 1.25 {
			t.Fatalf("factor %v outside range", f)
		}
		if f < 1 {
			below++
		}
	}
	if below < 1800 || below > 2200 {
		t.Fatalf("%d of 4000 below 1, want about half", below)
	}
	// A range on one side of 1 is uniform over it.
	for i := 0; i < 100; i++ {
		if f := bgContrast(r, [2]float64{1.1, 1.3}); f < 1.1 || f > 1.3 {
			t.Fatalf("factor %v", f)
		}
	}
}

func TestDetMath(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < 20000; i++ {
		x := (r.Float64() - 0.5) * 80
		if e, w := dexp(x), math.Exp(x); math.Abs(e-w) > 4e-16*w {
			t.Fatalf("dexp(%v) = %v, want %v", x, e, w)
		}
		y := math.Exp((r.Float64() - 0.5) * 1400)
		if l, w := dlog(y), math.Log(y); math.Abs(l-w) > 4e-16*math.Max(1, math.Abs(w)) {
			t.Fatalf("dlog(%v) = %v, want %v", y, l, w)
		}
		a := (r.Float64() - 0.5) * 20
		s, c := dsincos(a)
		if math.Abs(s-math.Sin(a)) > 1e-15 || math.Abs(c-math.Cos(a)) > 1e-15 {
			t.Fatalf("dsincos(%v) = %v %v", a, s, c)
		}
		u, g := r.Float64(), 0.5+r.Float64()
		if l, w := fastLog(u), math.Log(u); math.Abs(l-w) > 1e-9*math.Max(1e-3, math.Abs(w)) {
			t.Fatalf("fastLog(%v) = %v, want %v", u, l, w)
		}
		if e, w := fastExp(-30*u), math.Exp(-30*u); math.Abs(e-w) > 1e-9*w {
			t.Fatalf("fastExp(%v) = %v, want %v", -30*u, e, w)
		}
		if p, w := powUnit(u, g), math.Pow(u, g); math.Abs(p-w) > 2e-9*math.Max(w, 1e-300) {
			t.Fatalf("powUnit(%v, %v) = %v, want %v", u, g, p, w)
		}
	}
	if dlog(1) != 0 || dexp(0) != 1 || powUnit(1, 0.7) != 1 || powUnit(0, 0.7) != 0 {
		t.Fatal("exact points")
	}
	// Python's math.log(5e-320); amd64's math.Log says -709.09 for this
	// subnormal.
	if math.Abs(dlog(5e-320)-(-735.2178029785398)) > 1e-12 || !math.IsInf(dlog(0), -1) || !math.IsNaN(dlog(-1)) {
		t.Fatal("dlog special values")
	}
}
