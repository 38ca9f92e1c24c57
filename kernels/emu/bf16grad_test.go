//go:build cgo

package emu

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// The kernels of bf16 activation gradients (elementwise.cu's add_bf16,
// split_channels_bf16, act_backward_bf16g; reduce.cu's
// channel_sum_partial_bf16; norm.cu's _bf16g; conv.cu's vol2col_bf16x and
// col2vol_bf16). Each is defined as the widen path — widen the bf16
// operands (bf16_to_f32), run the float32 kernels, round the bf16 outputs
// (f32_to_bf16) — and held to it bit for bit; and, as a CPU twin, to the
// CPU device's float32 op on the widened values (rounded where the output
// is bf16).

// TestAddBF16: add_bf16 against the widen path and the CPU's Add on the
// widened values, rounded (both bit-exact), specials included.
func TestAddBF16(t *testing.T) {
	r := rng(40)
	ah := specialBF16(r, 1001)
	bh := specialBF16(r, 1001)
	n := len(ah)
	ab := bufU16(t, ah)
	must(t, ops.AddBF16(ab, bufU16(t, bh), n))

	aw, bw := widenedBuf(t, bufU16(t, ah), n), widenedBuf(t, bufU16(t, bh), n)
	must(t, ops.Add(aw, bw, n))
	sameU16(t, "add_bf16", "the widen path", ab.U16(), rounded(t, aw, n))

	ref := tensor(nn.Shape{n}, widen(ah))
	dev.Add(ref, tensor(nn.Shape{n}, widen(bh)))
	sameU16(t, "add_bf16", "cpu.Device.Add on the bf16 values, rounded", ab.U16(), toBF16(ref.Data()))
}

// TestActBackwardBF16G: act_backward_bf16g in place (dx = dy, as the U-Net
// calls it) against act_backward_bf16 on the widened dy, rounded, and the
// CPU's ActBackward on the widened values, rounded (bit-exact).
func TestActBackwardBF16G(t *testing.T) {
	r := rng(41)
	yh := specialBF16(r, 997)
	dyh := specialBF16(r, 997)
	n := len(yh)
	for _, slope := range []float32{0.01, 0, 1} {
		tag := fmt.Sprintf("act_backward_bf16g (slope %g)", slope)
		yb := bufU16(t, yh)
		g := bufU16(t, dyh)
		must(t, ops.ActBackwardBF16G(yb, g, g, n, slope))

		gw := widenedBuf(t, bufU16(t, dyh), n)
		must(t, ops.ActBackwardBF16(yb, gw, gw, n, slope))
		sameU16(t, tag, "the widen path", g.U16(), rounded(t, gw, n))

		gref := tensor(nn.Shape{n}, widen(dyh))
		dev.ActBackward(tensor(nn.Shape{n}, widen(yh)), gref, gref, slope)
		sameU16(t, tag, "cpu.Device.ActBackward on the bf16 values, rounded", g.U16(), toBF16(gref.Data()))
	}
	if err := ops.ActBackwardBF16G(nil, nil, nil, 1, 2); err == nil {
		t.Error("ActBackwardBF16G accepted slope 2")
	}
}

// TestSplitChannelsBF16: split_channels_bf16 against the CPU's
// SplitChannels on the widened values, rounded; the bits are copied
// (signalling NaNs and negative zeros pass through).
func TestSplitChannelsBF16(t *testing.T) {
	r := rng(42)
	for _, cc := range [][2]int{{3, 5}, {1, 1}, {32, 32}} {
		ca, cb := cc[0], cc[1]
		src := toBF16(uniform(r, tn*tv*(ca+cb), -1, 1))
		a, b := scratch(t, 2*tn*tv*ca), scratch(t, 2*tn*tv*cb)
		must(t, ops.SplitChannelsBF16(bufU16(t, src), a, b, tn*tv, ca, cb))
		ra, rb := tensor(shape5(ca), make([]float32, tn*tv*ca)), tensor(shape5(cb), make([]float32, tn*tv*cb))
		dev.SplitChannels(tensor(shape5(ca+cb), widen(src)), ra, rb)
		tag := fmt.Sprintf("split_channels_bf16 (%d + %d channels)", ca, cb)
		sameU16(t, tag+" first part", "cpu.Device.SplitChannels on the bf16 values, rounded", a.U16(), toBF16(ra.Data()))
		sameU16(t, tag+" second part", "cpu.Device.SplitChannels on the bf16 values, rounded", b.U16(), toBF16(rb.Data()))
	}
	a, b := scratch(t, 2), scratch(t, 2)
	must(t, ops.SplitChannelsBF16(bufU16(t, []uint16{0x7f81, 0x8000}), a, b, 1, 1, 1))
	if a.U16()[0] != 0x7f81 || b.U16()[0] != 0x8000 {
		t.Errorf("split_channels_bf16 of 0x7f81, 0x8000 gave %#04x, %#04x", a.U16()[0], b.U16()[0])
	}
}

