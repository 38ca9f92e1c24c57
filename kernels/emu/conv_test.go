//go:build cgo

package emu

import (
	"fmt"
	"testing"

	"github.com/voxtrain/voxtrain/cpu/kern"
	"github.com/voxtrain/voxtrain/internal/geom"
)

// vol2colRef is the plain vol2col: rows [m0, m0+rows) of the matrix.
func vol2colRef(g geom.Conv, x []float32, m0, rows int) []float32 {
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	k := g.PatchLen()
	col := make([]float32, rows*k)
	for r := 0; r < rows; r++ {
		m := m0 + r
		n, od, oh, ow := m/(oD*oH*oW), m/(oH*oW)%oD, m/oW%oH, m%oW
		for kd := 0; kd < g.KD; kd++ {
			for kh := 0; kh < g.KH; kh++ {
				for kw := 0; kw < g.KW; kw++ {
					id, ih, iw := od*g.SD-g.PD+kd, oh*g.SH-g.PH+kh, ow*g.SW-g.PW+kw
					if id < 0 || id >= g.InD || ih < 0 || ih >= g.InH || iw < 0 || iw >= g.InW {
						continue
					}
					src := (((n*g.InD+id)*g.InH+ih)*g.InW + iw) * g.InC
					dst := r*k + ((kd*g.KH+kh)*g.KW+kw)*g.InC
					copy(col[dst:dst+g.InC], x[src:src+g.InC])
				}
			}
		}
	}
	return col
}

