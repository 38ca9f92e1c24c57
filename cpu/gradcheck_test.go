package cpu

import (
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// Finite-difference gradient checks (testutil.GradCheck): for an op
// y = f(x, …) and a fixed random projection r, L = Σ r·y; the op's
// backward applied to r must match L's central differences.

func TestConvGradients(t *testing.T) {
	geoms := []geom.Conv{
		{N: 2, InD: 5, InH: 6, InW: 7, InC: 3, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1},
		{N: 1, InD: 6, InH: 7, InW: 8, InC: 2, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1},
		{N: 2, InD: 4, InH: 6, InW: 6, InC: 3, OutC: 2, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PD: 0, PH: 1, PW: 1},
		{N: 1, InD: 4, InH: 4, InW: 6, InC: 2, OutC: 3, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2},
		{N: 2, InD: 3, InH: 4, InW: 5, InC: 4, OutC: 2, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1},
		{N: 1, InD: 5, InH: 5, InW: 5, InC: 2, OutC: 2, KD: 5, KH: 3, KW: 1, SD: 1, SH: 2, SW: 1, PD: 2, PH: 0, PW: 0},
	}
	check := testutil.GradCheck{Eps: 1e-2, Tol: 1e-3, Samples: 40}
	for gi, g := range geoms {
		// The fast kernels are held to the references by kern's tests;
		// here the references' float64 accumulation keeps the finite
		// differences clean.
		d := New(Options{Threads: 2, ReferenceConv: true})
		rng := newRNG(uint64(gi))
		x := tensorOf(d, g.InShape(), randn(rng, g.InLen(), 1, 0))
		w := tensorOf(d, g.WeightShape(), randn(rng, g.WeightLen(), 0.3, 0))
		b := tensorOf(d, nn.Shape{g.OutC}, randn(rng, g.OutC, 1, 0))
		r := tensorOf(d, g.OutShape(), randn(rng, g.OutLen(), 1, 0))
		y := d.Alloc(g.OutShape()).(*Tensor)
		loss := func() float64 { d.Conv3DForward(g, x, w, b, y); return testutil.Dot64(y.data, r.data) }
		dx := d.Alloc(g.InShape()).(*Tensor)
		dw := d.Alloc(g.WeightShape()).(*Tensor)
		db := d.Alloc(nn.Shape{g.OutC}).(*Tensor)
		d.Conv3DBackwardData(g, r, w, dx)
		d.Conv3DBackwardWeight(g, x, r, dw, db)
		check.Check(t, "conv dx", x.data, dx.data, loss)
		check.Check(t, "conv dw", w.data, dw.data, loss)
		check.Check(t, "conv db", b.data, db.data, loss)

		// The transposed conv whose adjoint is g: input g.OutShape(), output g.InShape().
		xt := tensorOf(d, g.OutShape(), randn(rng, g.OutLen(), 1, 0))
		bt := tensorOf(d, nn.Shape{g.InC}, randn(rng, g.InC, 1, 0))
		rt := tensorOf(d, g.InShape(), randn(rng, g.InLen(), 1, 0))
		yt := d.Alloc(g.InShape()).(*Tensor)
		lossT := func() float64 { nn.ConvTransposeForward(d, g, xt, w, bt, yt); return testutil.Dot64(yt.data, rt.data) }
		dxt := d.Alloc(g.OutShape()).(*Tensor)
		dbt := d.Alloc(nn.Shape{g.InC}).(*Tensor)
		nn.ConvTransposeBackward(d, g, xt, rt, w, dxt, dw, dbt)
		check.Check(t, "convT dx", xt.data, dxt.data, lossT)
		check.Check(t, "convT dw", w.data, dw.data, lossT)
		check.Check(t, "convT db", bt.data, dbt.data, lossT)
	}
}

func TestInstanceNormActGradients(t *testing.T) {
	check := testutil.GradCheck{Eps: 1e-3, Tol: 1e-2, Samples: 60}
	for _, slope := range []float32{0.01, 0, 1} {
		d := New(Options{Threads: 2})
		rng := newRNG(21)
		s := nn.Shape{2, 3, 4, 5, 3}
		n, c := s[0], s[4]
		x := tensorOf(d, s, randn(rng, s.Len(), 2, 1))
		gamma := tensorOf(d, nn.Shape{c}, randn(rng, c, 0.5, 1))
		beta := tensorOf(d, nn.Shape{c}, randn(rng, c, 0.5, 0))
		r := tensorOf(d, s, randn(rng, s.Len(), 1, 0))
		y := d.Alloc(s).(*Tensor)
		st := d.Alloc(nn.Shape{n, c, 2})
		loss := func() float64 {
			d.InstanceNormActForward(x, gamma, beta, y, st, 1e-5, slope)
			return testutil.Dot64(y.data, r.data)
		}
		loss()
		dx, dg, db := d.Alloc(s).(*Tensor), d.Alloc(nn.Shape{c}).(*Tensor), d.Alloc(nn.Shape{c}).(*Tensor)
		d.InstanceNormActBackward(x, gamma, beta, st, r, dx, dg, db, slope)
		check.Check(t, "norm dx", x.data, dx.data, loss)
		check.Check(t, "norm dgamma", gamma.data, dg.data, loss)
		check.Check(t, "norm dbeta", beta.data, db.data, loss)

		y2 := d.Alloc(s).(*Tensor)
		lossA := func() float64 { d.ActForward(x, y2, slope); return testutil.Dot64(y2.data, r.data) }
		lossA()
		dxa := d.Alloc(s).(*Tensor)
		d.ActBackward(y2, r, dxa, slope)
		check.Check(t, "act dx", x.data, dxa.data, lossA)
	}
}

func TestSoftmaxLossGradient(t *testing.T) {
	d := New(Options{Threads: 2})
	rng := newRNG(31)
	s := nn.Shape{2, 3, 4, 5, 3}
	n, c := s[0], s[4]
	z := tensorOf(d, s, randn(rng, s.Len(), 2, 0))
	lab := labelsOf(d, rng, nn.Shape{n, 3, 4, 5}, c)
	ce := randn(rng, n, 1, 0)
	al := randn(rng, n*c, 1, 0)
	be := randn(rng, n*c, 1, 0)
	ex := tensorOf(d, s, randn(rng, s.Len(), 1, 0))
	p := d.Alloc(s).(*Tensor)
	// L = Σ ceScale·CE + Σ alpha·Intersect + beta·PredSum + Σ extra·p.
	loss := func() float64 {
		st, err := d.SoftmaxLoss(z, lab, p)
		if err != nil {
			t.Fatal(err)
		}
		l := testutil.Dot64(ex.data, p.data)
		for b := 0; b < n; b++ {
			l += float64(ce[b]) * st.CE[b]
			for j := 0; j < c; j++ {
				l += float64(al[b*c+j])*st.Intersect[b*c+j] + float64(be[b*c+j])*st.PredSum[b*c+j]
			}
		}
		return l
	}
	loss()
	dz := d.Alloc(s).(*Tensor)
	d.SoftmaxLossBackward(p, lab, ce, al, be, ex, dz)
	testutil.GradCheck{Eps: 1e-3, Tol: 1e-2, Samples: 80}.Check(t, "softmax loss dlogits", z.data, dz.data, loss)
}

func TestSigmoidBCEGradient(t *testing.T) {
	d := New(Options{Threads: 2})
	rng := newRNG(41)
	s := nn.Shape{2, 3, 4, 5, 1}
	z := tensorOf(d, s, randn(rng, s.Len(), 2, 0))
	lab := labelsOf(d, rng, nn.Shape{2, 3, 4, 5}, 2)
	dz := d.Alloc(s).(*Tensor)
	loss := func() float64 {
		sums, err := d.SigmoidBCE(z, lab, 2.5, 0.5, dz)
		if err != nil {
			t.Fatal(err)
		}
		return 0.5 * (sums[0] + sums[1])
	}
	loss()
	g := append([]float32(nil), dz.data...)
	testutil.GradCheck{Eps: 1e-3, Tol: 1e-2, Samples: 80}.Check(t, "bce dlogits", z.data, g, loss)
}

func TestSoftSkeletonGradient(t *testing.T) {
	for _, iters := range []int{0, 1, 3} {
		d := New(Options{Threads: 2})
		rng := newRNG(51)
		s := nn.Shape{2, 5, 6, 7, 2}
		xs := make([]float32, s.Len())
		for i := range xs {
			xs[i] = rng.Float32()
		}
		x := tensorOf(d, s, xs)
		r := tensorOf(d, s, randn(rng, s.Len(), 1, 0))
		sk := d.Alloc(s).(*Tensor)
		loss := func() float64 { d.SoftSkeleton(x, sk, iters, 1); return testutil.Dot64(sk.data, r.data) }
		loss()
		for i := 0; i < s.Len(); i += 2 {
			if sk.data[i] != 0 {
				t.Fatal("channel 0 (below fromC) is not zero")
			}
		}
		dx := d.Alloc(s).(*Tensor)
		d.SoftSkeletonBackward(x, r, dx, iters, 1)
		// Piecewise linear: a small step rarely crosses a switch of the
		// pooling's argmax, and the uniform random values have no ties.
		testutil.GradCheck{Eps: 1e-4, Tol: 1e-2, Samples: 200}.Check(t, "soft skeleton dx", x.data, dx.data, loss)
	}
}