// TestChannelSumBF16: channel_sum_partial_bf16 (+ reduce_chunks_f32)
// against ChannelSum on the widened values (bit-exact: the same sums in
// the same order) and the CPU's (TestChannelSum's tolerance).
func TestChannelSumBF16(t *testing.T) {
	r := rng(43)
	for _, c := range []int{1, 3, 300} {
		rows := tn * tv
		xh := toBF16(uniform(r, rows*c, -1, 1))
		out := scratch(t, 4*c)
		sc := scratch(t, ops.ScratchBytes(1, rows, c))
		must(t, ops.ChannelSumBF16(bufU16(t, xh), out, sc, rows, c))
		want := scratch(t, 4*c)
		must(t, ops.ChannelSum(widenedBuf(t, bufU16(t, xh), rows*c), want, sc, rows, c))
		tag := fmt.Sprintf("channel_sum_partial_bf16+reduce_chunks_f32 (c=%d)", c)
		sameF32Bits(t, tag, "the widen path", out.F32(), want.F32())
		ref := tensor(nn.Shape{c}, make([]float32, c))
		dev.ChannelSum(tensor(shape5(c), widen(xh)), ref)
		compare(t, tag, "cpu.Device.ChannelSum on the bf16 values", out.F32(), ref.Data(), 1e-6, 1e-6)
	}
}

