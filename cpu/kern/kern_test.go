package kern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// tolRel bounds |fast − reference| per element, relative to Σ|terms| of that
// element (the reference run on absolute values). The reference sums in
// float64; the fast kernels sum in float32 with FMAs, in blocks of at most a
// few hundred terms, whose error is a few float32 ulps of Σ|terms|.
const tolRel = 2e-5

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func absSlice(s []float32) []float32 {
	if s == nil {
		return nil
	}
	a := make([]float32, len(s))
	for i, v := range s {
		a[i] = float32(math.Abs(float64(v)))
	}
	return a
}

// checkClose compares got with want element-wise against tolRel·bound.
func checkClose(t *testing.T, what string, got, want, bound []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tolRel*float64(bound[i])) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, reference %g (|diff| %g > %g·Σ|terms| = %g)", what, i, got[i], want[i], d, tolRel, tolRel*float64(bound[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements out of tolerance", what, bad, len(got))
	}
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// randGeom draws a small valid geometry: odd and even sizes, kernels 1–4,
// strides 1–3, padding 0–kernel, channel counts that are and are not
// multiples of 8 and 16.
func randGeom(r *rand.Rand) geom.Conv {
	chans := []int{1, 2, 3, 5, 8, 13, 16, 17, 24, 32, 35}
	for {
		g := geom.Conv{
			N:    1 + r.IntN(2),
			InD:  1 + r.IntN(9),
			InH:  1 + r.IntN(9),
			InW:  1 + r.IntN(11),
			InC:  chans[r.IntN(len(chans))],
			OutC: chans[r.IntN(len(chans))],
			KD:   1 + r.IntN(4), KH: 1 + r.IntN(4), KW: 1 + r.IntN(4),
			SD: 1 + r.IntN(3), SH: 1 + r.IntN(3), SW: 1 + r.IntN(3),
			PD: r.IntN(3), PH: r.IntN(3), PW: r.IntN(3),
		}
		if g.Validate() == nil && g.PD <= g.KD && g.PH <= g.KH && g.PW <= g.KW {
			return g
		}
	}
}

// fixedGeoms are the shapes of the U-Net's layers, scaled down.
func fixedGeoms() []geom.Conv {
	c3 := func(n, s, ci, co, st int) geom.Conv {
		return geom.Conv{N: n, InD: s, InH: s, InW: s, InC: ci, OutC: co, KD: 3, KH: 3, KW: 3, SD: st, SH: st, SW: st, PD: 1, PH: 1, PW: 1}
	}
	up := func(n, s, ci, co int) geom.Conv { // the conv whose backward-data is ConvTranspose3d(2, 2)
		return geom.Conv{N: n, InD: 2 * s, InH: 2 * s, InW: 2 * s, InC: ci, OutC: co, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}
	}
	return []geom.Conv{
		c3(2, 10, 1, 16, 1),  // first layer, K = 27
		c3(1, 9, 16, 16, 1),  // odd size
		c3(2, 10, 16, 32, 2), // stride-2 down
		c3(1, 7, 32, 32, 1),
		c3(1, 5, 64, 48, 2),
		up(1, 4, 16, 32),
		up(2, 3, 32, 64),
		{N: 2, InD: 6, InH: 6, InW: 6, InC: 16, OutC: 2, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}, // head
		c3(2, 18, 4, 8, 1), // 11664 voxels: the weight gradient is reduced in several units
		{N: 1, InD: 5, InH: 6, InW: 7, InC: 48, OutC: 80, KD: 3, KH: 3, KW: 3, SD: 2, SH: 1, SW: 2, PD: 1, PH: 1, PW: 0},
		{N: 2, InD: 4, InH: 4, InW: 4, InC: 40, OutC: 24, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}, // convT, odd channels
	}
}

type convData struct {
	g                 geom.Conv
	x, w, b, dy       []float32
	y, dx, dw, db     []float32 // reference results
	yB, dxB, dwB, dbB []float32 // Σ|terms| bounds
}

