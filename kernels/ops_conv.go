// Launch recipes of conv.cu: vol2col and col2vol, the data movement around
// the convolutions' cuBLAS GEMMs.

package kernels

import (
	"fmt"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// Vol2ColTileRows returns how many rows of the vol2col matrix of g fit in
// maxBytes (at least 1, at most all of them): the tile size for building
// the matrix a slab at a time.
func Vol2ColTileRows(g geom.Conv, maxBytes int) int {
	k := g.PatchLen()
	total := g.OutVoxels()
	return max(1, min(total, maxBytes/(4*k)))
}

// Col2VolRange returns the input voxels [lo, lo+count) (flat (n, d, h, w)
// order) that rows [m0, m0+rows) of g's vol2col matrix read: whole input
// planes from the first tile row's first to the last row's last.
func Col2VolRange(g geom.Conv, m0, rows int) (lo, count int) {
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	plane := oH * oW
	first, last := m0/plane, (m0+rows-1)/plane // flat (n, od)
	n0, od0 := first/oD, first%oD
	n1, od1 := last/oD, last%oD
	d0 := min(max(od0*g.SD-g.PD, 0), g.InD-1)
	d1 := max(min(od1*g.SD-g.PD+g.KD-1, g.InD-1), 0)
	inPlane := g.InH * g.InW
	lo = (n0*g.InD + d0) * inPlane
	hi := (n1*g.InD + d1 + 1) * inPlane
	return lo, max(hi-lo, 0)
}

// convArgs checks g and a tile and returns the geometry arguments shared by
// vol2col and col2vol.
func convArgs(op string, g geom.Conv, m0, rows int) ([]any, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("kernels.%s: %w", op, err)
	}
	total := g.OutVoxels()
	if m0 < 0 || rows <= 0 || m0+rows > total {
		return nil, fmt.Errorf("kernels.%s: rows [%d, %d) outside the %d output voxels", op, m0, m0+rows, total)
	}
	k := g.PatchLen()
	if err := checkSizes(op, []int{g.N, g.InD, g.InH, g.InW, g.InC}, []int{rows, k}, []int{total}); err != nil {
		return nil, err
	}
	return []any{i32(g.InD), i32(g.InH), i32(g.InW), i32(g.InC), i32(g.KD), i32(g.KH), i32(g.KW),
		i32(g.SD), i32(g.SH), i32(g.SW), i32(g.PD), i32(g.PH), i32(g.PW), i32(m0), i32(rows)}, nil
}

// Vol2Col writes rows [m0, m0+rows) of the vol2col matrix of x (g's input)
// into col (rows × K floats, K = KD·KH·KW·InC, columns in (kd, kh, kw, ci)
// order); see conv.cu. The GEMMs around it are cuBLAS's.
func (o Ops[B]) Vol2Col(g geom.Conv, x, col B, m0, rows int) error {
	geo, err := convArgs("Vol2Col", g, m0, rows)
	if err != nil {
		return err
	}
	work := rows * g.PatchLen()
	if g.InC%4 == 0 {
		work = rows * g.InC / 4 // a thread per row and group of 4 channels
	}
	return o.launch1(kVol2Col, work, append([]any{x, col}, geo...)...)
}

// Vol2ColBF16 is Vol2Col writing bfloat16 (col: rows × K uint16s,
// rounded to nearest even): the operand of bf16 mixed-precision GEMMs.
func (o Ops[B]) Vol2ColBF16(g geom.Conv, x, col B, m0, rows int) error {
	geo, err := convArgs("Vol2ColBF16", g, m0, rows)
	if err != nil {
		return err
	}
	work := rows * g.InC
	if g.InC%4 == 0 {
		work /= 4
	}
	return o.launch1(kVol2ColBF16, work, append([]any{x, col}, geo...)...)
}

// Col2Vol adds to dx (g's input shape) the adjoint of Vol2Col applied to
// dcol, rows [m0, m0+rows) of the matrix. Zero dx before the first tile.
func (o Ops[B]) Col2Vol(g geom.Conv, dcol, dx B, m0, rows int) error {
	geo, err := convArgs("Col2Vol", g, m0, rows)
	if err != nil {
		return err
	}
	lo, count := Col2VolRange(g, m0, rows)
	args := append([]any{dcol, dx}, geo...)
	args = append(args, i32(lo), i32(count))
	work := count * g.InC
	if g.InC%4 == 0 {
		work /= 4 // a thread per voxel and group of 4 channels
	}
	return o.launch1(kCol2Vol, work, args...)
}

// Vol2ColBF16X is Vol2ColBF16 for a bfloat16 x (g's input, uint16s).
func (o Ops[B]) Vol2ColBF16X(g geom.Conv, x, col B, m0, rows int) error {
	geo, err := convArgs("Vol2ColBF16X", g, m0, rows)
	if err != nil {
		return err
	}
	work := rows * g.InC
	if g.InC%4 == 0 {
		work /= 4
	}
	return o.launch1(kVol2ColBF16X, work, append([]any{x, col}, geo...)...)
}

// Col2VolBF16 is Col2Vol into a bfloat16 dx (uint16s), which gets each
// element rounded once from the float32 sum Col2Vol would leave in a
// float32 dx after the last tile. Tiles run in order; a voxel's partial
// sum waits in a float32 carry until no later tile reaches it: of this
// tile's voxels (Col2VolRange), those below carried continue the sums the
// previous tile left in cin (indexed from this tile's first voxel), those
// from done on (the next tile's first voxel; g's input voxels for the
// last tile) go to cout (indexed from done), the rest are rounded into
// dx. Zero dx before the first tile; cin and cout need
// Col2VolCarry(g, rows)·InC floats each.
func (o Ops[B]) Col2VolBF16(g geom.Conv, dcol, dx, cin, cout B, m0, rows, carried, done int) error {
	geo, err := convArgs("Col2VolBF16", g, m0, rows)
	if err != nil {
		return err
	}
	lo, count := Col2VolRange(g, m0, rows)
	if carried > lo+count || done < lo {
		return fmt.Errorf("kernels.Col2VolBF16: carry up to voxel %d, final below %d, for a tile reaching voxels [%d, %d)", carried, done, lo, lo+count)
	}
	args := append([]any{dcol, dx, cin, cout}, geo...)
	args = append(args, i32(lo), i32(count), i32(min(max(carried, lo), lo+count)), i32(min(done, lo+count)))
	work := count * g.InC
	if g.InC%4 == 0 {
		work /= 4
	}
	return o.launch1(kCol2VolBF16, work, args...)
}

// Col2VolCarry returns the most voxels a tile of Col2VolBF16 leaves in its
// carry for the next, with tiles of rows rows of g's vol2col matrix: what
// its cin and cout hold (times InC floats).
func Col2VolCarry(g geom.Conv, rows int) int {
	m := g.OutVoxels()
	rows = max(rows, 1)
	most := 0
	for m0 := 0; m0+rows < m; m0 += rows {
		lo, count := Col2VolRange(g, m0, rows)
		next, _ := Col2VolRange(g, m0+rows, min(rows, m-m0-rows))
		most = max(most, lo+count-next)
	}
	return most
}
