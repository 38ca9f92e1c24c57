package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// randn returns n normal values times scale plus offset.
func randn(rng *rand.Rand, n int, scale, offset float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*scale + offset)
	}
	return x
}

// tensorOf returns a device tensor holding a copy of data.
func tensorOf(d *Device, shape nn.Shape, data []float32) *Tensor {
	t := d.Alloc(shape).(*Tensor)
	copy(t.data, data)
	return t
}

// labelsOf returns random class labels (N, D, H, W) as float32.
func labelsOf(d *Device, rng *rand.Rand, shape nn.Shape, classes int) *Tensor {
	l := make([]float32, shape.Len())
	for i := range l {
		l[i] = float32(rng.IntN(classes))
	}
	return tensorOf(d, shape, l)
}

// maxRel returns max|a−b| / max(max|b|, floor).
func maxRel(a, b []float32, floor float64) float64 {
	var num, den float64
	for i := range a {
		num = max(num, math.Abs(float64(a[i])-float64(b[i])))
		den = max(den, math.Abs(float64(b[i])))
	}
	return num / max(den, floor)
}

func f32s(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// The sizes below make a sample span two reduction chunks (v > 4096).
var normShape = nn.Shape{2, 9, 17, 31, 5}

func TestInstanceNormActMatchesRef(t *testing.T) {
	for _, slope := range []float32{0.01, 0, 1} {
		d := New(Options{Threads: 3})
		rng := newRNG(1)
		s := normShape
		n, v, c := s[0], s[1]*s[2]*s[3], s[4]
		xs := randn(rng, s.Len(), 3, 2)
		gs := randn(rng, c, 0.5, 1)
		bs := randn(rng, c, 0.5, 0)
		dys := randn(rng, s.Len(), 1, 0)
		x, gamma, beta := tensorOf(d, s, xs), tensorOf(d, nn.Shape{c}, gs), tensorOf(d, nn.Shape{c}, bs)
		y := d.Alloc(s).(*Tensor)
		stats := d.Alloc(nn.Shape{n, c, 2}).(*Tensor)
		d.InstanceNormActForward(x, gamma, beta, y, stats, 1e-5, slope)
		wy, wst := refInstanceNormAct(xs, gs, bs, n, v, c, 1e-5, slope)
		if e := maxRel(y.data, wy, 1); e > 1e-5 {
			t.Errorf("slope %v: forward error %.2e", slope, e)
		}
		if e := maxRel(stats.data, wst, 1); e > 1e-6 {
			t.Errorf("slope %v: stats error %.2e", slope, e)
		}
		dy := tensorOf(d, s, dys)
		dx := d.Alloc(s).(*Tensor)
		dg, db := d.Alloc(nn.Shape{c}).(*Tensor), d.Alloc(nn.Shape{c}).(*Tensor)
		d.InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dg, db, slope)
		wdx, wdg, wdb := refInstanceNormActBackward(xs, gs, bs, dys, n, v, c, 1e-5, slope)
		if e := maxRel(dx.data, wdx, 1e-3); e > 1e-4 {
			t.Errorf("slope %v: dx error %.2e", slope, e)
		}
		if e := maxRel(dg.data, wdg, 1); e > 1e-5 {
			t.Errorf("slope %v: dgamma error %.2e", slope, e)
		}
		if e := maxRel(db.data, wdb, 1); e > 1e-5 {
			t.Errorf("slope %v: dbeta error %.2e", slope, e)
		}
		// dx may alias dy.
		d.InstanceNormActBackward(x, gamma, beta, stats, dy, dy, dg, db, slope)
		if e := maxRel(dy.data, dx.data, 1e-30); e != 0 {
			t.Errorf("slope %v: in-place backward differs (%.2e)", slope, e)
		}
	}
}

