//go:build cgo

package emu

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// TestSGD runs several steps of each SGD variant on both devices; the
// kernel repeats the CPU's float32 arithmetic (bit-exact on amd64).
func TestSGD(t *testing.T) {
	r := rng(50)
	n := 1000
	w0 := uniform(r, n, -1, 1)
	atol, rtol := exact()
	for _, tc := range []struct {
		name string
		a    nn.SGDArgs
	}{
		{"nesterov, weight decay, clipped", nn.SGDArgs{LR: 0.01, Momentum: 0.99, WeightDecay: 3e-5, Nesterov: true, GradScale: 0.5}},
		{"heavy ball", nn.SGDArgs{LR: 0.1, Momentum: 0.9, GradScale: 1}},
		{"plain", nn.SGDArgs{LR: 0.05, WeightDecay: 1e-4, GradScale: 1}},
	} {
		wb, bb := buf(t, w0), buf(t, make([]float32, n))
		wRef, bRef := tensor(nn.Shape{n}, w0), tensor(nn.Shape{n}, make([]float32, n))
		for step := 0; step < 3; step++ {
			g := uniform(r, n, -1, 1)
			must(t, ops.SGDUpdate(wb, buf(t, g), bb, n, tc.a))
			dev.SGDUpdate([]nn.Tensor{wRef}, []nn.Tensor{tensor(nn.Shape{n}, g)}, []nn.Tensor{bRef}, tc.a)
		}
		compare(t, "sgd_update", "cpu.Device.SGDUpdate ("+tc.name+", weights after 3 steps)", wb.F32(), wRef.Data(), atol, rtol)
		if tc.a.Momentum != 0 {
			compare(t, "sgd_update", "cpu.Device.SGDUpdate ("+tc.name+", momentum buffer)", bb.F32(), bRef.Data(), atol, rtol)
		}
	}
}

// TestAdamW: several steps (the bias corrections change), bit-exact on
// amd64: sqrtf and the divisions are correctly rounded on both sides and
// the host factors come from kernels.AdamWScalars, written as the CPU's.
func TestAdamW(t *testing.T) {
	r := rng(51)
	n := 777
	w0 := uniform(r, n, -1, 1)
	a := nn.AdamWArgs{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradScale: 0.8}
	wb, mb, vb := buf(t, w0), buf(t, make([]float32, n)), buf(t, make([]float32, n))
	wRef, mRef, vRef := tensor(nn.Shape{n}, w0), tensor(nn.Shape{n}, make([]float32, n)), tensor(nn.Shape{n}, make([]float32, n))
	for step := 1; step <= 4; step++ {
		a.Step = step
		g := uniform(r, n, -1, 1)
		must(t, ops.AdamWUpdate(wb, buf(t, g), mb, vb, n, a))
		dev.AdamWUpdate([]nn.Tensor{wRef}, []nn.Tensor{tensor(nn.Shape{n}, g)}, []nn.Tensor{mRef}, []nn.Tensor{vRef}, a)
	}
	atol, rtol := exact()
	compare(t, "adamw_update", "cpu.Device.AdamWUpdate (weights after 4 steps)", wb.F32(), wRef.Data(), atol, rtol)
	compare(t, "adamw_update", "cpu.Device.AdamWUpdate (first moment)", mb.F32(), mRef.Data(), atol, rtol)
	compare(t, "adamw_update", "cpu.Device.AdamWUpdate (second moment)", vb.F32(), vRef.Data(), atol, rtol)
	a.Step = 0
	if err := ops.AdamWUpdate(wb, wb, mb, vb, n, a); err == nil {
		t.Error("step 0 accepted")
	}
}

// TestSumSquares: float64 sums of squares in different orders (flat chunks
// of 1000 folded in a tree vs the CPU's 16384-element chunks): 1e-12
// relative. Sizes below, at and above one chunk, and zero.
func TestSumSquares(t *testing.T) {
	r := rng(52)
	for _, n := range []int{0, 1, 999, 1000, 2345} {
		x := uniform(r, n, -3, 3)
		out := scratch(t, 8)
		sc := scratch(t, max(8, ops.FlatScratchBytes(n)))
		must(t, ops.SumSquares(buf(t, x), out, sc, n))
		want := dev.SumSquares([]nn.Tensor{tensor(nn.Shape{n}, x)})
		compare(t, "sumsq_partial+reduce_chunks_f64", "cpu.Device.SumSquares", out.F64(), want, 1e-12, 1e-12)
	}
}

