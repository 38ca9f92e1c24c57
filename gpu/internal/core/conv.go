package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// The convolutions are GEMMs over the vol2col matrix of the input: row m
// is output voxel m (flat n, od, oh, ow), column kk = (kd, kh, kw, ci), so
// with K = KD·KH·KW·InC and the weight W (OutC × K, row-major — nn's
// (O, kD, kH, kW, I) layout):
//
//	forward          Y (M × OutC)  = col · Wᵀ
//	backward-weight  dW (OutC × K) = Σ over tiles dYᵀ · col
//	backward-data    dcol          = dY · W, then col2vol adds it into dx
//
// The matrix is never built whole (for 128³ voxels and K = 32·27 it would
// be 7 GB): it is built a tile of rows at a time into a workspace of
// Options.ConvWorkspace bytes, and each tile feeds one GEMM. A transposed
// convolution (nn.ConvTransposeForward) is Conv3DBackwardData of its
// adjoint geometry and goes through the same code.
//
// cuBLAS is column-major: a row-major r×c matrix is its c×r transpose. So
// each product above is issued transposed — C_cm = op(A)·op(B) with the
// operands' roles swapped — see gemmYT, gemmDW and gemmDcol.

// pointwise reports whether g is a 1×1×1 convolution with stride 1 and no
// padding, whose vol2col matrix is the input itself.
func pointwise(g geom.Conv) bool {
	return g.KD == 1 && g.KH == 1 && g.KW == 1 && g.SD == 1 && g.SH == 1 && g.SW == 1 &&
		g.PD == 0 && g.PH == 0 && g.PW == 0
}

func (d *Device[B]) checkGeom(op string, g geom.Conv) {
	if err := g.Validate(); err != nil {
		panic(fmt.Sprintf("%s.%s: %v", d.prefix, op, err))
	}
	k, m := g.PatchLen(), g.OutVoxels()
	const lim = 1<<31 - 1
	if int64(k)*int64(g.OutC) > lim || int64(m)*int64(max(g.OutC, g.InC)) > lim ||
		int64(g.N)*int64(g.InD*g.InH*g.InW)*int64(g.InC) > lim {
		panic(fmt.Sprintf("%s.%s: geometry %+v exceeds the kernels' and cuBLAS's int32 indexing", d.prefix, op, g))
	}
}

// gemm issues one GEMM, recording a backend failure.
func (d *Device[B]) gemm(op string, ta, tb bool, m, n, k int, alpha float32, a B, lda int, b B, ldb int, beta float32, c B, ldc int) {
	if err := d.machine.Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); err != nil {
		d.fail(op, fmt.Errorf("GEMM %s%s m=%d n=%d k=%d: %w", tr(ta), tr(tb), m, n, k, err))
	}
}

func tr(t bool) string {
	if t {
		return "T"
	}
	return "N"
}

// gemmYT computes a tile of Y (rows × OutC, row-major at y) from its
// vol2col rows (rows × K at col): Yᵀ(OutC × rows) = W(OutC × K)·colᵀ,
// where W's row-major memory is the column-major K × OutC matrix Wᵀ.
func (d *Device[B]) gemmYT(op string, g geom.Conv, k, rows int, w, col, y B) {
	d.gemm(op, true, false, g.OutC, rows, k, 1, w, k, col, k, 0, y, g.OutC)
}

// gemmDW accumulates dW (OutC × K, row-major) += dY_tileᵀ·col_tile:
// dWᵀ(K × OutC) = colᵀ(K × rows)·dY_tile(rows × OutC), the last being the
// transpose of dY's column-major OutC × rows view.
func (d *Device[B]) gemmDW(op string, g geom.Conv, k, rows int, col, dy, dw B, beta float32) {
	d.gemm(op, false, true, k, g.OutC, rows, 1, col, k, dy, g.OutC, beta, dw, k)
}

// gemmDcol computes dcol (rows × K, row-major) = dY_tile·W:
// dcolᵀ(K × rows) = Wᵀ(K × OutC)·dY_tileᵀ(OutC × rows).
func (d *Device[B]) gemmDcol(op string, g geom.Conv, k, rows int, w, dy, dcol B) {
	d.gemm(op, false, false, k, rows, g.OutC, 1, w, k, dy, g.OutC, 0, dcol, k)
}

// tileRows returns the rows per vol2col tile and a workspace for them.
func (d *Device[B]) tileRows(op string, g geom.Conv) (rows int, ws B, ok bool) {
	rows = d.rowsPerTile(g)
	ws, ok = d.need(op, &d.convTile, 4*rows*g.PatchLen())
	return rows, ws, ok
}

// rowsPerTile returns the rows of the vol2col matrix built at a time: as
// many as fit in Options.ConvWorkspace as float32.
func (d *Device[B]) rowsPerTile(g geom.Conv) int {
	m := g.OutVoxels()
	rows := kernels.Vol2ColTileRows(g, d.opt.ConvWorkspace)
	if rows < m && rows > 32 {
		// Whole multiples of 32 rows keep every tile's GEMM operands
		// 128-byte aligned, which cuBLAS's tensor-core kernels prefer.
		rows -= rows % 32
	}
	return rows
}

