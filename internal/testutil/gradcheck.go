package testutil

import (
	"math"
	"math/rand/v2"
	"testing"
)

// GradCheck is a finite-difference gradient check: for a scalar loss L(x)
// and its analytic gradient ∂L/∂x, Check compares ∂L/∂x[i] with the
// central difference (L(x + Eps·e_i) − L(x − Eps·e_i)) / 2Eps at up to
// Samples coordinates i. The tests of an op y = f(x, …) use L = Σ r·y for
// a fixed random r (see Dot64), whose gradient is the op's backward pass
// applied to r.
//
// The error at coordinate i is measured relative to the whole gradient's
// scale, |numeric − analytic[i]| / (max|analytic| + |analytic[i]|), so that
// coordinates with tiny gradients are not held to a relative accuracy that
// float32 rounding of the loss cannot give.
type GradCheck struct {
	Eps     float32 // half the finite-difference step
	Tol     float64 // the largest relative error allowed
	Samples int     // how many coordinates are checked at most
	// Rand picks the coordinates. Nil means a generator seeded from
	// len(x), so a check picks the same coordinates on every run.
	Rand *rand.Rand
}

// Check compares analytic with central differences of loss at up to
// c.Samples coordinates of x, perturbing x in place and restoring it. It
// reports the first coordinate whose error exceeds c.Tol (or is NaN) with
// t.Errorf and logs the worst error otherwise.
func (c GradCheck) Check(t testing.TB, name string, x, analytic []float32, loss func() float64) {
	t.Helper()
	rng := c.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(uint64(len(x)), 11))
	}
	var scale float64
	for _, g := range analytic {
		scale = max(scale, math.Abs(float64(g)))
	}
	if scale == 0 {
		// An all-zero gradient: any non-zero difference is then an error,
		// not a division by zero.
		scale = 1e-12
	}
	idx := rng.Perm(len(x))
	if len(idx) > c.Samples {
		idx = idx[:c.Samples]
	}
	var worst float64
	for _, i := range idx {
		orig := x[i]
		x[i] = orig + c.Eps
		hi := x[i]
		lossHi := loss()
		x[i] = orig - c.Eps
		lo := x[i]
		lossLo := loss()
		x[i] = orig
		// Divide by the step actually taken: orig ± Eps rounds in float32.
		num := (lossHi - lossLo) / float64(hi-lo)
		err := math.Abs(num-float64(analytic[i])) / (scale + math.Abs(float64(analytic[i])))
		worst = max(worst, err)
		if !(err <= c.Tol) {
			t.Errorf("%s: d/dx[%d] analytic %.6g, numeric %.6g (rel. error %.2e > %.0e)", name, i, analytic[i], num, err, c.Tol)
			return
		}
	}
	t.Logf("%s: worst relative error %.2e over %d coordinates", name, worst, len(idx))
}

// Dot64 returns Σ a·b accumulated in float64: the projection L = Σ r·y
// that turns an op's output y into a scalar loss for GradCheck.
func Dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
