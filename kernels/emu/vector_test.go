//go:build cgo

package emu

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/kernels"
)

// The VT_VEC paths of the memory-bound kernels (8 elements per thread and
// access when the sizes allow it and the tensors are 16-byte aligned, as
// device allocations are) against the same kernels' element-wise paths,
// which the other tests hold to the CPU device: each case runs once on
// aligned buffers and once on buffers offset by one element, and the
// outputs must agree bit for bit (the channel sums, added in another fixed
// order, to double rounding). Norm kernels: TestInstanceNormVectorPath.

// vecBuf is an operand of a vector-path case: float32 values, or bf16
// ones (rounded from them) when bf.
type vecBuf struct {
	vals []float32
	bf   bool
}

// load returns the operand in a buffer whose first element is 16-byte
// aligned, or one element past that.
func (v vecBuf) load(t *testing.T, aligned bool) *Buffer {
	if aligned {
		if v.bf {
			return bufU16(t, toBF16(v.vals))
		}
		return buf(t, v.vals)
	}
	if v.bf {
		return unaligned(t, nil, toBF16(v.vals))
	}
	return unaligned(t, v.vals, nil)
}

// read returns the operand's first n values, widened when bf16.
func (v vecBuf) read(b *Buffer, n int) []float32 {
	if v.bf {
		return widen(b.U16())[:n]
	}
	return b.F32()[:n]
}

