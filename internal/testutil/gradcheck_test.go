package testutil

import (
	"math"
	"math/rand/v2"
	"testing"
)

// failRecorder is a testing.TB that records Errorf calls instead of
// failing the test, so that a failing check can itself be tested.
type failRecorder struct {
	testing.TB
	failed bool
}

func (r *failRecorder) Errorf(string, ...any) { r.failed = true }
func (r *failRecorder) Logf(string, ...any)   {}
func (r *failRecorder) Helper()               {}

// cubic returns L(x) = Σ r·x³ and its gradient 3·r·x².
func cubic(rng *rand.Rand, n int) (x, r, grad []float32, loss func() float64) {
	x, r, grad = make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], r[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		grad[i] = 3 * r[i] * x[i] * x[i]
	}
	loss = func() float64 {
		var s float64
		for i := range x {
			v := float64(x[i])
			s += float64(r[i]) * v * v * v
		}
		return s
	}
	return x, r, grad, loss
}

func TestGradCheckPassesRightGradient(t *testing.T) {
	x, _, grad, loss := cubic(rand.New(rand.NewPCG(1, 2)), 50)
	before := append([]float32(nil), x...)
	rec := &failRecorder{TB: t}
	GradCheck{Eps: 1e-3, Tol: 1e-3, Samples: 50}.Check(rec, "cubic", x, grad, loss)
	if rec.failed {
		t.Fatal("the exact gradient of Σ r·x³ failed the check")
	}
	for i := range x {
		if x[i] != before[i] {
			t.Fatalf("x[%d] = %v after the check, was %v: perturbations not undone", i, x[i], before[i])
		}
	}
}

func TestGradCheckCatchesWrongGradients(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(grad []float32)
	}{
		{"one coordinate off by 10%", func(g []float32) {
			for i := range g {
				g[i] *= 1.1
			}
		}},
		{"NaN", func(g []float32) { g[7] = float32(math.NaN()) }},
		{"all zero", func(g []float32) { clear(g) }},
	} {
		x, _, grad, loss := cubic(rand.New(rand.NewPCG(3, 4)), 20)
		c.spoil(grad)
		rec := &failRecorder{TB: t}
		GradCheck{Eps: 1e-3, Tol: 1e-3, Samples: 20}.Check(rec, c.name, x, grad, loss)
		if !rec.failed {
			t.Errorf("%s: a wrong gradient passed the check", c.name)
		}
	}
}

func TestDot64(t *testing.T) {
	if got := Dot64([]float32{1, 2, 3}, []float32{4, 5, 6}); got != 32 {
		t.Fatalf("Dot64 = %v, want 32", got)
	}
}
