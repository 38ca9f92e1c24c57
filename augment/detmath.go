package augment

import (
	"math"
	"math/rand/v2"
)

// Deterministic elementary functions.
//
// "Same seed, same bytes on any machine" rules out the math package for
// anything that reaches an output voxel: math.Exp and math.Log have assembly
// versions on some architectures and pure-Go ones on others, and the Go
// compiler may fuse x*y+z into one FMA instruction on arm64, ppc64 and s390x
// (and on amd64 with GOAMD64=v3), each giving different last bits. The
// functions below use only +, -, *, / and sqrt (all correctly rounded by
// IEEE 754), exact bit manipulation, and an explicit conversion around every
// product that feeds an addition: the Go spec says an explicit conversion
// rounds to the target precision, which forbids fusion. The same rule is
// followed in every kernel of this package.

const (
	ln2Hi  = 6.93147180369123816490e-01 // fdlibm split of ln 2
	ln2Lo  = 1.90821492927058770002e-10
	log2e  = 1.44269504088896338700e+00
	pio2Hi = 1.57079632673412561417e+00 // fdlibm split of pi/2
	pio2Lo = 6.07710050650619224932e-11
	twoOPi = 6.36619772367581382433e-01
)

// pow2 returns 2**k for the normal exponent range, exactly.
func pow2(k int) float64 {
	return math.Float64frombits(uint64(k+1023) << 52)
}

// ldexp returns f * 2**k, deterministically (two exact steps in the
// subnormal and overflow ranges).
func ldexp(f float64, k int) float64 {
	switch {
	case k > 1023:
		f *= pow2(1023)
		k -= 1023
		if k > 1023 {
			return math.Inf(1) * f
		}
	case k < -1022:
		f *= pow2(-1022)
		k += 1022
		if k < -1022 {
			return 0 * f
		}
	}
	return f * pow2(k)
}

// dexp is a deterministic exp with ~1 ulp accuracy.
func dexp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.782712893384:
		return math.Inf(1)
	case x < -745.1332191019412:
		return 0
	}
	k := math.Floor(float64(x*log2e) + 0.5)
	r := float64(x-float64(k*ln2Hi)) - float64(k*ln2Lo)
	// Taylor series to r^14/14!: |r| <= 0.35, truncation < 1e-18.
	p := 1.0 / 87178291200
	p = float64(p*r) + 1.0/6227020800
	p = float64(p*r) + 1.0/479001600
	p = float64(p*r) + 1.0/39916800
	p = float64(p*r) + 1.0/3628800
	p = float64(p*r) + 1.0/362880
	p = float64(p*r) + 1.0/40320
	p = float64(p*r) + 1.0/5040
	p = float64(p*r) + 1.0/720
	p = float64(p*r) + 1.0/120
	p = float64(p*r) + 1.0/24
	p = float64(p*r) + 1.0/6
	p = float64(p*r) + 0.5
	p = float64(p*r) + 1
	p = float64(p*r) + 1
	return ldexp(p, int(k))
}

// frexpNorm splits a positive finite x into m*2**e with m in [sqrt(1/2), sqrt(2)).
func frexpNorm(x float64) (m float64, e int) {
	if x < 0x1p-1022 { // subnormal: scale into the normal range first
		x *= 0x1p54
		e = -54
	}
	b := math.Float64bits(x)
	e += int((b>>52)&0x7ff) - 1023
	m = math.Float64frombits(b&^(0x7ff<<52) | 1023<<52) // [1, 2)
	if m > math.Sqrt2 {
		m *= 0.5
		e++
	}
	return m, e
}

// dlog is a deterministic natural logarithm with ~1 ulp accuracy.
func dlog(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	m, e := frexpNorm(x)
	f := m - 1
	s := f / (2 + f) // |s| <= 0.1716
	s2 := float64(s * s)
	// log m = 2 atanh s = 2 (s + s^3/3 + ... + s^21/21); truncation < 1e-19.
	p := 1.0 / 21
	p = float64(p*s2) + 1.0/19
	p = float64(p*s2) + 1.0/17
	p = float64(p*s2) + 1.0/15
	p = float64(p*s2) + 1.0/13
	p = float64(p*s2) + 1.0/11
	p = float64(p*s2) + 1.0/9
	p = float64(p*s2) + 1.0/7
	p = float64(p*s2) + 1.0/5
	p = float64(p*s2) + 1.0/3
	lm := 2 * (s + float64(float64(s*s2)*p))
	fe := float64(e)
	return float64(fe*ln2Hi) + (float64(fe*ln2Lo) + lm)
}

// dsincos returns sin x and cos x deterministically; accurate to a few ulp
// for |x| up to ~1e6 (angles here are within a few pi).
func dsincos(x float64) (sin, cos float64) {
	k := math.Floor(float64(x*twoOPi) + 0.5)
	r := float64(x-float64(k*pio2Hi)) - float64(k*pio2Lo) // |r| <= pi/4
	r2 := float64(r * r)
	s := sinPoly(r, r2)
	c := cosPoly(r2)
	switch int64(k) & 3 {
	case 0:
		return s, c
	case 1:
		return c, -s
	case 2:
		return -s, -c
	default:
		return -c, s
	}
}