func newConvData(r *rand.Rand, g geom.Conv) *convData {
	d := &convData{g: g,
		x: randSlice(r, g.InLen()), w: randSlice(r, g.WeightLen()),
		b: randSlice(r, g.OutC), dy: randSlice(r, g.OutLen()),
	}
	d.y, d.yB = make([]float32, g.OutLen()), make([]float32, g.OutLen())
	Conv3DForwardRef(g, d.x, d.w, d.b, d.y)
	Conv3DForwardRef(g, absSlice(d.x), absSlice(d.w), absSlice(d.b), d.yB)
	d.dx, d.dxB = make([]float32, g.InLen()), make([]float32, g.InLen())
	Conv3DBackwardDataRef(g, d.dy, d.w, d.dx)
	Conv3DBackwardDataRef(g, absSlice(d.dy), absSlice(d.w), d.dxB)
	d.dw, d.dwB = make([]float32, g.WeightLen()), make([]float32, g.WeightLen())
	d.db, d.dbB = make([]float32, g.OutC), make([]float32, g.OutC)
	Conv3DBackwardWeightRef(g, d.x, d.dy, d.dw, d.db)
	Conv3DBackwardWeightRef(g, absSlice(d.x), absSlice(d.dy), d.dwB, d.dbB)
	return d
}

// fill sets s to NaN so that an element the kernel forgets to write fails.
func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// checkEngine runs all three ops of e on d against the references.
func checkEngine(t *testing.T, e *Engine, d *convData) {
	t.Helper()
	g := d.g
	y := nanSlice(g.OutLen())
	e.Conv3DForward(g, d.x, d.w, d.b, y)
	checkClose(t, "forward y", y, d.y, d.yB)
	y = nanSlice(g.OutLen())
	e.Conv3DForward(g, d.x, d.w, nil, y)
	yNoBias := make([]float32, g.OutLen())
	Conv3DForwardRef(g, d.x, d.w, nil, yNoBias)
	checkClose(t, "forward y (no bias)", y, yNoBias, d.yB)
	dx := nanSlice(g.InLen())
	e.Conv3DBackwardData(g, d.dy, d.w, dx)
	checkClose(t, "backward-data dx", dx, d.dx, d.dxB)
	dw, db := nanSlice(g.WeightLen()), nanSlice(g.OutC)
	e.Conv3DBackwardWeight(g, d.x, d.dy, dw, db)
	checkClose(t, "backward-weight dw", dw, d.dw, d.dwB)
	checkClose(t, "backward-weight db", db, d.db, d.dbB)
	dw = nanSlice(g.WeightLen())
	e.Conv3DBackwardWeight(g, d.x, d.dy, dw, nil)
	checkClose(t, "backward-weight dw (no dbias)", dw, d.dw, d.dwB)
}

func engines() []struct {
	name string
	e    *Engine
} {
	out := []struct {
		name string
		e    *Engine
	}{{"generic", &Engine{Threads: 3, generic: true}}}
	if haveAsm {
		out = append(out, struct {
			name string
			e    *Engine
		}{"asm", &Engine{Threads: 3}})
	}
	return out
}

func TestConvFixedGeoms(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	multiUnit := false
	for _, g := range fixedGeoms() {
		multiUnit = multiUnit || reductionUnits(g.N*g.OutD(), g.OutLen()/g.OutC, g.WeightLen()) > 1
		d := newConvData(r, g)
		for _, en := range engines() {
			t.Run(fmt.Sprintf("%s/%+v", en.name, g), func(t *testing.T) { checkEngine(t, en.e, d) })
		}
	}
	if !multiUnit {
		t.Error("no fixed geometry splits the weight-gradient reduction into several units")
	}
}

func TestConvRandomGeoms(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 120
	if testutil.Race || testing.Short() {
		n = 12
	}
	for i := 0; i < n; i++ {
		g := randGeom(r)
		d := newConvData(r, g)
		for _, en := range engines() {
			t.Run(fmt.Sprintf("%d/%s/%+v", i, en.name, g), func(t *testing.T) { checkEngine(t, en.e, d) })
		}
	}
}

