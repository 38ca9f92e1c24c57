//go:build cgo

package emu

import (
	"math"
	"math/rand/v2"
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
	for _, c := range []int{1, 6, 40, 260} { // 40: the 8-channel vector path
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

// unaligned returns a buffer holding x (float32) or h (bf16) whose first
// element is not 16-byte aligned, so kernels take their element-wise path
// instead of the VT_VEC one.
func unaligned(t *testing.T, x []float32, h []uint16) *Buffer {
	elem := 4
	if h != nil {
		elem = 2
	}
	n := max(len(x), len(h))
	b := launcher.Offset(scratch(t, elem*n+16), elem)
	if h != nil {
		b.SetU16(h)
	} else {
		b.SetF32(x)
	}
	return b
}

// TestInstanceNormVectorPath holds the norm kernels' VT_VEC paths (c a
// multiple of 8, 16-byte aligned tensors: 16-byte loads, one index
// division per 8 elements) to their element-wise paths, which the other
// tests hold to the CPU device: the elementwise passes bit for bit, the
// sums (in another fixed order) to double rounding. Float32 and bf16
// activations, bf16 activation gradients.
func TestInstanceNormVectorPath(t *testing.T) {
	// 40 channels: 5 groups of 8 per voxel. (More groups than a block has
	// threads, past 2048 channels, take vt_chunk_channel_sums_v's outer
	// loop, as vt_chunk_channel_sums' past 256 — TestInstanceNorm's 260 —
	// but cost a minute under the ucontext fibers of make test.)
	instanceNormVectorPath(t, rng(32), 40, tn)
}

func instanceNormVectorPath(t *testing.T, r *rand.Rand, c, n int) {
	const eps, slope = 1e-5, 0.01
	total := n * tv * c
	xs := uniform(r, total, -2, 3)
	xh := toBF16(xs)
	gamma := uniform(r, c, 0.5, 1.5)
	beta := uniform(r, c, -0.5, 0.5)
	dy := uniform(r, total, -1, 1)
	dyh := toBF16(dy)
	gb, bb := buf(t, gamma), buf(t, beta)
	sc := scratch(t, ops.ScratchBytes(n, tv, c))
	type variant struct {
		name     string
		elem     int
		fwd, bwd func(x, y, s, dy, dg, db *Buffer) error
		x, dy    func(aligned bool) *Buffer
		read     func(b *Buffer) []float32
	}
	f32 := func(v []float32) func(bool) *Buffer {
		return func(al bool) *Buffer {
			if al {
				return buf(t, v)
			}
			return unaligned(t, v, nil)
		}
	}
	u16 := func(v []uint16) func(bool) *Buffer {
		return func(al bool) *Buffer {
			if al {
				return bufU16(t, v)
			}
			return unaligned(t, nil, v)
		}
	}
	for _, v := range []variant{
		{"float32", 4,
			func(x, y, s, _, _, _ *Buffer) error {
				return ops.InstanceNormActForward(x, gb, bb, y, s, sc, n, tv, c, eps, slope)
			},
			func(x, _, s, d, dg, db *Buffer) error {
				return ops.InstanceNormActBackward(x, gb, bb, s, d, d, dg, db, sc, n, tv, c, slope)
			},
			f32(xs), f32(dy), (*Buffer).F32},
		{"bf16 activations", 2,
			func(x, y, s, _, _, _ *Buffer) error {
				return ops.InstanceNormActForwardBF16(x, gb, bb, y, s, sc, n, tv, c, eps, slope)
			},
			func(x, _, s, d, dg, db *Buffer) error {
				return ops.InstanceNormActBackwardBF16(x, gb, bb, s, d, d, dg, db, sc, n, tv, c, slope)
			},
			u16(xh), f32(dy), func(b *Buffer) []float32 { return widen(b.U16()) }},
		{"bf16 activations and gradients", 2,
			func(x, y, s, _, _, _ *Buffer) error {
				return ops.InstanceNormActForwardBF16(x, gb, bb, y, s, sc, n, tv, c, eps, slope)
			},
			func(x, _, s, d, dg, db *Buffer) error {
				return ops.InstanceNormActBackwardBF16G(x, gb, bb, s, d, d, dg, db, sc, n, tv, c, slope)
			},
			u16(xh), u16(dyh), func(b *Buffer) []float32 { return widen(b.U16()) }},
	} {
		var ys, ss, dxs, dgs, dbs [2][]float32
		var stats []float32
		for k, al := range []bool{true, false} {
			x := v.x(al)
			y := launcher.Offset(scratch(t, v.elem*total+16), map[bool]int{true: 0, false: v.elem}[al])
			s := scratch(t, 4*n*c*2)
			must(t, v.fwd(x, y, s, nil, nil, nil))
			ys[k], ss[k] = v.read(y)[:total], s.F32()
			// The backward from one set of statistics, so that only its
			// own paths differ.
			if k == 0 {
				stats = ss[0]
			}
			s.SetF32(stats)
			d := v.dy(al)
			dg, db := scratch(t, 4*c), scratch(t, 4*c)
			must(t, v.bwd(x, nil, s, d, dg, db))
			dxs[k] = v.read(d)[:total]
			dgs[k], dbs[k] = dg.F32(), db.F32()
		}
		compare(t, "instnorm_fwd_partial (vector) "+v.name, "its element-wise path (stats)", ss[0], ss[1], 0, 1e-7)
		compare(t, "instnorm_bwd_partial (vector) "+v.name, "its element-wise path (dgamma)", dgs[0], dgs[1], 1e-7, 1e-6)
		compare(t, "instnorm_bwd_partial (vector) "+v.name, "its element-wise path (dbeta)", dbs[0], dbs[1], 1e-7, 1e-6)
		if sameBits(ss[0], ss[1]) {
			sameF32Bits(t, "instnorm_fwd_apply (vector) "+v.name, "its element-wise path (y)", ys[0], ys[1])
		} else {
			compare(t, "instnorm_fwd_apply (vector) "+v.name, "its element-wise path (y)", ys[0], ys[1], 1e-6, 1e-2)
		}
		if sameBits(dgs[0], dgs[1]) && sameBits(dbs[0], dbs[1]) {
			sameF32Bits(t, "instnorm_bwd_apply (vector) "+v.name, "its element-wise path (dx)", dxs[0], dxs[1])
		} else {
			compare(t, "instnorm_bwd_apply (vector) "+v.name, "its element-wise path (dx)", dxs[0], dxs[1], 1e-6, 1e-2)
		}
	}
}
