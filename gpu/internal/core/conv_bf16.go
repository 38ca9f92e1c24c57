package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels"
)

// The bf16 mixed-precision convolutions (Options.BF16) are the GEMMs of
// conv.go with bfloat16 operands: the weights are rounded to bf16 at each
// call (they change every step; the float32 weights stay the master copy),
// the vol2col matrix is written in bf16 by vol2col_bf16 (half the bytes),
// and the output gradient is rounded a tile at a time. cuBLAS multiplies on
// bf16 tensor cores and accumulates in float32 into float32 results. A
// 1×1×1 convolution's matrix is its input, rounded a tile at a time.
//
// Activations and activation gradients stored in bf16
// (Options.BF16Activations, BF16Gradients) are GEMM operands as they are
// where the matrix is the tensor itself: a 1×1×1 convolution's input, the
// output gradient (or the transposed convolution's input). A larger
// kernel's bf16 input is read by vol2col_bf16x, which writes its bf16
// matrix directly. A bf16 output is computed a tile at a time into
// float32 (bias added there) and rounded once; a larger kernel's bf16
// backward-data output by col2vol_bf16, which keeps the float32 partial
// sums of the voxels a tile shares with the next in a small carry
// (col2volCarry) and rounds each voxel once, when no later tile reaches
// it. Nothing is widened into a float32 copy of a whole tensor.

// gemmH issues one bf16 GEMM, recording a backend failure.
func (d *Device[B]) gemmH(op string, ta, tb bool, m, n, k int, a B, lda int, b B, ldb int, beta float32, c B, ldc int) {
	if err := d.machine.GemmBF16(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc); err != nil {
		d.fail(op, fmt.Errorf("GEMM (bf16) %s%s m=%d n=%d k=%d: %w", tr(ta), tr(tb), m, n, k, err))
	}
}

// weightsH returns g's weights w (OutC × K float32) rounded to bf16.
func (d *Device[B]) weightsH(op string, g geom.Conv, w B) (B, bool) {
	k := g.PatchLen()
	wh, ok := d.need(op, &d.weightsBF16, 2*g.OutC*k)
	if ok {
		d.check(op, d.ops.F32ToBF16(w, wh, g.OutC*k))
	}
	return wh, ok
}

// colH writes rows [m0, m0+r) of the vol2col matrix of x in bf16 to dst.
func (d *Device[B]) colH(op string, g geom.Conv, x operand[B], dst B, m0, r int) {
	switch {
	case x.bf16:
		d.check(op, d.ops.Vol2ColBF16X(g, x.p, dst, m0, r))
	case pointwise(g):
		d.check(op, d.ops.F32ToBF16(d.machine.Offset(x.p, 4*m0*g.InC), dst, r*g.InC))
	default:
		d.check(op, d.ops.Vol2ColBF16(g, x.p, dst, m0, r))
	}
}

// dyH writes rows [m0, m0+r) of dy (M × OutC) in bf16 to dst and returns
// it, or returns dy's own rows when dy is bf16.
func (d *Device[B]) dyH(op string, g geom.Conv, dy operand[B], dst B, m0, r int) B {
	if dy.bf16 {
		return d.machine.Offset(dy.p, 2*m0*g.OutC)
	}
	d.check(op, d.ops.F32ToBF16(d.machine.Offset(dy.p, 4*m0*g.OutC), dst, r*g.OutC))
	return dst
}

// colTile returns rows [m0, m0+r) of x's vol2col matrix in bf16: x's own
// rows for a bf16 input of a 1×1×1 convolution, else written into dst.
func (d *Device[B]) colTile(op string, g geom.Conv, x operand[B], dst B, m0, r int) B {
	if x.bf16 && pointwise(g) {
		return d.machine.Offset(x.p, 2*m0*g.InC)
	}
	d.colH(op, g, x, dst, m0, r)
	return dst
}

// forwardBF16 computes y = conv(x, w) + bias (bias may be nil) with bf16
// GEMMs: Yᵀ(OutC × rows) = W·colᵀ a tile at a time.
func (d *Device[B]) forwardBF16(op string, g geom.Conv, x operand[B], w B, y operand[B], bias *B) {
	k, m := g.PatchLen(), g.OutVoxels()
	rows := d.rowsPerTile(g)
	wh, ok := d.weightsH(op, g, w)
	if !ok {
		return
	}
	colh, ok := d.need(op, &d.convTileBF16, 2*rows*k)
	if !ok {
		return
	}
	var ytile B // float32 tile of a bf16 output
	if y.bf16 {
		if ytile, ok = d.need(op, &d.convTile, 4*rows*g.OutC); !ok {
			return
		}
	}
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		a := d.colTile(op, g, x, colh, m0, r)
		if !y.bf16 {
			d.gemmH(op, true, false, g.OutC, r, k, wh, k, a, k, 0, d.machine.Offset(y.p, 4*m0*g.OutC), g.OutC)
			continue
		}
		d.gemmH(op, true, false, g.OutC, r, k, wh, k, a, k, 0, ytile, g.OutC)
		if bias != nil {
			d.check(op, d.ops.AddChannelBias(ytile, *bias, r, g.OutC))
		}
		d.check(op, d.ops.F32ToBF16(ytile, d.machine.Offset(y.p, 2*m0*g.OutC), r*g.OutC))
	}
	if !y.bf16 && bias != nil {
		d.check(op, d.ops.AddChannelBias(y.p, *bias, m, g.OutC))
	}
}