// TestConvDeterminism: bit-identical results for Threads 1, 2, 3, 8, on
// geometries large enough to split the weight-gradient reduction into
// several units (so the unit split and the item split are both exercised).
func TestConvDeterminism(t *testing.T) {
	geoms := []geom.Conv{
		{N: 2, InD: 12, InH: 20, InW: 20, InC: 16, OutC: 16, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1},
		{N: 1, InD: 16, InH: 15, InW: 17, InC: 5, OutC: 19, KD: 3, KH: 2, KW: 3, SD: 2, SH: 1, SW: 2, PD: 1, PH: 0, PW: 1},
	}
	if testutil.Race {
		geoms[0].InD, geoms[0].InH, geoms[0].InW = 8, 12, 12
	}
	r := rand.New(rand.NewPCG(5, 6))
	for gi, g := range geoms {
		x, w, b, dy := randSlice(r, g.InLen()), randSlice(r, g.WeightLen()), randSlice(r, g.OutC), randSlice(r, g.OutLen())
		for _, en := range engines() {
			var y0, dx0, dw0, db0 []float32
			for _, th := range []int{1, 2, 3, 8} {
				e := &Engine{Threads: th, generic: en.e.generic}
				y, dx, dw, db := make([]float32, g.OutLen()), make([]float32, g.InLen()), make([]float32, g.WeightLen()), make([]float32, g.OutC)
				e.Conv3DForward(g, x, w, b, y)
				e.Conv3DBackwardData(g, dy, w, dx)
				e.Conv3DBackwardWeight(g, x, dy, dw, db)
				if y0 == nil {
					y0, dx0, dw0, db0 = y, dx, dw, db
					if u := reductionUnits(g.N*g.OutD(), g.OutVoxels(), g.WeightLen()); gi == 0 && u < 2 && !testutil.Race {
						t.Fatalf("geometry %+v has %d reduction unit(s); the test wants several", g, u)
					}
					continue
				}
				for _, c := range []struct {
					name      string
					got, want []float32
				}{{"y", y, y0}, {"dx", dx, dx0}, {"dw", dw, dw0}, {"db", db, db0}} {
					if i := sameBits(c.got, c.want); i >= 0 {
						t.Errorf("%s: %s with Threads=%d differs from Threads=1 at %d: %g vs %g", en.name, c.name, th, i, c.got[i], c.want[i])
					}
				}
			}
		}
	}
}

