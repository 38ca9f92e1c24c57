package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// The bf16 mixed-precision convolutions (Options.BF16) are the GEMMs of
// conv.go with bfloat16 operands: the weights are rounded to bf16 at each
// call (they change every step; the float32 weights stay the master copy),
// the vol2col matrix is written in bf16 by vol2col_bf16 (half the bytes),
// and the output gradient is rounded a tile at a time. cuBLAS multiplies on
// bf16 tensor cores and accumulates in float32 into float32 results, so
// activations, gradients and every op besides the GEMMs stay float32 —
// what PyTorch's autocast does for convolutions, except that the
// activations are kept in float32 between ops. A 1×1×1 convolution's
// matrix is its input, rounded a tile at a time.

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
func (d *Device[B]) colH(op string, g geom.Conv, x, dst B, m0, r int) {
	if pointwise(g) {
		d.check(op, d.ops.F32ToBF16(d.machine.Offset(x, 4*m0*g.InC), dst, r*g.InC))
		return
	}
	d.check(op, d.ops.Vol2ColBF16(g, x, dst, m0, r))
}

// dyH writes rows [m0, m0+r) of dy (M × OutC float32) in bf16 to dst.
func (d *Device[B]) dyH(op string, g geom.Conv, dy, dst B, m0, r int) {
	d.check(op, d.ops.F32ToBF16(d.machine.Offset(dy, 4*m0*g.OutC), dst, r*g.OutC))
}

// forwardBF16 computes y = conv(x, w) (no bias) with bf16 GEMMs:
// Yᵀ(OutC × rows) = W·colᵀ a tile at a time.
func (d *Device[B]) forwardBF16(op string, g geom.Conv, x, w, y B) {
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
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		d.colH(op, g, x, colh, m0, r)
		d.gemmH(op, true, false, g.OutC, r, k, wh, k, colh, k, 0, d.machine.Offset(y, 4*m0*g.OutC), g.OutC)
	}
}

// backwardWeightBF16 computes dw = Σ over tiles dY_tileᵀ·col_tile with
// bf16 operands, accumulating in float32 in a fixed tile order.
func (d *Device[B]) backwardWeightBF16(op string, g geom.Conv, x, dy, dw B) {
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
		d.colH(op, g, x, colh, m0, r)
		d.dyH(op, g, dy, dyh, m0, r)
		beta := float32(1)
		if m0 == 0 {
			beta = 0
		}
		d.gemmH(op, false, true, k, g.OutC, r, colh, k, dyh, g.OutC, beta, dw, k)
	}
}

// backwardDataBF16 computes dx from dy with bf16 operands: dcol =
// dY_tile·W in float32, then col2vol (for a 1×1×1 convolution dcol is dx).
func (d *Device[B]) backwardDataBF16(op string, g geom.Conv, dy, w, dx B) {
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
		for m0 := 0; m0 < m; m0 += rows {
			r := min(rows, m-m0)
			d.dyH(op, g, dy, dyh, m0, r)
			d.gemmH(op, false, false, k, r, g.OutC, wh, k, dyh, g.OutC, 0, d.machine.Offset(dx, 4*m0*k), k)
		}
		return
	}
	dcol, ok := d.need(op, &d.convTile, 4*rows*k)
	if !ok {
		return
	}
	d.check(op, d.ops.Fill(dx, g.InLen(), 0))
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		d.dyH(op, g, dy, dyh, m0, r)
		d.gemmH(op, false, false, k, r, g.OutC, wh, k, dyh, g.OutC, 0, dcol, k)
		d.check(op, d.ops.Col2Vol(g, dcol, dx, m0, r))
	}
}