func TestSoftmaxLossMatchesRef(t *testing.T) {
	d := New(Options{Threads: 3})
	rng := newRNG(2)
	s := nn.Shape{2, 9, 17, 31, 3}
	n, v, c := s[0], s[1]*s[2]*s[3], s[4]
	zs := randn(rng, s.Len(), 3, 0)
	z := tensorOf(d, s, zs)
	lab := labelsOf(d, rng, nn.Shape{n, s[1], s[2], s[3]}, c)
	p := d.Alloc(s).(*Tensor)
	st, err := d.SoftmaxLoss(z, lab, p)
	if err != nil {
		t.Fatal(err)
	}
	wp, wst := refSoftmaxLoss(zs, lab.data, n, v, c)
	if e := maxRel(p.data, wp, 1); e > 1e-6 {
		t.Errorf("probs error %.2e", e)
	}
	p2 := d.Alloc(s).(*Tensor)
	d.Softmax(z, p2)
	if e := maxRel(p2.data, p.data, 1e-30); e != 0 {
		t.Errorf("Softmax differs from SoftmaxLoss's probabilities (%.2e)", e)
	}
	for name, pair := range map[string][2][]float64{"CE": {st.CE, wst.CE}, "Intersect": {st.Intersect, wst.Intersect},
		"PredSum": {st.PredSum, wst.PredSum}, "TargetSum": {st.TargetSum, wst.TargetSum}} {
		if e := maxRel(f32s(pair[0]), f32s(pair[1]), 1); e > 1e-6 {
			t.Errorf("%s error %.2e", name, e)
		}
	}
	ce := randn(rng, n, 1, 0)
	al := randn(rng, n*c, 1, 0)
	be := randn(rng, n*c, 1, 0)
	exs := randn(rng, s.Len(), 1, 0)
	for _, withExtra := range []bool{false, true} {
		var extra nn.Tensor
		var ex []float32
		if withExtra {
			extra, ex = tensorOf(d, s, exs), exs
		}
		dz := d.Alloc(s).(*Tensor)
		d.SoftmaxLossBackward(p, lab, ce, al, be, extra, dz)
		want := refSoftmaxLossBackward(p.data, lab.data, n, v, c, ce, al, be, ex)
		if e := maxRel(dz.data, want, 1e-3); e > 1e-5 {
			t.Errorf("backward (extra %v) error %.2e", withExtra, e)
		}
	}
}

func TestLabelErrors(t *testing.T) {
	d := New(Options{})
	s := nn.Shape{1, 2, 2, 2, 3}
	z := d.Alloc(s)
	lab := tensorOf(d, nn.Shape{1, 2, 2, 2}, []float32{0, 1, 2, 0, 3, 0, 0, 0})
	if _, err := d.SoftmaxLoss(z, lab, d.Alloc(s)); err == nil {
		t.Error("SoftmaxLoss accepted label 3 with 3 classes")
	}
	if err := d.OneHot(lab, d.Alloc(s)); err == nil {
		t.Error("OneHot accepted label 3 with 3 classes")
	}
	lab.data[4] = 0.5
	if _, _, _, err := d.SegCounts(z, lab); err == nil {
		t.Error("SegCounts accepted label 0.5")
	}
	b := d.Alloc(nn.Shape{1, 2, 2, 2, 1})
	lab.data[4] = 2
	if _, err := d.SigmoidBCE(b, lab, 1, 1, d.Alloc(b.Shape())); err == nil {
		t.Error("SigmoidBCE accepted label 2")
	}
}

