//go:build cgo

package emu

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// TestInstanceNorm compares the instance-norm kernels with the CPU device.
//
// Both devices sum in float64, in different orders (chunks of 37 voxels
// folded in a tree here, 4096-voxel chunks summed sequentially there), so
// the float32 mean and rstd can differ by an ulp; everything after repeats
// the CPU's float32 arithmetic. Tolerances: stats 1e-6 relative; y and dx,
// which scale an ulp of the statistics by |x̂|·γ and a few such terms,
// 1e-5 + 1e-5·|ref|; dgamma, dbeta (float64 sums rounded once) 1e-6
// relative + 1e-6.
func TestInstanceNorm(t *testing.T) {
	r := rng(30)
	for _, c := range []int{1, 6, 260} {
		n := tn
		if c == 260 { // keep the emulation quick for the wide case
			n = 1
		}
		shape := nn.Shape{n, td, th, tw, c}
		total := n * tv * c
		x := uniform(r, total, -2, 3) // non-zero mean
		for i := range x[:c] {
			x[i] += 5 // one outlier voxel per channel
		}
		gamma := uniform(r, c, 0.5, 1.5)
		beta := uniform(r, c, -0.5, 0.5)
		dy := uniform(r, total, -1, 1)
		const eps = 1e-5
		for _, slope := range []float32{0.01, 1} {
			xb, gb, bb := buf(t, x), buf(t, gamma), buf(t, beta)
			yb := scratch(t, 4*total)
			sb := scratch(t, 4*n*c*2)
			sc := scratch(t, ops.ScratchBytes(n, tv, c))
			must(t, ops.InstanceNormActForward(xb, gb, bb, yb, sb, sc, n, tv, c, eps, slope))

			yRef := tensor(shape, make([]float32, total))
			sRef := tensor(nn.Shape{n, c, 2}, make([]float32, n*c*2))
			gRef, bRef := tensor(nn.Shape{c}, gamma), tensor(nn.Shape{c}, beta)
			xRef := tensor(shape, x)
			dev.InstanceNormActForward(xRef, gRef, bRef, yRef, sRef, eps, slope)
			compare(t, "instnorm_fwd_partial+instnorm_fwd_stats", "cpu.Device.InstanceNormActForward (stats)", sb.F32(), sRef.Data(), 1e-7, 1e-6)
			compare(t, "instnorm_fwd_apply", "cpu.Device.InstanceNormActForward (y)", yb.F32(), yRef.Data(), 1e-5, 1e-5)

			// Backward from the CPU's statistics, so only the backward's own
			// differences show; dx aliases dy as in nn.
			sb.SetF32(sRef.Data())
			dyb := buf(t, dy)
			dgb, dbb := scratch(t, 4*c), scratch(t, 4*c)
			must(t, ops.InstanceNormActBackward(xb, gb, bb, sb, dyb, dyb, dgb, dbb, sc, n, tv, c, slope))
			dyRef := tensor(shape, dy)
			dgRef, dbRef := tensor(nn.Shape{c}, make([]float32, c)), tensor(nn.Shape{c}, make([]float32, c))
			dev.InstanceNormActBackward(xRef, gRef, bRef, sRef, dyRef, dyRef, dgRef, dbRef, slope)
			compare(t, "instnorm_bwd_apply", "cpu.Device.InstanceNormActBackward (dx)", dyb.F32(), dyRef.Data(), 1e-5, 1e-5)
			compare(t, "instnorm_bwd_partial+instnorm_bwd_finish+instnorm_bwd_affine", "cpu.Device.InstanceNormActBackward (dgamma)", dgb.F32(), dgRef.Data(), 1e-5, 1e-6)
			compare(t, "instnorm_bwd_partial+instnorm_bwd_finish+instnorm_bwd_affine", "cpu.Device.InstanceNormActBackward (dbeta)", dbb.F32(), dbRef.Data(), 1e-6, 1e-6)

			// The same launches again give the same bits (fixed reduction order).
			again := buf(t, dy)
			must(t, ops.InstanceNormActBackward(xb, gb, bb, sb, again, again, dgb, dbb, sc, n, tv, c, slope))
			if !sameBits(again.F32(), dyb.F32()) {
				t.Errorf("instance norm backward (c=%d) is not deterministic", c)
			}
		}
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