func sinPoly(r, r2 float64) float64 {
	p := 1.0 / 355687428096000 // 1/17!
	p = -float64(p*r2) + 1.0/1307674368000
	p = -float64(p*r2) + 1.0/6227020800
	p = -float64(p*r2) + 1.0/39916800
	p = -float64(p*r2) + 1.0/362880
	p = -float64(p*r2) + 1.0/5040
	p = -float64(p*r2) + 1.0/120
	p = -float64(p*r2) + 1.0/6
	// sin r = r - r^3 p
	return r - float64(float64(r*r2)*p)
}

func cosPoly(r2 float64) float64 {
	p := 1.0 / 6402373705728000 // 1/18!
	p = -float64(p*r2) + 1.0/20922789888000
	p = -float64(p*r2) + 1.0/87178291200
	p = -float64(p*r2) + 1.0/479001600
	p = -float64(p*r2) + 1.0/3628800
	p = -float64(p*r2) + 1.0/40320
	p = -float64(p*r2) + 1.0/720
	p = -float64(p*r2) + 1.0/24
	p = -float64(p*r2) + 0.5
	// cos r = 1 - r^2 p
	return 1 - float64(r2*p)
}

// fastLog is a deterministic natural logarithm for float32 work
// (relative error < 1e-9): the atanh series of detmath's dlog, cut short and
// evaluated in Estrin's scheme so successive calls overlap in the CPU.
func fastLog(x float64) float64 {
	if !(x >= 0x1p-1022 && x < math.Inf(1)) { // zero, negative, subnormal, Inf, NaN
		return dlog(x)
	}
	b := math.Float64bits(x)
	e := int(b>>52) - 1023
	m := math.Float64frombits(b&(1<<52-1) | 1023<<52)
	if m > math.Sqrt2 {
		m *= 0.5
		e++
	}
	f := m - 1
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	// log m = 2s (1 + s²/3 + s⁴/5 + s⁶/7 + s⁸/9 + s¹⁰/11); truncation < 1e-11.
	p := (1.0/3 + float64(s2*(1.0/5))) + float64(s4*((1.0/7+float64(s2*(1.0/9)))+float64(s4*(1.0/11))))
	lm := 2 * (s + float64(float64(s*s2)*p))
	fe := float64(e)
	return float64(fe*ln2Hi) + (float64(fe*ln2Lo) + lm)
}

// roundHalfEven rounds to the nearest integer (ties to even) for |y| < 2^51:
// adding and subtracting 1.5·2^52 leaves no fraction bits, exactly.
func roundHalfEven(y float64) float64 {
	const magic = 0x1.8p52
	return (y + magic) - magic
}

// fastExp is a deterministic exp for float32 work (relative error < 1e-9).
func fastExp(x float64) float64 {
	if !(x > -700 && x < 700) {
		return dexp(x)
	}
	k := roundHalfEven(float64(x * log2e))
	r := float64(x-float64(k*ln2Hi)) - float64(k*ln2Lo) // |r| <= 0.35
	r2 := float64(r * r)
	r4 := float64(r2 * r2)
	// Taylor to r⁹/9! in Estrin's scheme; truncation < 3e-11.
	a0 := 1 + r
	a1 := 0.5 + float64(r*(1.0/6))
	a2 := 1.0/24 + float64(r*(1.0/120))
	a3 := 1.0/720 + float64(r*(1.0/5040))
	a4 := 1.0/40320 + float64(r*(1.0/362880))
	p := (a0 + float64(r2*a1)) + float64(r4*((a2+float64(r2*a3))+float64(r4*a4)))
	return p * pow2(int(k))
}

// powUnit returns x**g for x in [0, 1] and g > 0, deterministically, to
// float32 accuracy.
func powUnit(x, g float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	return fastExp(float64(g * fastLog(x)))
}

// normPair draws two independent standard normal values with Marsaglia's
// polar method, deterministic given the rng (math/rand/v2's NormFloat64
// calls math.Exp and math.Log in its tails).
func normPair(r *rand.Rand) (float64, float64) {
	for {
		// Uniform on [-1, 1) from 53 random bits, exactly.
		u := float64(int64(r.Uint64()>>11)-1<<52) * 0x1p-52
		v := float64(int64(r.Uint64()>>11)-1<<52) * 0x1p-52
		s := float64(u*u) + float64(v*v)
		if s >= 1 || s == 0 {
			continue
		}
		f := math.Sqrt(-2 * fastLog(s) / s)
		return u * f, v * f
	}
}

// uniform draws from [lo, hi).
func uniform(r *rand.Rand, lo, hi float64) float64 {
	return lo + float64((hi-lo)*r.Float64())
}
