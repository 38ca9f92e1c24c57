package augment

import "math"

// The spatial pass: one resampling of the output patch from the source
// through the composed coordinate map (crop, rotation, scaling, mirroring,
// quarter turns, elastic field). Only the patch's voxels are computed; the
// volume is never transformed as a whole.
//
// Along an output row (fixed D and H index, W index x running) the affine
// part of the source coordinate is base + x·col. The elastic field is
// trilinear between control points, so along the row it is piecewise
// linear in x with breaks at the W nodes: the whole map is piecewise
// linear, s(x) = a_k + x·b_k on segment k. So each row costs a few setup
// operations per control point, and each voxel three integer additions for
// its coordinate (32.32 fixed point), whatever the transform. A row is done
// in passes: coordinates and weights, then one gather per image channel,
// then the label.

// rowSeg is one piece of a row on which the source coordinate is a + x·b.
type rowSeg struct {
	x0, x1 int      // output W indices [x0, x1)
	a, b   [3]int64 // 32.32 fixed point
}

// region is the source as the sampler sees it: arrays of shape d×h×w whose
// element (0, 0, 0) is voxel origin of the full volume. Coordinates are
// computed and floored in full-volume space and the origin subtracted from
// the integer index afterwards, so a sub-box gives the same bytes as the
// whole volume.
type region struct {
	img     [][]float32
	lab     []uint8
	d, h, w int
	origin  [3]int
}

// spatialScratch is one worker's scratch for the spatial pass.
type spatialScratch struct {
	segs  []rowSeg     // the current row's segments
	nodes [3][]float64 // field at the W nodes of a row
	disp  [][3]float64 // L·field at the W nodes
	row   rowScratch
}

// rowScratch holds one row's coordinates between the passes of the
// samplers.
type rowScratch struct {
	idx        []int32 // linear index of the (0,0,0) tap, or -1 at the edge
	lab        []int32 // linear index of the nearest voxel
	tz, ty, tx []float32
	fl         [][3]int32 // floor coordinates (cubic only)
	edge       []edgeVoxel
}

// edgeVoxel is an output voxel whose taps may fall outside the region.
type edgeVoxel struct{ k, iz, iy, ix int }

func (r *rowScratch) grow(n int) {
	if cap(r.idx) < n {
		r.idx, r.lab = make([]int32, n), make([]int32, n)
		r.tz, r.ty, r.tx = make([]float32, n), make([]float32, n), make([]float32, n)
		r.fl = make([][3]int32, n)
	}
}

// Input coordinates are 32.32 fixed point: exact integer steps along a row
// (incremental, no drift), floor is a shift and the fraction a mask, and
// the bytes cannot depend on the machine's floating-point details.
const fixOne = 1 << 32

func toFixed(v float64) int64 { return int64(math.Round(v * fixOne)) }

// spatialPlanes runs the spatial pass for output planes [lo, hi), row by
// row. (Tiling the output into blocks, so a block's source footprint stays
// in cache, measured no faster.)
func spatialPlanes(s *Plan, src *region, dst [][]float32, dlab []float32, border, lborder float32, cubic bool, sc *spatialScratch, lo, hi int) {
	ph, pw := s.Patch[1], s.Patch[2]
	aligned := !s.exact && !cubic && axisAligned(s)
	for z := lo; z < hi; z++ {
		for y := 0; y < ph; y++ {
			segs := rowSegments(sc.segs[:0], s, z, y, sc)
			sc.segs = segs
			off := (z*ph + y) * pw
			switch {
			case s.exact:
				sampleRowExact(&segs[0], 0, pw, src, dst, dlab, off, border, lborder)
			case cubic:
				sampleRowCubic(segs, 0, pw, src, dst, dlab, off, border, lborder, &sc.row)
			case aligned:
				if z == lo && y == 0 {
					alignedColumns(&segs[0], pw, src, &sc.row)
				}
				sampleRowAligned(&segs[0], pw, src, dst, dlab, off, border, lborder, &sc.row)
			default:
				sampleRowLinear(segs, 0, pw, src, dst, dlab, off, border, lborder, &sc.row)
			}
		}
	}
}