// backwardWeightBF16 computes dw = Σ over tiles dY_tileᵀ·col_tile with
// bf16 operands, accumulating in float32 in a fixed tile order.
func (d *Device[B]) backwardWeightBF16(op string, g geom.Conv, x, dy operand[B], dw B) {
	k, m := g.PatchLen(), g.OutVoxels()
	rows := d.rowsPerTile(g)
	colh, ok := d.need(op, &d.convTileBF16, 2*rows*k)
	if !ok {
		return
	}
	dyh, ok := d.need(op, &d.convTile, 2*rows*g.OutC)
	if !ok {
		return
	}
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		a := d.colTile(op, g, x, colh, m0, r)
		b := d.dyH(op, g, dy, dyh, m0, r)
		beta := float32(1)
		if m0 == 0 {
			beta = 0
		}
		d.gemmH(op, false, true, k, g.OutC, r, a, k, b, g.OutC, beta, dw, k)
	}
}

// backwardDataBF16 computes dx from dy with bf16 operands: dcol =
// dY_tile·W in float32, then col2vol (for a 1×1×1 convolution dcol is dx,
// rounded a tile at a time when dx is bf16).
func (d *Device[B]) backwardDataBF16(op string, g geom.Conv, dy operand[B], w B, dx operand[B]) {
	k, m := g.PatchLen(), g.OutVoxels()
	rows := d.rowsPerTile(g)
	wh, ok := d.weightsH(op, g, w)
	if !ok {
		return
	}
	dyh, ok := d.need(op, &d.convTileBF16, 2*rows*g.OutC)
	if !ok {
		return
	}
	if pointwise(g) {
		var tile B // float32 tile of a bf16 dx
		if dx.bf16 {
			if tile, ok = d.need(op, &d.convTile, 4*rows*k); !ok {
				return
			}
		}
		for m0 := 0; m0 < m; m0 += rows {
			r := min(rows, m-m0)
			b := d.dyH(op, g, dy, dyh, m0, r)
			if !dx.bf16 {
				d.gemmH(op, false, false, k, r, g.OutC, wh, k, b, g.OutC, 0, d.machine.Offset(dx.p, 4*m0*k), k)
				continue
			}
			d.gemmH(op, false, false, k, r, g.OutC, wh, k, b, g.OutC, 0, tile, k)
			d.check(op, d.ops.F32ToBF16(tile, d.machine.Offset(dx.p, 2*m0*k), r*k))
		}
		return
	}
	dcol, ok := d.need(op, &d.convTile, 4*rows*k)
	if !ok {
		return
	}
	if dx.bf16 {
		d.col2volBF16(op, g, rows, wh, dy, dyh, dcol, dx.p)
		return
	}
	d.check(op, d.ops.Fill(dx.p, g.InLen(), 0))
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		b := d.dyH(op, g, dy, dyh, m0, r)
		d.gemmH(op, false, false, k, r, g.OutC, wh, k, b, g.OutC, 0, dcol, k)
		d.check(op, d.ops.Col2Vol(g, dcol, dx.p, m0, r))
	}
}

// col2volBF16 is backwardDataBF16's tile loop for a bf16 dx (at dxp):
// each tile's dcol goes through col2vol_bf16, the voxels the tile shares
// with the next waiting in one half of col2volCarry while the other
// holds what the tile before left.
func (d *Device[B]) col2volBF16(op string, g geom.Conv, rows int, wh B, dy operand[B], dyh, dcol, dxp B) {
	k, m := g.PatchLen(), g.OutVoxels()
	half := 4 * kernels.Col2VolCarry(g, rows) * g.InC
	carry, ok := d.need(op, &d.col2volCarry, 2*half)
	if !ok {
		return
	}
	cin, cout := carry, d.machine.Offset(carry, half)
	// bf16 zeros as float32 words, inside the tensor's block (as alloc).
	d.check(op, d.ops.Fill(dxp, (g.InLen()+1)/2, 0))
	voxels := g.InLen() / g.InC
	carried := 0
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		b := d.dyH(op, g, dy, dyh, m0, r)
		d.gemmH(op, false, false, k, r, g.OutC, wh, k, b, g.OutC, 0, dcol, k)
		done := voxels
		if m0+r < m {
			done, _ = kernels.Col2VolRange(g, m0+r, min(rows, m-m0-r))
		}
		d.check(op, d.ops.Col2VolBF16(g, dcol, dxp, cin, cout, m0, r, carried, done))
		lo, count := kernels.Col2VolRange(g, m0, r)
		carried = lo + count
		cin, cout = cout, cin
	}
}