func TestLayoutAndChannelOps(t *testing.T) {
	d := New(Options{Threads: 2})
	rng := newRNG(3)
	s := nn.Shape{2, 3, 4, 5, 6} // NCDHW
	xs := randn(rng, s.Len(), 1, 0)
	x := tensorOf(d, s, xs)
	cl := d.Alloc(nn.Shape{2, 4, 5, 6, 3}).(*Tensor)
	d.NCDHWToNDHWC(x, cl)
	for b := 0; b < 2; b++ {
		for c := 0; c < 3; c++ {
			for v := 0; v < 120; v++ {
				if cl.data[(b*120+v)*3+c] != xs[(b*3+c)*120+v] {
					t.Fatalf("NCDHWToNDHWC wrong at n=%d c=%d v=%d", b, c, v)
				}
			}
		}
	}
	back := d.Alloc(s).(*Tensor)
	d.NDHWCToNCDHW(cl, back)
	if maxRel(back.data, xs, 1) != 0 {
		t.Error("NDHWCToNCDHW is not the inverse of NCDHWToNDHWC")
	}

	a := tensorOf(d, nn.Shape{2, 4, 5, 6, 2}, randn(rng, 480, 1, 0))
	b := tensorOf(d, nn.Shape{2, 4, 5, 6, 3}, randn(rng, 720, 1, 0))
	cat := d.Alloc(nn.Shape{2, 4, 5, 6, 5}).(*Tensor)
	d.ConcatChannels(a, b, cat)
	for v := 0; v < 240; v++ {
		for j := 0; j < 5; j++ {
			want := float32(0)
			if j < 2 {
				want = a.data[v*2+j]
			} else {
				want = b.data[v*3+j-2]
			}
			if cat.data[v*5+j] != want {
				t.Fatalf("ConcatChannels wrong at voxel %d channel %d", v, j)
			}
		}
	}
	a2, b2 := d.Alloc(a.shape).(*Tensor), d.Alloc(b.shape).(*Tensor)
	d.SplitChannels(cat, a2, b2)
	if maxRel(a2.data, a.data, 1) != 0 || maxRel(b2.data, b.data, 1) != 0 {
		t.Error("SplitChannels does not undo ConcatChannels")
	}

	// AddChannelBias and ChannelSum are adjoint: <x + 1·bias, y> − <x, y> = <bias, Σ y>.
	bias := tensorOf(d, nn.Shape{3}, []float32{1, -2, 0.5})
	y := tensorOf(d, b.shape, randn(rng, 720, 1, 0))
	sum := d.Alloc(nn.Shape{3}).(*Tensor)
	d.ChannelSum(y, sum)
	for j := 0; j < 3; j++ {
		var want float64
		for v := 0; v < 240; v++ {
			want += float64(y.data[v*3+j])
		}
		if math.Abs(float64(sum.data[j])-want) > 1e-5 {
			t.Errorf("ChannelSum[%d] = %v, want %v", j, sum.data[j], want)
		}
	}
	bb := tensorOf(d, b.shape, b.data)
	d.AddChannelBias(bb, bias)
	for v := 0; v < 240; v++ {
		for j := 0; j < 3; j++ {
			if bb.data[v*3+j] != b.data[v*3+j]+bias.data[j] {
				t.Fatal("AddChannelBias wrong")
			}
		}
	}

	// ChannelDot and ChannelAffineAdd.
	dots := d.ChannelDot(a, a2)
	for bi := 0; bi < 2; bi++ {
		for j := 0; j < 2; j++ {
			var want float64
			for v := 0; v < 120; v++ {
				x := float64(a.data[(bi*120+v)*2+j])
				want += x * x
			}
			if math.Abs(dots[bi*2+j]-want) > 1e-9*max(1, want) {
				t.Errorf("ChannelDot[%d,%d] = %v, want %v", bi, j, dots[bi*2+j], want)
			}
		}
	}
	dst := tensorOf(d, a.shape, a.data)
	d.ChannelAffineAdd(dst, a, []float32{1, 2, 3, 4}, []float32{10, 20, 30, 40})
	for bi := 0; bi < 2; bi++ {
		for v := 0; v < 120; v++ {
			for j := 0; j < 2; j++ {
				k := (bi*120+v)*2 + j
				want := a.data[k] + float32(1+bi*2+j)*a.data[k] + float32(10*(1+bi*2+j))
				if math.Abs(float64(dst.data[k]-want)) > 1e-5 {
					t.Fatalf("ChannelAffineAdd wrong at %d: %v want %v", k, dst.data[k], want)
				}
			}
		}
	}
}

func TestDownsampleLabels(t *testing.T) {
	d := New(Options{})
	src := d.Alloc(nn.Shape{1, 4, 6, 8}).(*Tensor)
	for i := range src.data {
		src.data[i] = float32(i)
	}
	dst := d.Alloc(nn.Shape{1, 2, 3, 4}).(*Tensor)
	d.DownsampleLabels(src, dst)
	// nearest-exact for factor 2 picks index 2·o + 1 on every axis.
	for a := 0; a < 2; a++ {
		for b := 0; b < 3; b++ {
			for c := 0; c < 4; c++ {
				want := float32(((2*a+1)*6+2*b+1)*8 + 2*c + 1)
				if got := dst.data[(a*3+b)*4+c]; got != want {
					t.Fatalf("(%d,%d,%d): %v, want %v", a, b, c, got, want)
				}
			}
		}
	}
}

func TestSegCounts(t *testing.T) {
	d := New(Options{})
	// 4 voxels, 3 classes; predictions 0, 1, 2, 1 against labels 0, 1, 1, 2.
	z := tensorOf(d, nn.Shape{1, 1, 1, 4, 3}, []float32{5, 0, 0, 0, 5, 0, 0, 0, 5, 1, 2, 1.5})
	lab := tensorOf(d, nn.Shape{1, 1, 1, 4}, []float32{0, 1, 1, 2})
	tp, fp, fn, err := d.SegCounts(z, lab)
	if err != nil {
		t.Fatal(err)
	}
	want := [3][]int64{{1, 1, 0}, {0, 1, 1}, {0, 1, 1}}
	for i, got := range [3][]int64{tp, fp, fn} {
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("counts %v %v %v, want tp %v fp %v fn %v", tp, fp, fn, want[0], want[1], want[2])
			}
		}
	}
}