// TestInstanceNormBackwardBF16G holds the _bf16g backward (bf16 x, dy, dx
// in place) to the widen path — x and dy widened, the float32 kernels, dx
// rounded — bit for bit (dx, dgamma, dbeta), and to the CPU device on the
// bf16 values (TestInstanceNorm's tolerances, dx widened by one bf16 ulp).
func TestInstanceNormBackwardBF16G(t *testing.T) {
	r := rng(44)
	for _, c := range []int{1, 6, 40, 260} { // 40: the 8-channel vector path
		n := tn
		if c == 260 {
			n = 1
		}
		shape := nn.Shape{n, td, th, tw, c}
		total := n * tv * c
		xs := uniform(r, total, -2, 3)
		for i := range xs[:c] {
			xs[i] += 5
		}
		xh, dyh := toBF16(xs), toBF16(uniform(r, total, -1, 1))
		gamma, beta := uniform(r, c, 0.5, 1.5), uniform(r, c, -0.5, 0.5)
		const eps = 1e-5
		for _, slope := range []float32{0.01, 0} {
			tag := fmt.Sprintf("(c=%d, slope %g)", c, slope)
			xRef, gRef, bRef := tensor(shape, widen(xh)), tensor(nn.Shape{c}, gamma), tensor(nn.Shape{c}, beta)
			sRef := tensor(nn.Shape{n, c, 2}, make([]float32, n*c*2))
			dev.InstanceNormActForward(xRef, gRef, bRef, tensor(shape, make([]float32, total)), sRef, eps, slope)

			xb, gb, bb, sb := bufU16(t, xh), buf(t, gamma), buf(t, beta), buf(t, sRef.Data())
			sc := scratch(t, ops.ScratchBytes(n, tv, c))
			dyb := bufU16(t, dyh)
			dgb, dbb := scratch(t, 4*c), scratch(t, 4*c)
			must(t, ops.InstanceNormActBackwardBF16G(xb, gb, bb, sb, dyb, dyb, dgb, dbb, sc, n, tv, c, slope))

			dyw := widenedBuf(t, bufU16(t, dyh), total)
			dgw, dbw := scratch(t, 4*c), scratch(t, 4*c)
			must(t, ops.InstanceNormActBackward(widenedBuf(t, xb, total), gb, bb, sb, dyw, dyw, dgw, dbw, sc, n, tv, c, slope))
			sameU16(t, "instnorm_bwd_apply_bf16g "+tag, "the widen path (dx)", dyb.U16(), rounded(t, dyw, total))
			sameF32Bits(t, "instnorm_bwd_partial_bf16g+... "+tag, "the widen path (dgamma)", dgb.F32(), dgw.F32())
			sameF32Bits(t, "instnorm_bwd_partial_bf16g+... "+tag, "the widen path (dbeta)", dbb.F32(), dbw.F32())

			dyRef := tensor(shape, widen(dyh))
			dgRef, dbRef := tensor(nn.Shape{c}, make([]float32, c)), tensor(nn.Shape{c}, make([]float32, c))
			dev.InstanceNormActBackward(xRef, gRef, bRef, sRef, dyRef, dyRef, dgRef, dbRef, slope)
			compare(t, "instnorm_bwd_apply_bf16g "+tag, "cpu.Device.InstanceNormActBackward on the bf16 values, rounded (dx)", widen(dyb.U16()), widen(toBF16(dyRef.Data())), 1e-5, 1e-5+0x1p-7)
			compare(t, "instnorm_bwd_partial_bf16g+... "+tag, "cpu.Device.InstanceNormActBackward (dgamma)", dgb.F32(), dgRef.Data(), 1e-5, 1e-6)
			compare(t, "instnorm_bwd_partial_bf16g+... "+tag, "cpu.Device.InstanceNormActBackward (dbeta)", dbb.F32(), dbRef.Data(), 1e-6, 1e-6)
		}
	}
	if err := ops.InstanceNormActBackwardBF16G(nil, nil, nil, nil, nil, nil, nil, nil, nil, 1, 1, 1, -1); err == nil {
		t.Error("InstanceNormActBackwardBF16G accepted slope -1")
	}
}

// bf16ConvGeoms are geometries for the bf16 vol2col and col2vol: the
// U-Net's (3×3×3, the strided first conv of a level, the transposed
// conv's 2×2×2 adjoint), channel counts on both the 4-channel and the
// scalar paths, and a 1×1×1 stride 2 conv whose input has voxels no tile
// reaches.
var bf16ConvGeoms = []struct {
	name string
	g    geom.Conv
}{
	{"3x3x3 stride 1 pad 1", geom.Conv{N: 2, InD: 4, InH: 5, InW: 3, InC: 3, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}},
	{"3x3x3 stride 1 pad 1, 8 channels", geom.Conv{N: 2, InD: 4, InH: 5, InW: 3, InC: 8, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}},
	{"3x3x3 stride 2 pad 1, 4 channels", geom.Conv{N: 2, InD: 5, InH: 6, InW: 7, InC: 4, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1}},
	{"anisotropic 1x3x3 stride (1,2,2)", geom.Conv{N: 1, InD: 3, InH: 7, InW: 6, InC: 2, OutC: 2, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PD: 0, PH: 1, PW: 1}},
	{"2x2x2 stride 2 (ConvTranspose3d's adjoint), 12 channels", geom.Conv{N: 2, InD: 4, InH: 4, InW: 6, InC: 12, OutC: 2, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}},
	{"1x1x1 stride 2", geom.Conv{N: 2, InD: 4, InH: 3, InW: 5, InC: 4, OutC: 2, KD: 1, KH: 1, KW: 1, SD: 2, SH: 2, SW: 2}},
}

