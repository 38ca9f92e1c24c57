//go:build cgo

package emu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// The _bf16 kernels of bf16 activation storage (norm.cu, elementwise.cu).
// Their CPU twin is the CPU device's float32 op on the widened bf16
// values, with bf16 outputs rounded once (bf16Ref); and each must give,
// bit for bit, what the device computed before it existed: widen the bf16
// operands (bf16_to_f32), run the float32 kernels, round the bf16 outputs
// (f32_to_bf16).

// toBF16 rounds x to bf16 bits (bf16Ref).
func toBF16(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = bf16Ref(v)
	}
	return h
}

// widen returns bf16 bits as float32s (exact).
func widen(h []uint16) []float32 {
	x := make([]float32, len(h))
	for i, v := range h {
		x[i] = math.Float32frombits(uint32(v) << 16)
	}
	return x
}

// bufU16 uploads a copy of bf16 bits and frees it when the test ends.
func bufU16(t *testing.T, h []uint16) *Buffer {
	b := FromU16(h)
	t.Cleanup(b.Free)
	return b
}

// sameU16 fails t unless got and want hold the same bits.
func sameU16(t *testing.T, kernel, ref string, got, want []uint16) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("kernel %s: %d values, reference %s has %d", kernel, len(got), ref, len(want))
	}
	bad, first := 0, -1
	for i := range got {
		if got[i] != want[i] {
			if bad++; first < 0 {
				first = i
			}
		}
	}
	t.Logf("kernel %s vs %s: %d bf16 values, %d differ (bit-exact wanted)", kernel, ref, len(got), bad)
	if bad > 0 {
		t.Errorf("kernel %s: %d of %d bf16 values differ from %s; first at %d: %#04x, want %#04x", kernel, bad, len(got), ref, first, got[first], want[first])
	}
}

// sameF32Bits fails t unless got and want hold the same float32 bits.
func sameF32Bits(t *testing.T, kernel, ref string, got, want []float32) {
	t.Helper()
	if !sameBits(got, want) {
		for i := range got {
			if i >= len(want) || math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("kernel %s: differs from %s (bit-exact wanted) at %d of %d: %v, want %v", kernel, ref, i, len(got), got[i], want[i])
				return
			}
		}
		t.Errorf("kernel %s: %d values, %s has %d", kernel, len(got), ref, len(want))
		return
	}
	t.Logf("kernel %s vs %s: bit-exact over %d values", kernel, ref, len(got))
}

// widenedBuf is the widen path's float32 copy of bf16 bits, made by the
// bf16_to_f32 kernel.
func widenedBuf(t *testing.T, hb *Buffer, n int) *Buffer {
	t.Helper()
	f := scratch(t, 4*n)
	must(t, ops.BF16ToF32(hb, f, n))
	return f
}

// rounded is the widen path's rounding of a float32 result into bf16 by
// the f32_to_bf16 kernel.
func rounded(t *testing.T, f *Buffer, n int) []uint16 {
	t.Helper()
	h := scratch(t, 2*n)
	must(t, ops.F32ToBF16(f, h, n))
	return h.U16()
}

