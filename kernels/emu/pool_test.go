//go:build cgo

package emu

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// TestAvgPool holds avg_pool and avg_pool_backward, float32 and bf16, to
// the CPU device's AvgPool and AvgPoolBackward bit for bit: windows that
// divide the test volume (3×5×7) and ones that leave a remainder, channel
// counts with and without a multiple of 8. The bf16 twins' reference is
// the float32 op on the widened bf16 values, rounded once.
func TestAvgPool(t *testing.T) {
	r := rng(11)
	for _, k := range [][3]int{{1, 1, 1}, {3, 5, 7}, {1, 5, 1}, {2, 2, 2}, {3, 2, 3}} {
		for _, c := range []int{1, 8, 5} {
			name := fmt.Sprintf("window %v, %d channels", k, c)
			ps := nn.Shape{tn, td / k[0], th / k[1], tw / k[2], c}
			x := uniform(r, shape5(c).Len(), -2, 2)
			g := uniform(r, ps.Len(), -2, 2)

			y := scratch(t, 4*ps.Len())
			must(t, ops.AvgPool(buf(t, x), y, tn, td, th, tw, c, k, false))
			ref := tensor(ps, make([]float32, ps.Len()))
			dev.AvgPool(tensor(shape5(c), x), ref, k)
			sameF32Bits(t, "avg_pool", "cpu.Device.AvgPool ("+name+")", y.F32(), ref.Data())

			dx := scratch(t, 4*shape5(c).Len())
			must(t, ops.AvgPoolBackward(buf(t, g), dx, tn, td, th, tw, c, k, false))
			dref := tensor(shape5(c), uniform(r, shape5(c).Len(), -9, 9)) // overwritten, remainder included
			dev.AvgPoolBackward(tensor(ps, g), dref, k)
			sameF32Bits(t, "avg_pool_backward", "cpu.Device.AvgPoolBackward ("+name+")", dx.F32(), dref.Data())

			xh, gh := toBF16(x), toBF16(g)
			yb := scratch(t, 2*ps.Len())
			must(t, ops.AvgPool(bufU16(t, xh), yb, tn, td, th, tw, c, k, true))
			ref = tensor(ps, make([]float32, ps.Len()))
			dev.AvgPool(tensor(shape5(c), widen(xh)), ref, k)
			sameU16(t, "avg_pool_bf16", "cpu.Device.AvgPool on bf16 values ("+name+")", yb.U16(), toBF16(ref.Data()))

			dxb := scratch(t, 2*shape5(c).Len())
			must(t, ops.AvgPoolBackward(bufU16(t, gh), dxb, tn, td, th, tw, c, k, true))
			dref = tensor(shape5(c), make([]float32, shape5(c).Len()))
			dev.AvgPoolBackward(tensor(ps, widen(gh)), dref, k)
			sameU16(t, "avg_pool_backward_bf16", "cpu.Device.AvgPoolBackward on bf16 values ("+name+")", dxb.U16(), toBF16(dref.Data()))
		}
	}
	if err := ops.AvgPool(buf(t, make([]float32, shape5(1).Len())), scratch(t, 4), tn, td, th, tw, 1, [3]int{4, 1, 1}, false); err == nil {
		t.Error("AvgPool with a window larger than its axis: no error")
	}
}