// rowSegments appends the pieces of output row (z, y) to segs.
func rowSegments(segs []rowSeg, s *Plan, z, y int, sc *spatialScratch) []rowSeg {
	var half [3]float64
	for i := range 3 {
		half[i] = float64(s.Patch[i]-1) / 2
	}
	uz, uy, ux := float64(z)-half[0], float64(y)-half[1], -half[2]
	var base, col [3]float64
	for i := range 3 {
		l := &s.lin[i]
		base[i] = s.center[i] + float64(l[0]*uz) + float64(l[1]*uy) + float64(l[2]*ux)
		col[i] = l[2]
	}
	pw := s.Patch[2]
	if !s.grid.active {
		return append(segs, rowSeg{x0: 0, x1: pw,
			a: [3]int64{toFixed(base[0]), toFixed(base[1]), toFixed(base[2])},
			b: [3]int64{toFixed(col[0]), toFixed(col[1]), toFixed(col[2])}})
	}
	g := &s.grid
	n := g.n[2]
	for c := range 3 {
		if cap(sc.nodes[c]) < n {
			sc.nodes[c] = make([]float64, n)
		}
		sc.nodes[c] = sc.nodes[c][:n]
	}
	if cap(sc.disp) < n {
		sc.disp = make([][3]float64, n)
	}
	disp := sc.disp[:n]
	g.rowNodes(&sc.nodes, z, y)
	for k := range disp {
		e := [3]float64{sc.nodes[0][k], sc.nodes[1][k], sc.nodes[2][k]}
		for i := range 3 {
			l := &s.lin[i]
			disp[k][i] = float64(l[0]*e[0]) + float64(l[1]*e[1]) + float64(l[2]*e[2])
		}
	}
	step := g.step[2]
	x0 := 0
	for k := 0; k < n-1; k++ {
		x1 := pw
		if k < n-2 {
			x1 = min(pw, int(math.Ceil(float64(k+1)*step)))
		}
		if x1 <= x0 {
			continue
		}
		tk := float64(k) * step
		var sg rowSeg
		sg.x0, sg.x1 = x0, x1
		for i := range 3 {
			d := (disp[k+1][i] - disp[k][i]) / step
			sg.a[i] = toFixed(base[i] + disp[k][i] - float64(tk*d))
			sg.b[i] = toFixed(col[i] + d)
		}
		segs = append(segs, sg)
		x0 = x1
	}
	return segs
}

// rowCoords is the first pass of a row: per output voxel the region index
// of its first trilinear tap (or -1 with an edge entry where a tap may
// fall outside the region), the nearest voxel's index, and the weights.
// The origin is subtracted from the floored integer coordinates, so a
// sub-box gives the same bytes as the whole volume.
func rowCoords(segs []rowSeg, xlo, xhi int, src *region, rs *rowScratch, keepFloor bool) {
	d, h, w := src.d, src.h, src.w
	oz, oy, ox := src.origin[0], src.origin[1], src.origin[2]
	hw := h * w
	n := xhi - xlo
	rs.grow(n)
	idx, lab := rs.idx[:n], rs.lab[:n]
	tzs, tys, txs := rs.tz[:n], rs.ty[:n], rs.tx[:n]
	rs.edge = rs.edge[:0]
	for si := range segs {
		sg := &segs[si]
		x0, x1 := max(sg.x0, xlo), min(sg.x1, xhi)
		sz := sg.a[0] + int64(x0)*sg.b[0]
		sy := sg.a[1] + int64(x0)*sg.b[1]
		sx := sg.a[2] + int64(x0)*sg.b[2]
		for k := x0 - xlo; k < x1-xlo; k++ {
			iz, iy, ix := int(sz>>32)-oz, int(sy>>32)-oy, int(sx>>32)-ox
			fz, fy, fx := uint32(sz), uint32(sy), uint32(sx)
			tzs[k] = float32(fz) * 0x1p-32
			tys[k] = float32(fy) * 0x1p-32
			txs[k] = float32(fx) * 0x1p-32
			if keepFloor {
				rs.fl[k] = [3]int32{int32(iz), int32(iy), int32(ix)}
			}
			if uint(iz) < uint(d-1) && uint(iy) < uint(h-1) && uint(ix) < uint(w-1) {
				i := (iz*h+iy)*w + ix
				idx[k] = int32(i)
				lab[k] = int32(i + int(fz>>31)*hw + int(fy>>31)*w + int(fx>>31))
			} else {
				idx[k] = -1
				rs.edge = append(rs.edge, edgeVoxel{k, iz, iy, ix})
			}
			sz += sg.b[0]
			sy += sg.b[1]
			sx += sg.b[2]
		}
	}
}