// TestInstanceNormBF16 holds the bf16 instance-norm kernels to the widen
// path (bit-exact: same arithmetic, same fixed-order double sums) and to
// the CPU device on the bf16 values (TestInstanceNorm's tolerances, y
// widened by one bf16 ulp, 2⁻⁷ relative: a float32 difference may round to
// the neighbouring bf16 value).
func TestInstanceNormBF16(t *testing.T) {
	r := rng(31)
	for _, c := range []int{1, 6, 40, 260} { // 40: the 8-channel vector path
		n := tn
		if c == 260 { // keep the emulation quick for the wide case
			n = 1
		}
		shape := nn.Shape{n, td, th, tw, c}
		total := n * tv * c
		xs := uniform(r, total, -2, 3)
		for i := range xs[:c] {
			xs[i] += 5 // one outlier voxel per channel
		}
		xh := toBF16(xs)
		x := widen(xh)
		gamma := uniform(r, c, 0.5, 1.5)
		beta := uniform(r, c, -0.5, 0.5)
		dy := uniform(r, total, -1, 1)
		const eps = 1e-5
		for _, slope := range []float32{0.01, 0} {
			tag := fmt.Sprintf("(c=%d, slope %g)", c, slope)
			xb, gb, bb := bufU16(t, xh), buf(t, gamma), buf(t, beta)
			sc := scratch(t, ops.ScratchBytes(n, tv, c))

			// Forward into a separate y, then in place.
			yb := scratch(t, 2*total)
			sb := scratch(t, 4*n*c*2)
			must(t, ops.InstanceNormActForwardBF16(xb, gb, bb, yb, sb, sc, n, tv, c, eps, slope))
			xw := widenedBuf(t, xb, total)
			yw, sw := scratch(t, 4*total), scratch(t, 4*n*c*2)
			must(t, ops.InstanceNormActForward(xw, gb, bb, yw, sw, sc, n, tv, c, eps, slope))
			sameF32Bits(t, "instnorm_fwd_partial_bf16+instnorm_fwd_stats "+tag, "the widen path (stats)", sb.F32(), sw.F32())
			sameU16(t, "instnorm_fwd_apply_bf16 "+tag, "the widen path (y)", yb.U16(), rounded(t, yw, total))
			inPlace := bufU16(t, xh)
			s2 := scratch(t, 4*n*c*2)
			must(t, ops.InstanceNormActForwardBF16(inPlace, gb, bb, inPlace, s2, sc, n, tv, c, eps, slope))
			sameU16(t, "instnorm_fwd_apply_bf16 in place "+tag, "the same kernels into a separate y", inPlace.U16(), yb.U16())

			yRef := tensor(shape, make([]float32, total))
			sRef := tensor(nn.Shape{n, c, 2}, make([]float32, n*c*2))
			gRef, bRef, xRef := tensor(nn.Shape{c}, gamma), tensor(nn.Shape{c}, beta), tensor(shape, x)
			dev.InstanceNormActForward(xRef, gRef, bRef, yRef, sRef, eps, slope)
			compare(t, "instnorm_fwd_partial_bf16+instnorm_fwd_stats "+tag, "cpu.Device.InstanceNormActForward on the bf16 values (stats)", sb.F32(), sRef.Data(), 1e-7, 1e-6)
			compare(t, "instnorm_fwd_apply_bf16 "+tag, "cpu.Device.InstanceNormActForward on the bf16 values, rounded (y)", widen(yb.U16()), widen(toBF16(yRef.Data())), 1e-5, 1e-5+0x1p-7)

			// Backward from the CPU's statistics; dx aliases dy as in nn.
			sb.SetF32(sRef.Data())
			dyb := buf(t, dy)
			dgb, dbb := scratch(t, 4*c), scratch(t, 4*c)
			must(t, ops.InstanceNormActBackwardBF16(xb, gb, bb, sb, dyb, dyb, dgb, dbb, sc, n, tv, c, slope))
			dyw := buf(t, dy)
			dgw, dbw := scratch(t, 4*c), scratch(t, 4*c)
			must(t, ops.InstanceNormActBackward(xw, gb, bb, sb, dyw, dyw, dgw, dbw, sc, n, tv, c, slope))
			sameF32Bits(t, "instnorm_bwd_apply_bf16 "+tag, "the widen path (dx)", dyb.F32(), dyw.F32())
			sameF32Bits(t, "instnorm_bwd_partial_bf16+instnorm_bwd_finish+instnorm_bwd_affine "+tag, "the widen path (dgamma)", dgb.F32(), dgw.F32())
			sameF32Bits(t, "instnorm_bwd_partial_bf16+instnorm_bwd_finish+instnorm_bwd_affine "+tag, "the widen path (dbeta)", dbb.F32(), dbw.F32())

			dyRef := tensor(shape, dy)
			dgRef, dbRef := tensor(nn.Shape{c}, make([]float32, c)), tensor(nn.Shape{c}, make([]float32, c))
			dev.InstanceNormActBackward(xRef, gRef, bRef, sRef, dyRef, dyRef, dgRef, dbRef, slope)
			compare(t, "instnorm_bwd_apply_bf16 "+tag, "cpu.Device.InstanceNormActBackward on the bf16 values (dx)", dyb.F32(), dyRef.Data(), 1e-5, 1e-5)
			compare(t, "instnorm_bwd_partial_bf16+... "+tag, "cpu.Device.InstanceNormActBackward (dgamma)", dgb.F32(), dgRef.Data(), 1e-5, 1e-6)
			compare(t, "instnorm_bwd_partial_bf16+... "+tag, "cpu.Device.InstanceNormActBackward (dbeta)", dbb.F32(), dbRef.Data(), 1e-6, 1e-6)
		}
	}
	if err := ops.InstanceNormActForwardBF16(nil, nil, nil, nil, nil, nil, 1, 1, 1, 1e-5, -0.5); err == nil {
		t.Error("InstanceNormActForwardBF16 accepted slope -0.5")
	}
}

// specialBF16 is bf16 bits for the elementwise tests: n random values in
// [-4, 4), then signed zeros, infinities, a quiet NaN of each sign, the
// largest finite values of each sign and subnormals.
func specialBF16(r *rand.Rand, n int) []uint16 {
	return append(toBF16(uniform(r, n, -4, 4)), 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f7f, 0xff7f, 0x0001, 0x8003)
}