// Conv3DForward computes y = conv(x, w) + b (b may be nil). x and y may
// be bf16 activations, or activation gradients (the transposed
// convolution's backward: dy in, dx out).
func (d *Device[B]) Conv3DForward(g geom.Conv, x, w, b, y nn.Tensor) {
	const op = "Conv3DForward"
	d.begin(op)
	d.checkGeom(op, g)
	xt := d.shaped(op, x, g.InShape())
	wp := d.mustShape(op, w, g.WeightShape())
	yt := d.shaped(op, y, g.OutShape())
	var bp B
	if b != nil {
		bp = d.mustLen(op, b, g.OutC)
	}
	if d.convDNN(op, dnn.Forward, g, opnd(xt), wp, opnd(yt)) {
		if b != nil {
			d.addBias(op, yt, bp)
		}
		return
	}
	if d.opt.BF16 {
		// bf16 operands (activations) only exist in bf16 mode.
		var bias *B
		if b != nil {
			bias = &bp
		}
		d.forwardBF16(op, g, opnd(xt), wp, opnd(yt), bias)
		return
	}
	xp, yp := xt.ptr, yt.ptr
	k, m := g.PatchLen(), g.OutVoxels()
	if pointwise(g) {
		d.gemmYT(op, g, k, m, wp, xp, yp)
	} else {
		rows, ws, ok := d.tileRows(op, g)
		if !ok {
			return
		}
		for m0 := 0; m0 < m; m0 += rows {
			r := min(rows, m-m0)
			d.check(op, d.ops.Vol2Col(g, xp, ws, m0, r))
			d.gemmYT(op, g, k, r, wp, ws, d.machine.Offset(yp, 4*m0*g.OutC))
		}
	}
	if b != nil {
		d.check(op, d.ops.AddChannelBias(yp, bp, m, g.OutC))
	}
}

// Conv3DBackwardData computes dx from dy (overwriting dx). dy and dx may
// be bf16 activations (the transposed convolution's forward,
// nn.ConvTransposeForward) or activation gradients (a block's input
// gradient, from a bf16 dy or a head's float32 dlogits).
func (d *Device[B]) Conv3DBackwardData(g geom.Conv, dy, w, dx nn.Tensor) {
	const op = "Conv3DBackwardData"
	d.begin(op)
	d.checkGeom(op, g)
	dyt := d.shaped(op, dy, g.OutShape())
	wp := d.mustShape(op, w, g.WeightShape())
	dxt := d.shaped(op, dx, g.InShape())
	if d.convDNN(op, dnn.BackwardData, g, opnd(dxt), wp, opnd(dyt)) {
		return
	}
	if d.opt.BF16 {
		d.backwardDataBF16(op, g, opnd(dyt), wp, opnd(dxt))
		return
	}
	dyp, dxp := dyt.ptr, dxt.ptr
	k, m := g.PatchLen(), g.OutVoxels()
	if pointwise(g) {
		d.gemmDcol(op, g, k, m, wp, dyp, dxp)
		return
	}
	rows, ws, ok := d.tileRows(op, g)
	if !ok {
		return
	}
	d.check(op, d.ops.Fill(dxp, g.InLen(), 0))
	for m0 := 0; m0 < m; m0 += rows {
		r := min(rows, m-m0)
		d.gemmDcol(op, g, k, r, wp, d.machine.Offset(dyp, 4*m0*g.OutC), ws)
		d.check(op, d.ops.Col2Vol(g, ws, dxp, m0, r))
	}
}

// Conv3DBackwardWeight computes dw and, when db is not nil, db
// (overwriting both). Tiles accumulate into dw in a fixed order, so the
// result is the same from run to run. x and dy may be bf16 activations or
// activation gradients (in the transposed convolution's backward,
// nn.ConvTransposeBackward, dy is its input activation and x the output's
// gradient); a bf16 dy's bias gradient is summed from the bf16 values.
func (d *Device[B]) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db nn.Tensor) {
	const op = "Conv3DBackwardWeight"
	d.begin(op)
	d.checkGeom(op, g)
	xt := d.shaped(op, x, g.InShape())
	dyt := d.shaped(op, dy, g.OutShape())
	dwp := d.mustShape(op, dw, g.WeightShape())
	var dbp B
	if db != nil {
		dbp = d.mustLen(op, db, g.OutC)
	}
	k, m := g.PatchLen(), g.OutVoxels()
	if d.convDNN(op, dnn.BackwardFilter, g, opnd(xt), dwp, opnd(dyt)) {
		// cuDNN computed it
	} else if d.opt.BF16 {
		d.backwardWeightBF16(op, g, opnd(xt), opnd(dyt), dwp)
	} else {
		xp, dyp := xt.ptr, dyt.ptr
		if pointwise(g) {
			d.gemmDW(op, g, k, m, xp, dyp, dwp, 0)
		} else {
			rows, ws, ok := d.tileRows(op, g)
			if !ok {
				return
			}
			for m0 := 0; m0 < m; m0 += rows {
				r := min(rows, m-m0)
				d.check(op, d.ops.Vol2Col(g, xp, ws, m0, r))
				beta := float32(1)
				if m0 == 0 {
					beta = 0
				}
				d.gemmDW(op, g, k, r, ws, d.machine.Offset(dyp, 4*m0*g.OutC), dwp, beta)
			}
		}
	}
	if db != nil {
		d.channelSum(op, dyt, dbp, g.OutC)
	}
}