// bf16Ref is the plain float32 -> bfloat16 conversion: round to nearest,
// ties to even, NaN kept NaN (quiet bit set). The CPU device has no bf16
// path yet, so this is the test's own reference.
func bf16Ref(f float32) uint16 {
	u := math.Float32bits(f)
	if math.IsNaN(float64(f)) {
		return uint16(u>>16) | 0x40
	}
	lower := u & 0xffff
	upper := u >> 16
	if lower > 0x8000 || lower == 0x8000 && upper&1 == 1 {
		upper++
	}
	return uint16(upper)
}

// TestCasts checks both conversions bit for bit, on random values and the
// edge cases: ties both ways, the largest values that round to the
// largest bf16 or to infinity, subnormals, signed zeros, infinities, NaNs.
func TestCasts(t *testing.T) {
	r := rng(53)
	x := uniform(r, 600, -1e4, 1e4)
	for i := 0; i < 100; i++ {
		x = append(x, math.Float32frombits(r.Uint32()))
	}
	x = append(x,
		math.Float32frombits(0x3f808000), // tie, even below: rounds down
		math.Float32frombits(0x3f818000), // tie, odd below: rounds up
		math.Float32frombits(0x3f808001), // just above a tie
		math.Float32frombits(0x7f7f7fff), // rounds to the largest bf16
		math.MaxFloat32,                  // rounds to +Inf
		-math.MaxFloat32,
		math.Float32frombits(0x00000001), // smallest subnormal
		math.Float32frombits(0x007fffff), // largest subnormal: rounds to the smallest normal
		0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc00000), math.Float32frombits(0xff800001), math.Float32frombits(0x7f800001),
	)
	n := len(x)
	out := scratch(t, 2*n)
	must(t, ops.F32ToBF16(buf(t, x), out, n))
	got := out.U16()
	var gotF, wantF []float64
	for i, v := range x {
		gotF = append(gotF, float64(got[i]))
		wantF = append(wantF, float64(bf16Ref(v)))
	}
	compare(t, "f32_to_bf16", "bf16Ref (own reference: round to nearest even)", gotF, wantF, 0, 0)

	h := make([]uint16, 0, 1<<16)
	for i := 0; i < 1<<16; i += 3 {
		h = append(h, uint16(i))
	}
	hb := FromU16(h)
	defer hb.Free()
	f := scratch(t, 4*len(h))
	must(t, ops.BF16ToF32(hb, f, len(h)))
	back := f.F32()
	gotF, wantF = gotF[:0], wantF[:0]
	for i, v := range h {
		gotF = append(gotF, float64(math.Float32bits(back[i])))
		wantF = append(wantF, float64(uint32(v)<<16))
	}
	compare(t, "bf16_to_f32", "bits<<16 (own reference, exact)", gotF, wantF, 0, 0)
}

// listTable uploads the table of tensors whose operands are bufs[t][j]
// (nil: a null operand).
func listTable(t *testing.T, bufs [][]*Buffer, sizes []int) (*Buffer, kernels.TensorList) {
	t.Helper()
	var addrs []uint64
	for _, ops := range bufs {
		for _, b := range ops {
			addrs = append(addrs, b.Addr())
		}
	}
	raw, l, err := kernels.ListTable(addrs, len(bufs[0]), sizes, ops.ListChunk())
	must(t, err)
	tb := Alloc(len(raw))
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = uint16(raw[2*i]) | uint16(raw[2*i+1])<<8
	}
	tb.SetU16(u)
	return tb, l
}

// listSizes are tensors below, at and above one flat chunk (1000 here),
// an empty one and one of several chunks.
var listSizes = []int{7, 0, 1000, 2345, 1, 999, 3100}

