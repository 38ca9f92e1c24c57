package cpu

import (
	"math"
	"slices"
	"testing"
)

// TestNormRowsMatchGo holds the norm loops as the device runs them (the
// AVX2 assembly for the first c &^ 7 channels where it can run, Go for the
// rest) to the plain Go loops over all channels: the same bits for every
// output and accumulator, at channel counts with and without a tail, with
// negative values, −0 and the slopes of LeakyReLU, ReLU and identity.
func TestNormRowsMatchGo(t *testing.T) {
	t.Logf("assembly: %v", haveNormAsm)
	rng := newRNG(3)
	bits32 := func(t *testing.T, what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d] = %v, Go loop %v", what, i, got[i], want[i])
			}
		}
	}
	bits64 := func(t *testing.T, what string, got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s[%d] = %v, Go loop %v", what, i, got[i], want[i])
			}
		}
	}
	for _, c := range []int{1, 3, 4, 5, 8, 12, 16, 20, 23, 32, 40, 128} {
		for _, rows := range []int{1, 5, 37} {
			for _, slope := range []float32{0.01, 0, 1} {
				n := rows * c
				x := randn(rng, n, 2, 0.1)
				dy := randn(rng, n, 1, 0)
				x[0], dy[n-1] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
				vec := func(scale, offset float64) []float32 { return randn(rng, c, scale, offset) }
				mean, scale, shift := vec(0.2, 0), vec(0.5, 1), vec(0.3, 0)
				mean[c-1] = x[c-1] // z = shift exactly for one voxel
				A, B, C := vec(1, 0), vec(0.1, 0), vec(0.1, 0)
				fac := actFactors(slope)
				acc := func() []float64 { // accumulators already holding earlier rows' sums
					a := make([]float64, c)
					for j := range a {
						a[j] = float64(rng.NormFloat64())
					}
					return a
				}

				s, q := acc(), acc()
				ws, wq := slices.Clone(s), slices.Clone(q)
				normSums(x, c, s, q)
				normSumsGo(x, c, 0, ws, wq)
				bits64(t, "normSums s", s, ws)
				bits64(t, "normSums q", q, wq)

				y, wy := make([]float32, n), make([]float32, n)
				normAct(x, y, c, mean, scale, shift, fac)
				normActGo(x, wy, c, 0, mean, scale, shift, fac)
				bits32(t, "normAct", y, wy)

				sg, sgx := acc(), acc()
				wsg, wsgx := slices.Clone(sg), slices.Clone(sgx)
				normActGradSums(x, dy, c, mean, scale, shift, fac, sg, sgx)
				normActGradSumsGo(x, dy, c, 0, mean, scale, shift, fac, wsg, wsgx)
				bits64(t, "normActGradSums g", sg, wsg)
				bits64(t, "normActGradSums g·x", sgx, wsgx)

				dx, wdx := make([]float32, n), make([]float32, n)
				normActGrad(x, dy, dx, c, mean, scale, shift, A, B, C, fac)
				normActGradGo(x, dy, wdx, c, 0, mean, scale, shift, A, B, C, fac)
				bits32(t, "normActGrad", dx, wdx)
			}
		}
	}
}

// TestNormRowsGoIsTheFormula checks the Go loops themselves against the
// formulas written out per element, so the pair above cannot agree on a
// wrong answer.
func TestNormRowsGoIsTheFormula(t *testing.T) {
	rng := newRNG(4)
	const c, rows = 5, 7
	x, dy := randn(rng, c*rows, 2, 0), randn(rng, c*rows, 1, 0)
	mean, scale, shift := randn(rng, c, 0.2, 0), randn(rng, c, 0.5, 1), randn(rng, c, 0.3, 0)
	A, B, C := randn(rng, c, 1, 0), randn(rng, c, 0.1, 0), randn(rng, c, 0.1, 0)
	const slope = 0.01
	fac := actFactors(slope)
	act := func(z float32) float32 { return max(z, slope*z) }
	s, q := make([]float64, c), make([]float64, c)
	normSumsGo(x, c, 0, s, q)
	y := make([]float32, c*rows)
	normActGo(x, y, c, 0, mean, scale, shift, fac)
	sg, sgx := make([]float64, c), make([]float64, c)
	normActGradSumsGo(x, dy, c, 0, mean, scale, shift, fac, sg, sgx)
	dx := make([]float32, c*rows)
	normActGradGo(x, dy, dx, c, 0, mean, scale, shift, A, B, C, fac)
	for j := 0; j < c; j++ {
		var ws, wq, wsg, wsgx float64
		for r := 0; r < rows; r++ {
			xv, g := x[r*c+j], dy[r*c+j]
			z := (xv-mean[j])*scale[j] + shift[j]
			if z < 0 {
				g *= slope
			}
			if got, want := y[r*c+j], act(z); got != want {
				t.Errorf("y[%d,%d] = %v, want %v", r, j, got, want)
			}
			if got, want := dx[r*c+j], A[j]*g+B[j]*(xv-mean[j])+C[j]; math.Abs(float64(got-want)) > 1e-6*math.Abs(float64(want))+1e-7 {
				t.Errorf("dx[%d,%d] = %v, want %v", r, j, got, want)
			}
			ws += float64(xv)
			wq += float64(xv) * float64(xv)
			wsg += float64(g)
			wsgx += float64(g) * float64(xv)
		}
		for _, p := range [][2]float64{{s[j], ws}, {q[j], wq}, {sg[j], wsg}, {sgx[j], wsgx}} {
			if math.Abs(p[0]-p[1]) > 1e-9*math.Abs(p[1])+1e-12 {
				t.Errorf("channel %d: sum %v, want %v", j, p[0], p[1])
			}
		}
	}
}