func TestVectorPaths(t *testing.T) {
	r := rng(50)
	const ca, cb = 16, 8
	const c = ca + cb
	rows := tn * tv
	n := rows * c
	vals := func(m int) []float32 { return uniform(r, m, -2, 2) }
	withSpecials := func(m int) []float32 { return widen(specialBF16(r, m)) }
	bias := buf(t, vals(c))
	type kase struct {
		name string
		in   []vecBuf // operands; outs index into them
		outs []int
		lens []int
		run  func(b []*Buffer) error
	}
	f, h := func(x []float32) vecBuf { return vecBuf{x, false} }, func(x []float32) vecBuf { return vecBuf{x, true} }
	cases := []kase{
		{"add_f32", []vecBuf{f(vals(n)), f(vals(n))}, []int{0}, []int{n},
			func(b []*Buffer) error { return ops.Add(b[0], b[1], n) }},
		{"add_bf16", []vecBuf{h(withSpecials(n)), h(withSpecials(n))}, []int{0}, []int{n},
			func(b []*Buffer) error { return ops.AddBF16(b[0], b[1], n) }},
		{"act_forward", []vecBuf{f(vals(n)), f(make([]float32, n))}, []int{1}, []int{n},
			func(b []*Buffer) error { return ops.ActForward(b[0], b[1], n, 0.01) }},
		{"act_forward_bf16", []vecBuf{h(withSpecials(n)), h(make([]float32, n))}, []int{1}, []int{n},
			func(b []*Buffer) error { return ops.ActForwardBF16(b[0], b[1], n, 0.01) }},
		{"act_backward", []vecBuf{f(vals(n)), f(vals(n))}, []int{1}, []int{n},
			func(b []*Buffer) error { return ops.ActBackward(b[0], b[1], b[1], n, 0.01) }},
		{"act_backward_bf16", []vecBuf{h(withSpecials(n)), f(vals(n))}, []int{1}, []int{n},
			func(b []*Buffer) error { return ops.ActBackwardBF16(b[0], b[1], b[1], n, 0.01) }},
		{"act_backward_bf16g", []vecBuf{h(withSpecials(n)), h(withSpecials(n))}, []int{1}, []int{n},
			func(b []*Buffer) error { return ops.ActBackwardBF16G(b[0], b[1], b[1], n, 0.01) }},
		{"add_channel_bias", []vecBuf{f(vals(n))}, []int{0}, []int{n},
			func(b []*Buffer) error { return ops.AddChannelBias(b[0], bias, rows, c) }},
		{"add_channel_bias_bf16", []vecBuf{h(vals(n))}, []int{0}, []int{n},
			func(b []*Buffer) error { return ops.AddChannelBiasBF16(b[0], bias, rows, c) }},
		{"concat_channels", []vecBuf{f(vals(rows * ca)), f(vals(rows * cb)), f(make([]float32, n))}, []int{2}, []int{n},
			func(b []*Buffer) error { return ops.ConcatChannels(b[0], b[1], b[2], rows, ca, cb) }},
		{"concat_channels_bf16", []vecBuf{h(withSpecials(rows * ca)), h(vals(rows * cb)), h(make([]float32, n))}, []int{2}, []int{n},
			func(b []*Buffer) error { return ops.ConcatChannelsBF16(b[0], b[1], b[2], rows, ca, cb) }},
		{"split_channels", []vecBuf{f(vals(n)), f(make([]float32, rows*ca)), f(make([]float32, rows*cb))}, []int{1, 2}, []int{rows * ca, rows * cb},
			func(b []*Buffer) error { return ops.SplitChannels(b[0], b[1], b[2], rows, ca, cb) }},
		{"split_channels_bf16", []vecBuf{h(withSpecials(n)), h(make([]float32, rows*ca)), h(make([]float32, rows*cb))}, []int{1, 2}, []int{rows * ca, rows * cb},
			func(b []*Buffer) error { return ops.SplitChannelsBF16(b[0], b[1], b[2], rows, ca, cb) }},
	}
	for _, k := range cases {
		var got [2][][]float32
		for a, al := range []bool{true, false} {
			bufs := make([]*Buffer, len(k.in))
			for i, v := range k.in {
				bufs[i] = v.load(t, al)
			}
			must(t, k.run(bufs))
			for j, o := range k.outs {
				got[a] = append(got[a], k.in[o].read(bufs[o], k.lens[j]))
			}
		}
		for j := range got[0] {
			sameF32Bits(t, k.name+" (vector)", "its element-wise path", got[0][j], got[1][j])
		}
	}

	// Channel sums (bias gradients) and products.
	x, y := vals(n), vals(n)
	sc := scratch(t, max(ops.ScratchBytes(1, rows, c), ops.ScratchBytes(tn, tv, c)))
	for _, bf := range []bool{false, true} {
		var sums [2][]float32
		var dots [2][]float64
		for a, al := range []bool{true, false} {
			xb, yb := vecBuf{x, bf}.load(t, al), vecBuf{y, bf}.load(t, al)
			out := scratch(t, 4*c)
			if bf {
				must(t, ops.ChannelSumBF16(xb, out, sc, rows, c))
			} else {
				must(t, ops.ChannelSum(xb, out, sc, rows, c))
				dot := scratch(t, 8*tn*c)
				must(t, ops.ChannelDot(xb, yb, dot, sc, tn, tv, c))
				dots[a] = dot.F64()
			}
			sums[a] = out.F32()
		}
		compare(t, "channel_sum_partial (vector)", "its element-wise path", sums[0], sums[1], 1e-7, 1e-6)
		if !bf {
			compare(t, "channel_sum_partial with b (vector)", "its element-wise path", dots[0], dots[1], 1e-12, 1e-12)
		}
	}
	if math.IsNaN(float64(widen(toBF16([]float32{float32(math.NaN())}))[0])) == false {
		t.Fatal("toBF16 lost a NaN: the specials above test nothing")
	}
}

// TestReduceChunksStride: more outputs than MaxGrid blocks, so the
// one-block-per-output second pass strides over the rest; the channels, a
// multiple of 8 and more than 8 per thread of a block, also take the
// vector path's loop over groups of groups (vt_chunk_channel_sums_v).
func TestReduceChunksStride(t *testing.T) {
	const rows, c = 3, kernels.MaxGrid + 8
	x := uniform(rng(51), rows*c, -1, 1)
	out := scratch(t, 4*c)
	must(t, ops.ChannelSum(buf(t, x), out, scratch(t, ops.ScratchBytes(1, rows, c)), rows, c))
	want := make([]float32, c)
	for j := range want {
		want[j] = float32(float64(x[j]) + float64(x[c+j]) + float64(x[2*c+j]))
	}
	compare(t, "channel_sum_partial+reduce_chunks_f32", "the sums in Go", out.F32(), want, 0, 1e-7)
}