// TestConvVol2ColCol2Vol runs the three convolution passes the way package
// gpu will — vol2col / col2vol tiles around a GEMM, here done in Go in
// float64 — and compares them with package kern's reference convolutions.
//
// Tolerances: vol2col is a copy (bit-exact). Forward and backward-weight
// GEMMs run in float64 in the reference's k order on exact vol2col data,
// so they agree with the float64 references to float32 rounding (1e-6
// relative). Backward-data rounds each dcol entry to float32 (as cuBLAS's
// output would be) and col2vol adds up to KD·KH·KW of them in float32:
// |error| <= 27 terms · 2⁻²⁴ · Σ|terms| ~ 1e-5 for these magnitudes, so
// 2e-5 + 1e-5·|ref|.
func TestConvVol2ColCol2Vol(t *testing.T) {
	geoms := []struct {
		name string
		g    geom.Conv
	}{
		{"3x3x3 stride 1 pad 1", geom.Conv{N: 2, InD: 4, InH: 5, InW: 3, InC: 3, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}},
		{"3x3x3 stride 2 pad 1 (downsampling)", geom.Conv{N: 2, InD: 5, InH: 6, InW: 7, InC: 2, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1}},
		{"anisotropic 1x3x3 stride (1,2,2)", geom.Conv{N: 1, InD: 3, InH: 7, InW: 6, InC: 2, OutC: 2, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PD: 0, PH: 1, PW: 1}},
		{"2x2x2 stride 2 (ConvTranspose3d's adjoint), odd input", geom.Conv{N: 2, InD: 5, InH: 4, InW: 6, InC: 3, OutC: 2, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}},
		{"1x1x1 head", geom.Conv{N: 2, InD: 3, InH: 4, InW: 5, InC: 4, OutC: 3, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}},
		// Channel counts that are multiples of 4 take the kernels' 16-byte path.
		{"3x3x3 stride 1 pad 1, 8 channels", geom.Conv{N: 2, InD: 4, InH: 5, InW: 3, InC: 8, OutC: 4, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}},
		{"3x3x3 stride 2 pad 1, 4 channels", geom.Conv{N: 2, InD: 5, InH: 6, InW: 7, InC: 4, OutC: 3, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1}},
		{"anisotropic 1x3x3 stride (1,2,2), 4 channels", geom.Conv{N: 1, InD: 3, InH: 7, InW: 6, InC: 4, OutC: 2, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PD: 0, PH: 1, PW: 1}},
		{"2x2x2 stride 2 (ConvTranspose3d's adjoint), 12 channels", geom.Conv{N: 2, InD: 5, InH: 4, InW: 6, InC: 12, OutC: 2, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}},
	}
	r := rng(20)
	for gi, tc := range geoms {
		g := tc.g
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		k := g.PatchLen()
		oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
		rowsTotal := g.N * oD * oH * oW
		inLen := g.InLen()
		x := uniform(r, inLen, -1, 1)
		w := uniform(r, g.OutC*k, -1, 1)
		dy := uniform(r, rowsTotal*g.OutC, -1, 1)
		for _, tile := range []int{rowsTotal, 37, 1 + gi} {
			label := fmt.Sprintf("%s, %d-row tiles", tc.name, tile)
			xb := buf(t, x)
			colb := scratch(t, 4*tile*k)
			colh := scratch(t, 2*tile*k)
			dcolb := scratch(t, 4*tile*k)
			dxb := scratch(t, 4*inLen)
			must(t, ops.Fill(dxb, inLen, 0))
			y := make([]float32, rowsTotal*g.OutC)
			dw := make([]float64, g.OutC*k)
			colMax := 0.0
			for m0 := 0; m0 < rowsTotal; m0 += tile {
				rows := min(tile, rowsTotal-m0)
				must(t, ops.Vol2Col(g, xb, colb, m0, rows))
				col := colb.F32()[:rows*k]
				want := vol2colRef(g, x, m0, rows)
				for i := range col {
					if col[i] != want[i] {
						t.Fatalf("%s: vol2col rows [%d,%d) element %d = %v, want %v", label, m0, m0+rows, i, col[i], want[i])
					}
					colMax = max(colMax, float64(abs32(col[i])))
				}
				// The bf16 matrix is the float32 one rounded.
				must(t, ops.Vol2ColBF16(g, xb, colh, m0, rows))
				for i, h := range colh.U16()[:rows*k] {
					if w := bf16Ref(want[i]); h != w {
						t.Fatalf("%s: vol2col_bf16 rows [%d,%d) element %d = %#04x, want %#04x (bf16 of %v)", label, m0, m0+rows, i, h, w, want[i])
					}
				}
				// y = col · wᵀ and dw += dyᵀ · col (cuBLAS's part).
				for rr := 0; rr < rows; rr++ {
					for co := 0; co < g.OutC; co++ {
						var s float64
						for kk := 0; kk < k; kk++ {
							s += float64(col[rr*k+kk]) * float64(w[co*k+kk])
						}
						y[(m0+rr)*g.OutC+co] = float32(s)
						gy := float64(dy[(m0+rr)*g.OutC+co])
						for kk := 0; kk < k; kk++ {
							dw[co*k+kk] += gy * float64(col[rr*k+kk])
						}
					}
				}
				// dcol = dy · w, then col2vol.
				dcol := make([]float32, rows*k)
				for rr := 0; rr < rows; rr++ {
					for kk := 0; kk < k; kk++ {
						var s float64
						for co := 0; co < g.OutC; co++ {
							s += float64(dy[(m0+rr)*g.OutC+co]) * float64(w[co*k+kk])
						}
						dcol[rr*k+kk] = float32(s)
					}
				}
				dcolb.SetF32(dcol)
				must(t, ops.Col2Vol(g, dcolb, dxb, m0, rows))
			}
			t.Logf("kernel vol2col vs plain Go vol2col (%s): bit-exact over %d rows × %d columns (max |x| %.2f); vol2col_bf16 = its bf16 rounding", label, rowsTotal, k, colMax)

			yRef := make([]float32, len(y))
			kern.Conv3DForwardRef(g, x, w, nil, yRef)
			compare(t, "vol2col (+GEMM)", "kern.Conv3DForwardRef ("+label+")", y, yRef, 1e-6, 1e-6)

			dwRef := make([]float32, len(dw))
			kern.Conv3DBackwardWeightRef(g, x, dy, dwRef, nil)
			dw32 := make([]float32, len(dw))
			for i, v := range dw {
				dw32[i] = float32(v)
			}
			compare(t, "vol2col (+GEMM, weight gradient)", "kern.Conv3DBackwardWeightRef ("+label+")", dw32, dwRef, 1e-6, 1e-6)

			dxRef := make([]float32, inLen)
			kern.Conv3DBackwardDataRef(g, dy, w, dxRef)
			compare(t, "col2vol (GEMM+)", "kern.Conv3DBackwardDataRef ("+label+")", dxb.F32(), dxRef, 2e-5, 1e-5)
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func TestConvArgumentErrors(t *testing.T) {
	g := geom.Conv{N: 1, InD: 3, InH: 3, InW: 3, InC: 1, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	b := scratch(t, 4*27*27)
	if err := ops.Vol2Col(g, b, b, 20, 10); err == nil {
		t.Error("rows past the output accepted")
	}
	bad := g
	bad.KD = 0
	if err := ops.Col2Vol(bad, b, b, 0, 1); err == nil {
		t.Error("invalid geometry accepted")
	}
}

// TestConvUnalignedFallback: with 4·k channels the kernels move 16 bytes
// at a time, but only where every pointer is 16-byte aligned; views offset
// by 4 bytes take the scalar path and must give the same bits.
func TestConvUnalignedFallback(t *testing.T) {
	g := geom.Conv{N: 1, InD: 4, InH: 3, InW: 5, InC: 8, OutC: 2, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
	k := g.PatchLen()
	rows := g.OutVoxels()
	inLen := g.InLen()
	r := rng(21)
	x := uniform(r, inLen, -1, 1)
	dcol := uniform(r, rows*k, -1, 1)
	run := func(off int) (col, dx []float32) {
		xb := buf(t, append(make([]float32, off), x...))
		dcolb := buf(t, append(make([]float32, off), dcol...))
		colb := scratch(t, 4*(off+rows*k))
		dxb := scratch(t, 4*(off+inLen))
		xv, dcolv := launcher.Offset(xb, 4*off), launcher.Offset(dcolb, 4*off)
		colv, dxv := launcher.Offset(colb, 4*off), launcher.Offset(dxb, 4*off)
		must(t, ops.Fill(dxv, inLen, 0))
		must(t, ops.Vol2Col(g, xv, colv, 0, rows))
		must(t, ops.Col2Vol(g, dcolv, dxv, 0, rows))
		return colb.F32()[off:], dxb.F32()[off:]
	}
	col16, dx16 := run(0)
	col4, dx4 := run(1)
	for i := range col16 {
		if col16[i] != col4[i] {
			t.Fatalf("vol2col element %d: %v aligned, %v unaligned", i, col16[i], col4[i])
		}
	}
	for i := range dx16 {
		if dx16[i] != dx4[i] {
			t.Fatalf("col2vol element %d: %v aligned, %v unaligned", i, dx16[i], dx4[i])
		}
	}
	t.Logf("vol2col and col2vol with %d channels: 16-byte path == scalar path (views offset by 4 bytes), bit for bit", g.InC)
}