func TestOptimizersMatchFormula(t *testing.T) {
	d := New(Options{})
	rng := newRNG(4)
	n := 100
	w0, g0, b0 := randn(rng, n, 1, 0), randn(rng, n, 1, 0), randn(rng, n, 1, 0)
	s := nn.Shape{n}
	w, g, buf := tensorOf(d, s, w0), tensorOf(d, s, g0), tensorOf(d, s, b0)
	a := nn.SGDArgs{LR: 0.01, Momentum: 0.99, WeightDecay: 3e-5, Nesterov: true, GradScale: 0.5}
	d.SGDUpdate([]nn.Tensor{w}, []nn.Tensor{g}, []nn.Tensor{buf}, a)
	for i := 0; i < n; i++ {
		gi := 0.5*float64(g0[i]) + 3e-5*float64(w0[i])
		bi := 0.99*float64(b0[i]) + gi
		wi := float64(w0[i]) - 0.01*(gi+0.99*bi)
		if math.Abs(float64(buf.data[i])-bi) > 1e-6 || math.Abs(float64(w.data[i])-wi) > 1e-6 {
			t.Fatalf("SGD element %d: w %v buf %v, want %v %v", i, w.data[i], buf.data[i], wi, bi)
		}
	}
	w, m, v := tensorOf(d, s, w0), tensorOf(d, s, b0), tensorOf(d, s, make([]float32, n))
	for i := range v.data {
		v.data[i] = float32(math.Abs(float64(b0[i])))
	}
	v0 := append([]float32(nil), v.data...)
	aa := nn.AdamWArgs{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: 1}
	d.AdamWUpdate([]nn.Tensor{w}, []nn.Tensor{g}, []nn.Tensor{m}, []nn.Tensor{v}, aa)
	for i := 0; i < n; i++ {
		gi := float64(g0[i])
		mi := 0.9*float64(b0[i]) + 0.1*gi
		vi := 0.999*float64(v0[i]) + 0.001*gi*gi
		bc1, bc2 := 1-math.Pow(0.9, 3), 1-math.Pow(0.999, 3)
		wi := float64(w0[i])*(1-1e-5) - 1e-3/bc1*mi/(math.Sqrt(vi)/math.Sqrt(bc2)+1e-8)
		if math.Abs(float64(w.data[i])-wi) > 1e-6 {
			t.Fatalf("AdamW element %d: %v, want %v", i, w.data[i], wi)
		}
	}
	sq := d.SumSquares([]nn.Tensor{tensorOf(d, s, w0), tensorOf(d, nn.Shape{3}, []float32{1, 2, 3})})
	var want float64
	for _, x := range w0 {
		want += float64(x) * float64(x)
	}
	if math.Abs(sq[0]-want) > 1e-9*want || sq[1] != 14 {
		t.Errorf("SumSquares = %v, want [%v 14]", sq, want)
	}
}

// TestThreadCountIndependence: every op with a reduction gives
// bit-identical results for any thread count.
func TestThreadCountIndependence(t *testing.T) {
	run := func(threads int) [][]float32 {
		d := New(Options{Threads: threads})
		rng := newRNG(5)
		s := normShape
		n, c := s[0], s[4]
		x := tensorOf(d, s, randn(rng, s.Len(), 2, 1))
		gamma, beta := tensorOf(d, nn.Shape{c}, randn(rng, c, 1, 1)), tensorOf(d, nn.Shape{c}, randn(rng, c, 1, 0))
		y, st := d.Alloc(s), d.Alloc(nn.Shape{n, c, 2})
		d.InstanceNormActForward(x, gamma, beta, y, st, 1e-5, 0.01)
		dy := tensorOf(d, s, randn(rng, s.Len(), 1, 0))
		dx, dg, db := d.Alloc(s), d.Alloc(nn.Shape{c}), d.Alloc(nn.Shape{c})
		d.InstanceNormActBackward(x, gamma, beta, st, dy, dx, dg, db, 0.01)
		lab := labelsOf(d, rng, nn.Shape{n, s[1], s[2], s[3]}, c)
		p := d.Alloc(s)
		ss, err := d.SoftmaxLoss(x, lab, p)
		if err != nil {
			t.Fatal(err)
		}
		cs := d.Alloc(nn.Shape{c})
		d.ChannelSum(dy, cs)
		out := [][]float32{cpuTensor(y).data, cpuTensor(st).data, cpuTensor(dx).data, cpuTensor(dg).data, cpuTensor(db).data, cpuTensor(p).data, cpuTensor(cs).data,
			f32s(ss.CE), f32s(ss.Intersect), f32s(ss.PredSum), f32s(d.ChannelDot(x, dy)), f32s(d.SumSquares([]nn.Tensor{x, dy}))}
		return out
	}
	ref := run(1)
	for _, th := range []int{2, 3, 8} {
		got := run(th)
		for i := range ref {
			for j := range ref[i] {
				if math.Float32bits(ref[i][j]) != math.Float32bits(got[i][j]) {
					t.Fatalf("threads %d: output %d element %d differs (%v vs %v)", th, i, j, got[i][j], ref[i][j])
				}
			}
		}
	}
}