// TestActivationBF16: act_forward_bf16 (in place, as the U-Net calls it)
// and act_backward_bf16 against the CPU device on the widened values,
// rounded; the CPU twin repeats the float32 arithmetic, so bit-exact.
func TestActivationBF16(t *testing.T) {
	r := rng(32)
	xh := specialBF16(r, 997)
	n := len(xh)
	dy := uniform(r, n, -1, 1)
	for _, slope := range []float32{0.01, 0, 1} {
		b := bufU16(t, xh)
		must(t, ops.ActForwardBF16(b, b, n, slope))
		ref := tensor(nn.Shape{n}, widen(xh))
		dev.ActForward(ref, ref, slope)
		sameU16(t, fmt.Sprintf("act_forward_bf16 (slope %g)", slope), "cpu.Device.ActForward on the bf16 values, rounded", b.U16(), toBF16(ref.Data()))

		g := buf(t, dy)
		must(t, ops.ActBackwardBF16(b, g, g, n, slope))
		gref := tensor(nn.Shape{n}, dy)
		dev.ActBackward(ref, gref, gref, slope)
		sameF32Bits(t, fmt.Sprintf("act_backward_bf16 (slope %g)", slope), "cpu.Device.ActBackward on the bf16 values", g.F32(), gref.Data())
	}
	if err := ops.ActForwardBF16(nil, nil, 1, 1.5); err == nil {
		t.Error("ActForwardBF16 accepted slope 1.5")
	}
	if err := ops.ActBackwardBF16(nil, nil, nil, 1, -1); err == nil {
		t.Error("ActBackwardBF16 accepted slope -1")
	}
}

// TestChannelBiasBF16: add_channel_bias_bf16 against the CPU device's
// AddChannelBias on the widened values, rounded (bit-exact), with ties
// (a bias that lands a sum halfway between two bf16 values) included.
func TestChannelBiasBF16(t *testing.T) {
	r := rng(33)
	for _, c := range []int{1, 5, 300} {
		rows := tn * tv
		xh := toBF16(uniform(r, rows*c, -4, 4))
		bias := uniform(r, c, -1, 1)
		bias[0] = 0x1p-8 // 1 + 2⁻⁸ is a tie between 1 and 1 + 2⁻⁷
		xh[0] = 0x3f80   // 1
		b := bufU16(t, xh)
		must(t, ops.AddChannelBiasBF16(b, buf(t, bias), rows, c))
		ref := tensor(shape5(c), widen(xh))
		dev.AddChannelBias(ref, tensor(nn.Shape{c}, bias))
		want := toBF16(ref.Data())
		if want[0] != 0x3f80 {
			t.Fatalf("the tie case rounds to %#04x, want 0x3f80 (ties to even)", want[0])
		}
		sameU16(t, fmt.Sprintf("add_channel_bias_bf16 (c=%d)", c), "cpu.Device.AddChannelBias on the bf16 values, rounded", b.U16(), want)
	}
}

// TestConcatBF16: concat_channels_bf16 against the CPU device's
// ConcatChannels on the widened values, rounded; the bits are copied, so
// NaN patterns (even signalling ones, which rounding would quiet) pass
// through unchanged.
func TestConcatBF16(t *testing.T) {
	r := rng(34)
	for _, cc := range [][2]int{{3, 5}, {1, 1}, {32, 32}} {
		ca, cb := cc[0], cc[1]
		ah, bh := toBF16(uniform(r, tn*tv*ca, -1, 1)), toBF16(uniform(r, tn*tv*cb, -1, 1))
		dst := scratch(t, 2*tn*tv*(ca+cb))
		must(t, ops.ConcatChannelsBF16(bufU16(t, ah), bufU16(t, bh), dst, tn*tv, ca, cb))
		ref := tensor(shape5(ca+cb), make([]float32, tn*tv*(ca+cb)))
		dev.ConcatChannels(tensor(shape5(ca), widen(ah)), tensor(shape5(cb), widen(bh)), ref)
		sameU16(t, fmt.Sprintf("concat_channels_bf16 (%d + %d channels)", ca, cb), "cpu.Device.ConcatChannels on the bf16 values, rounded", dst.U16(), toBF16(ref.Data()))
	}
	// Bits pass through: a signalling NaN and a negative zero.
	dst := scratch(t, 2*2)
	must(t, ops.ConcatChannelsBF16(bufU16(t, []uint16{0x7f81}), bufU16(t, []uint16{0x8000}), dst, 1, 1, 1))
	if got := dst.U16(); got[0] != 0x7f81 || got[1] != 0x8000 {
		t.Errorf("concat_channels_bf16 of 0x7f81, 0x8000 gave %#04x", got)
	}
}