// TestSGDList: sgd_update_list updates every tensor of a list as
// sgd_update updates each alone, bit for bit, with and without momentum.
func TestSGDList(t *testing.T) {
	r := rng(53)
	for _, a := range []nn.SGDArgs{
		{LR: 0.01, Momentum: 0.99, WeightDecay: 3e-5, Nesterov: true, GradScale: 0.5},
		{LR: 0.05, WeightDecay: 1e-4, GradScale: 1},
	} {
		var lists [][]*Buffer
		var want [][]float32
		var wantBuf [][]float32
		for _, n := range listSizes {
			w0, g, b0 := uniform(r, n, -1, 1), uniform(r, n, -1, 1), uniform(r, n, -1, 1)
			w, b := buf(t, w0), buf(t, b0)
			ww, bb := buf(t, w0), buf(t, b0)
			gb := buf(t, g)
			var bp *Buffer
			if a.Momentum != 0 {
				bp = bb
			}
			must(t, ops.SGDUpdate(ww, gb, bp, n, a))
			want, wantBuf = append(want, ww.F32()), append(wantBuf, bb.F32())
			if a.Momentum == 0 {
				b = nil
			}
			lists = append(lists, []*Buffer{w, gb, b})
		}
		tb, l := listTable(t, lists, listSizes)
		must(t, ops.SGDUpdateList(tb, l, a))
		for i, n := range listSizes {
			compare(t, "sgd_update_list", "sgd_update of the tensor alone (weights)", lists[i][0].F32()[:n], want[i][:n], 0, 0)
			if a.Momentum != 0 {
				compare(t, "sgd_update_list", "sgd_update of the tensor alone (momentum)", lists[i][2].F32()[:n], wantBuf[i][:n], 0, 0)
			}
		}
	}
}

// TestAdamWList: adamw_update_list against adamw_update, bit for bit.
func TestAdamWList(t *testing.T) {
	r := rng(54)
	a := nn.AdamWArgs{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradScale: 0.8, Step: 3}
	var lists [][]*Buffer
	var want [][][]float32
	for _, n := range listSizes {
		w0, g, m0, v0 := uniform(r, n, -1, 1), uniform(r, n, -1, 1), uniform(r, n, -1, 1), uniform(r, n, 0, 1)
		ref := []*Buffer{buf(t, w0), buf(t, g), buf(t, m0), buf(t, v0)}
		must(t, ops.AdamWUpdate(ref[0], ref[1], ref[2], ref[3], n, a))
		want = append(want, [][]float32{ref[0].F32(), ref[2].F32(), ref[3].F32()})
		lists = append(lists, []*Buffer{buf(t, w0), buf(t, g), buf(t, m0), buf(t, v0)})
	}
	tb, l := listTable(t, lists, listSizes)
	must(t, ops.AdamWUpdateList(tb, l, a))
	for i, n := range listSizes {
		for j, what := range []string{"weights", "first moment", "second moment"} {
			compare(t, "adamw_update_list", "adamw_update of the tensor alone ("+what+")", lists[i][[]int{0, 2, 3}[j]].F32()[:n], want[i][j][:n], 0, 0)
		}
	}
	a.Step = 0
	if err := ops.AdamWUpdateList(tb, l, a); err == nil {
		t.Error("step 0 accepted")
	}
	if err := ops.SGDUpdateList(tb, l, nn.SGDArgs{LR: 1}); err == nil {
		t.Error("SGDUpdateList took a list of 4 operands")
	}
}

// TestSumSquaresList: sumsq_partial_list + reduce_ranges_f64 give each
// tensor's sum of squares bit for bit as SumSquares of the tensor alone
// (0 for the empty one).
func TestSumSquaresList(t *testing.T) {
	r := rng(55)
	var lists [][]*Buffer
	var want []float64
	for _, n := range listSizes {
		x := buf(t, uniform(r, n, -3, 3))
		out := scratch(t, 8)
		must(t, ops.SumSquares(x, out, scratch(t, max(8, ops.FlatScratchBytes(n))), n))
		want = append(want, out.F64()[0])
		lists = append(lists, []*Buffer{x})
	}
	tb, l := listTable(t, lists, listSizes)
	out := scratch(t, 8*len(listSizes))
	must(t, ops.SumSquaresList(tb, l, out, scratch(t, l.ScratchBytes())))
	compare(t, "sumsq_partial_list+reduce_ranges_f64", "SumSquares of each tensor alone", out.F64(), want, 0, 0)
	if want[1] != 0 {
		t.Errorf("the empty tensor's sum %v", want[1])
	}
}