// TestEngineConcurrent uses one Engine from several goroutines at once (run
// it under -race) and checks every result against a sequential run.
func TestEngineConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var ds []*convData
	for i := 0; i < 6; i++ {
		ds = append(ds, newConvData(r, randGeom(r)))
	}
	for _, en := range engines() {
		e := &Engine{Threads: 2, generic: en.e.generic}
		want := make([][]float32, len(ds))
		for i, d := range ds {
			want[i] = make([]float32, d.g.WeightLen())
			e.Conv3DBackwardWeight(d.g, d.x, d.dy, want[i], nil)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4*len(ds))
		wg.Add(1)
		go func() { // dropping the pool mid-flight must not disturb running calls
			defer wg.Done()
			e.ReleaseScratch()
		}()
		for rep := 0; rep < 4; rep++ {
			for i, d := range ds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					y, dx, dw := make([]float32, d.g.OutLen()), make([]float32, d.g.InLen()), make([]float32, d.g.WeightLen())
					e.Conv3DForward(d.g, d.x, d.w, d.b, y)
					e.Conv3DBackwardData(d.g, d.dy, d.w, dx)
					e.Conv3DBackwardWeight(d.g, d.x, d.dy, dw, nil)
					if j := sameBits(dw, want[i]); j >= 0 {
						errs <- fmt.Sprintf("%s: concurrent dw of geometry %d differs at %d", en.name, i, j)
					}
					if j := sameBits(y, ds[i].y); j >= 0 && math.Abs(float64(y[j]-ds[i].y[j])) > tolRel*float64(ds[i].yB[j]) {
						errs <- fmt.Sprintf("%s: concurrent y of geometry %d wrong at %d", en.name, i, j)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for s := range errs {
			t.Error(s)
		}
	}
}

// TestGenericForced checks that the generic flag really selects the portable
// kernel: its FMA-free sums differ in the last bits from the AVX2 kernel's on
// a long reduction, and both stay within tolerance of the reference.
func TestGenericForced(t *testing.T) {
	if !haveAsm {
		t.Skip("no assembly kernel on this machine")
	}
	r := rand.New(rand.NewPCG(9, 10))
	g := geom.Conv{N: 1, InD: 6, InH: 6, InW: 6, InC: 32, OutC: 16, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	d := newConvData(r, g)
	ya, yg := make([]float32, g.OutLen()), make([]float32, g.OutLen())
	(&Engine{}).Conv3DForward(g, d.x, d.w, nil, ya)
	(&Engine{generic: true}).Conv3DForward(g, d.x, d.w, nil, yg)
	if sameBits(ya, yg) < 0 {
		t.Fatal("the generic and the AVX2 kernels gave bit-identical sums over 864 terms: the generic path was probably not taken")
	}
}

func TestUkArgsLayout(t *testing.T) {
	var p ukArgs
	want := map[string][2]uintptr{
		"a": {unsafe.Offsetof(p.a), 0}, "aoff": {unsafe.Offsetof(p.aoff), 24}, "taps": {unsafe.Offsetof(p.taps), 48},
		"run": {unsafe.Offsetof(p.run), 72}, "astr": {unsafe.Offsetof(p.astr), 80}, "b": {unsafe.Offsetof(p.b), 88},
		"boff": {unsafe.Offsetof(p.boff), 112}, "bstr": {unsafe.Offsetof(p.bstr), 120}, "c": {unsafe.Offsetof(p.c), 128},
		"coff": {unsafe.Offsetof(p.coff), 152}, "mlast": {unsafe.Offsetof(p.mlast), 176}, "mode": {unsafe.Offsetof(p.mode), 184},
		"bias": {unsafe.Offsetof(p.bias), 192},
	}
	for name, o := range want {
		if o[0] != o[1] {
			t.Errorf("ukArgs.%s at offset %d, the assembly reads %d", name, o[0], o[1])
		}
	}
}

func TestSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 60
	if testutil.Race || testing.Short() {
		n = 10
	}
	for i := 0; i < n; i++ {
		m, nn, k := 1+r.IntN(40), 1+r.IntN(40), r.IntN(70)
		if i%4 == 3 {
			k = 300 + r.IntN(500) // several k blocks
		}
		ta, tb := r.IntN(2) == 1, r.IntN(2) == 1
		alphas := []float32{1, 1, -0.5, 0, 2}
		betas := []float32{0, 1, 0.5, 0, -1}
		alpha, beta := alphas[r.IntN(len(alphas))], betas[r.IntN(len(betas))]
		ar, ac := m, k
		if ta {
			ar, ac = k, m
		}
		br, bc := k, nn
		if tb {
			br, bc = nn, k
		}
		lda, ldb, ldc := ac+r.IntN(3), bc+r.IntN(3), nn+r.IntN(3)
		a, b := randSlice(r, max(1, ar)*lda), randSlice(r, max(1, br)*ldb)
		c0 := randSlice(r, m*ldc)
		want, bound := append([]float32(nil), c0...), make([]float32, m*ldc)
		SgemmRef(ta, tb, m, nn, k, alpha, a, lda, b, ldb, beta, want, ldc)
		absC := absSlice(c0)
		copy(bound, absC)
		SgemmRef(ta, tb, m, nn, k, float32(math.Abs(float64(alpha))), absSlice(a), lda, absSlice(b), ldb, float32(math.Abs(float64(beta))), bound, ldc)
		for j := range bound {
			bound[j] += 1e-30
		}
		for _, en := range engines() {
			got := append([]float32(nil), c0...)
			if beta == 0 {
				for j := range got { // beta = 0: C must not be read
					if j%ldc < nn {
						got[j] = float32(math.NaN())
					}
				}
			}
			en.e.Sgemm(ta, tb, m, nn, k, alpha, a, lda, b, ldb, beta, got, ldc)
			checkClose(t, fmt.Sprintf("%s sgemm %v %v m=%d n=%d k=%d α=%g β=%g", en.name, ta, tb, m, nn, k, alpha, beta), got, want, bound)
		}
	}
}

func TestBadArgsPanic(t *testing.T) {
	g := geom.Conv{N: 1, InD: 4, InH: 4, InW: 4, InC: 2, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	var e Engine
	x, w, y := make([]float32, g.InLen()), make([]float32, g.WeightLen()), make([]float32, g.OutLen())
	mustPanic("short y", func() { e.Conv3DForward(g, x, w, nil, y[:len(y)-1]) })
	mustPanic("short bias", func() { e.Conv3DForward(g, x, w, make([]float32, 2), y) })
	mustPanic("short dx", func() { e.Conv3DBackwardData(g, y, w, x[:1]) })
	mustPanic("short dw", func() { e.Conv3DBackwardWeight(g, x, y, w[:5], nil) })
	bad := g
	bad.KD = 9
	mustPanic("bad geometry", func() { e.Conv3DForward(bad, x, w, nil, y) })
	mustPanic("short sgemm C", func() { e.Sgemm(false, false, 4, 4, 4, 1, x, 4, x, 4, 0, make([]float32, 15), 4) })
}