// TestVol2ColBF16X: vol2col_bf16x of a bf16 x is vol2col_bf16 of the
// widened x, bit for bit, in one tile and many, on the 4-channel path and
// (through views offset by 2 bytes) the scalar one.
func TestVol2ColBF16X(t *testing.T) {
	r := rng(45)
	for gi, tc := range bf16ConvGeoms {
		g := tc.g
		k, m, inLen := g.PatchLen(), g.OutVoxels(), g.InLen()
		xh := specialBF16(r, inLen)
		xh = xh[len(xh)-inLen:] // the specials last
		for _, off := range []int{0, 1} {
			xb := bufU16(t, append(make([]uint16, off), xh...))
			x := launcher.Offset(xb, 2*off)
			xw := widenedBuf(t, x, inLen)
			for _, tile := range []int{m, 5 + gi} {
				col, want := scratch(t, 2*(off+tile*k)), scratch(t, 2*tile*k)
				colv := launcher.Offset(col, 2*off)
				for m0 := 0; m0 < m; m0 += tile {
					rows := min(tile, m-m0)
					must(t, ops.Vol2ColBF16X(g, x, colv, m0, rows))
					must(t, ops.Vol2ColBF16(g, xw, want, m0, rows))
					label := fmt.Sprintf("vol2col_bf16x (%s, offset %d, rows [%d, %d))", tc.name, off, m0, m0+rows)
					if got, w := col.U16()[off:off+rows*k], want.U16()[:rows*k]; !equalU16(got, w) {
						sameU16(t, label, "vol2col_bf16 of the widened x", got, w)
						return
					}
				}
			}
		}
		t.Logf("vol2col_bf16x (%s): vol2col_bf16 of the widened x bit for bit, one tile and %d-row tiles, 8- and 2-byte aligned", tc.name, 5+gi)
	}
}

func equalU16(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCol2VolBF16: col2vol_bf16, tile after tile with its carry in buffers
// of exactly Col2VolCarry's size, leaves in a bf16 dx the float32 col2vol
// result over all tiles rounded once — bit for bit — in one tile, in
// tiles smaller than the carry and in larger ones; and the carry never
// runs past its buffers (the emulation's guards).
func TestCol2VolBF16(t *testing.T) {
	r := rng(46)
	for gi, tc := range bf16ConvGeoms {
		g := tc.g
		k, m, inLen := g.PatchLen(), g.OutVoxels(), g.InLen()
		voxels := inLen / g.InC
		dcol := uniform(r, m*k, -1, 1)
		for _, tile := range []int{m, 37, 1 + gi} {
			label := fmt.Sprintf("col2vol_bf16 (%s, %d-row tiles)", tc.name, tile)
			want := scratch(t, 4*inLen)
			must(t, ops.Fill(want, inLen, 0))
			dx := bufU16(t, make([]uint16, inLen))
			carry := kernels.Col2VolCarry(g, tile)
			cbuf := [2]*Buffer{scratch(t, 4*max(carry*g.InC, 1)), scratch(t, 4*max(carry*g.InC, 1))}
			carried := 0
			for m0 := 0; m0 < m; m0 += tile {
				rows := min(tile, m-m0)
				db := buf(t, dcol[m0*k:(m0+rows)*k])
				must(t, ops.Col2Vol(g, db, want, m0, rows))
				lo, count := kernels.Col2VolRange(g, m0, rows)
				done := voxels
				if m0+rows < m {
					done, _ = kernels.Col2VolRange(g, m0+rows, min(tile, m-m0-rows))
				}
				must(t, ops.Col2VolBF16(g, db, dx, cbuf[0], cbuf[1], m0, rows, carried, done))
				carried = lo + count
				cbuf[0], cbuf[1] = cbuf[1], cbuf[0]
			}
			sameU16(t, label, "float32 col2vol over all tiles, rounded", dx.U16(), rounded(t, want, inLen))
			t.Logf("%s: carry of %d voxels", label, carry)
		}
	}
	g := bf16ConvGeoms[0].g
	b := scratch(t, 4*g.PatchLen())
	if err := ops.Col2VolBF16(g, b, b, b, b, 40, 2, 0, 0); err == nil {
		t.Error("Col2VolBF16 accepted a final voxel before the tile's first")
	}
}
