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

// Source coordinates are 32.32 fixed point: exact integer steps along a row
// (incremental, no drift), floor is a shift and the fraction a mask, and
// the bytes cannot depend on the machine's floating-point details.
const fixOne = 1 << 32

func toFixed(v float64) int64 { return int64(math.Round(v * fixOne)) }

// spatialPlanes runs the spatial pass for output planes [lo, hi), row by
// row. (Tiling the output into blocks, so a block's source footprint stays
// in cache, measured no faster.)
func spatialPlanes(s *Sample, src *region, dst [][]float32, dlab []float32, border, lborder float32, cubic bool, sc *spatialScratch, lo, hi int) {
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

// axisAligned reports whether s's map keeps the axes apart without being
// exact (a scaling, with flips, and no rotation or field): along a row
// only the W coordinate moves, and it moves the same way in every row.
func axisAligned(s *Sample) bool {
	l := &s.lin
	return !s.grid.active && l[0][2] == 0 && l[1][2] == 0 && l[2][0] == 0 && l[2][1] == 0
}

// alignedColumns fills rs with what every row of an axis-aligned sample
// shares: per output W index, the source W index (origin subtracted) in
// rs.lab and its fraction in rs.tx — the values rowCoords computes, from
// the same fixed-point steps.
func alignedColumns(sg *rowSeg, pw int, src *region, rs *rowScratch) {
	rs.grow(pw)
	sx := sg.a[2]
	for k := 0; k < pw; k++ {
		rs.lab[k] = int32(int(sx>>32) - src.origin[2])
		rs.tx[k] = float32(uint32(sx)) * 0x1p-32
		rs.fl[k][2] = int32(uint32(sx) >> 31)
		sx += sg.b[2]
	}
}

// sampleRowAligned is sampleRowLinear for an axis-aligned sample, whose
// row has one source (D, H) position and the W positions alignedColumns
// stored: the same taps and arithmetic, so the same bytes, without
// per-voxel coordinates. The 8-tap formula is written out in both rather
// than shared: as a function Go does not inline it (cost 117 > 80), and
// the call made a rotated 128³ sample 10–19 % slower (BenchmarkSpatial*).
func sampleRowAligned(sg *rowSeg, pw int, src *region, dst [][]float32, dlab []float32, off int, border, lborder float32, rs *rowScratch) {
	d, h, w := src.d, src.h, src.w
	hw := h * w
	iz, iy := int(sg.a[0]>>32)-src.origin[0], int(sg.a[1]>>32)-src.origin[1]
	fz, fy := uint32(sg.a[0]), uint32(sg.a[1])
	tz, ty := float32(fz)*0x1p-32, float32(fy)*0x1p-32
	ixs, txs := rs.lab[:pw], rs.tx[:pw]
	rowIn := uint(iz) < uint(d-1) && uint(iy) < uint(h-1)
	base := (iz*h + iy) * w
	for c, img := range src.img {
		out := dst[c][off : off+pw]
		for k, ix32 := range ixs {
			ix := int(ix32)
			tx := txs[k]
			if !rowIn || uint(ix) >= uint(w-1) {
				out[k] = linearEdge(img, d, h, w, iz, iy, ix, tz, ty, tx, border)
				continue
			}
			p := img[base+ix:][:hw+w+2]
			c00 := p[0] + float32(tx*(p[1]-p[0]))
			c01 := p[w] + float32(tx*(p[w+1]-p[w]))
			c10 := p[hw] + float32(tx*(p[hw+1]-p[hw]))
			c11 := p[hw+w] + float32(tx*(p[hw+w+1]-p[hw+w]))
			c0 := c00 + float32(ty*(c01-c00))
			c1 := c10 + float32(ty*(c11-c10))
			out[k] = c0 + float32(tz*(c1-c0))
		}
	}
	if dlab == nil {
		return
	}
	out := dlab[off : off+pw]
	lab := src.lab
	nb := base + int(fz>>31)*hw + int(fy>>31)*w
	for k, ix32 := range ixs {
		ix := int(ix32)
		if !rowIn || uint(ix) >= uint(w-1) {
			out[k] = nearestEdge(lab, d, h, w, iz, iy, ix, tz, ty, txs[k], lborder)
			continue
		}
		out[k] = float32(lab[nb+ix+int(rs.fl[k][2])])
	}
}

// rowSegments appends the pieces of output row (z, y) to segs.
func rowSegments(segs []rowSeg, s *Sample, z, y int, sc *spatialScratch) []rowSeg {
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

// sampleRowLinear fills output row [off, off+pw): image channels
// trilinear, label nearest (ties up). Coordinates first, then one gather
// per channel and one for the label: each loop keeps few values live.
func sampleRowLinear(segs []rowSeg, xlo, xhi int, src *region, dst [][]float32, dlab []float32, off int, border float32, lborder float32, rs *rowScratch) {
	rowCoords(segs, xlo, xhi, src, rs, false)
	d, h, w := src.d, src.h, src.w
	hw := h * w
	n := xhi - xlo
	idx := rs.idx[:n]
	tzs, tys, txs := rs.tz[:n], rs.ty[:n], rs.tx[:n]
	off += xlo
	for c, img := range src.img {
		out := dst[c][off : off+n]
		for k, i32 := range idx {
			if i32 < 0 {
				continue
			}
			p := img[i32:][:hw+w+2]
			tx, ty, tz := txs[k], tys[k], tzs[k]
			c00 := p[0] + float32(tx*(p[1]-p[0]))
			c01 := p[w] + float32(tx*(p[w+1]-p[w]))
			c10 := p[hw] + float32(tx*(p[hw+1]-p[hw]))
			c11 := p[hw+w] + float32(tx*(p[hw+w+1]-p[hw+w]))
			c0 := c00 + float32(ty*(c01-c00))
			c1 := c10 + float32(ty*(c11-c10))
			out[k] = c0 + float32(tz*(c1-c0))
		}
		for _, e := range rs.edge {
			out[e.k] = linearEdge(img, d, h, w, e.iz, e.iy, e.ix, tzs[e.k], tys[e.k], txs[e.k], border)
		}
	}
	if dlab != nil {
		labelRow(dlab[off:off+n], src, rs, lborder)
	}
}

// labelRow is the label gather of a row whose coordinates are in rs.
func labelRow(out []float32, src *region, rs *rowScratch, lborder float32) {
	lab := src.lab
	for k, i := range rs.lab[:len(out)] {
		if rs.idx[k] >= 0 {
			out[k] = float32(lab[i])
		}
	}
	for _, e := range rs.edge {
		out[e.k] = nearestEdge(lab, src.d, src.h, src.w, e.iz, e.iy, e.ix, rs.tz[e.k], rs.ty[e.k], rs.tx[e.k], lborder)
	}
}

// linearEdge is trilinear sampling where some of the 8 taps may lie
// outside the region; those read the border value.
func linearEdge(img []float32, d, h, w, iz, iy, ix int, tz, ty, tx, border float32) float32 {
	at := func(z, y, x int) float32 {
		if uint(z) < uint(d) && uint(y) < uint(h) && uint(x) < uint(w) {
			return img[(z*h+y)*w+x]
		}
		return border
	}
	// Skip taps whose weight is exactly zero, so an integral coordinate on
	// the last voxel of an axis reads that voxel exactly.
	lerp := func(a, b, t float32) float32 { return a + float32(t*(b-a)) }
	row := func(z, y int) float32 {
		v0 := at(z, y, ix)
		if tx == 0 {
			return v0
		}
		return lerp(v0, at(z, y, ix+1), tx)
	}
	plane := func(z int) float32 {
		r0 := row(z, iy)
		if ty == 0 {
			return r0
		}
		return lerp(r0, row(z, iy+1), ty)
	}
	p0 := plane(iz)
	if tz == 0 {
		return p0
	}
	return lerp(p0, plane(iz+1), tz)
}

// nearestEdge is nearest-neighbour label sampling with bounds checks.
func nearestEdge(lab []uint8, d, h, w, iz, iy, ix int, tz, ty, tx float32, lborder float32) float32 {
	if tz >= 0.5 {
		iz++
	}
	if ty >= 0.5 {
		iy++
	}
	if tx >= 0.5 {
		ix++
	}
	if uint(iz) < uint(d) && uint(iy) < uint(h) && uint(ix) < uint(w) {
		return float32(lab[(iz*h+iy)*w+ix])
	}
	return lborder
}

// cubicWeights are Catmull-Rom (Keys, a = −1/2) weights for taps at
// offsets −1, 0, 1, 2; at t = 0 they are exactly (0, 1, 0, 0).
func cubicWeights(t float32) [4]float32 {
	t2 := float32(t * t)
	t3 := float32(t2 * t)
	return [4]float32{
		float32(-0.5*t3) + t2 - float32(0.5*t),
		float32(1.5*t3) - float32(2.5*t2) + 1,
		float32(-1.5*t3) + float32(2*t2) + float32(0.5*t),
		float32(0.5*t3) - float32(0.5*t2),
	}
}

// sampleRowCubic is sampleRowLinear with Catmull-Rom image interpolation
// (4×4×4 taps).
func sampleRowCubic(segs []rowSeg, xlo, xhi int, src *region, dst [][]float32, dlab []float32, off int, border float32, lborder float32, rs *rowScratch) {
	rowCoords(segs, xlo, xhi, src, rs, true)
	d, h, w := src.d, src.h, src.w
	n := xhi - xlo
	off += xlo
	for c, img := range src.img {
		out := dst[c][off : off+n]
		for k := range out {
			f := rs.fl[k]
			out[k] = cubicAt(img, d, h, w, int(f[0]), int(f[1]), int(f[2]), rs.tz[k], rs.ty[k], rs.tx[k], border)
		}
	}
	if dlab != nil {
		labelRow(dlab[off:off+n], src, rs, lborder)
	}
}

// cubicAt is Catmull-Rom sampling around floor coordinates (iz, iy, ix)
// with fractions (tz, ty, tx); taps outside the region read border.
func cubicAt(img []float32, d, h, w, iz, iy, ix int, tz, ty, tx, border float32) float32 {
	wz, wy, wx := cubicWeights(tz), cubicWeights(ty), cubicWeights(tx)
	inside := uint(iz-1) < uint(d-3) && uint(iy-1) < uint(h-3) && uint(ix-1) < uint(w-3)
	var acc float32
	for a := range 4 {
		var pa float32
		for b := range 4 {
			var rb float32
			if inside {
				r := img[((iz-1+a)*h+iy-1+b)*w+ix-1:][:4]
				rb = float32(wx[0]*r[0]) + float32(wx[1]*r[1]) + float32(wx[2]*r[2]) + float32(wx[3]*r[3])
			} else {
				for e := range 4 {
					z, y, x := iz-1+a, iy-1+b, ix-1+e
					v := border
					if uint(z) < uint(d) && uint(y) < uint(h) && uint(x) < uint(w) {
						v = img[(z*h+y)*w+x]
					}
					rb += float32(wx[e] * v)
				}
			}
			pa += float32(wy[b] * rb)
		}
		acc += float32(wz[a] * pa)
	}
	return acc
}

// sampleRowExact copies one row when the map is a signed permutation with
// integer offsets (crop, flips, quarter turns): no interpolation.
func sampleRowExact(seg *rowSeg, xlo, xhi int, src *region, dst [][]float32, dlab []float32, off int, border float32, lborder float32) {
	d, h, w := src.d, src.h, src.w
	z0, y0, x0 := int(seg.a[0]>>32)-src.origin[0], int(seg.a[1]>>32)-src.origin[1], int(seg.a[2]>>32)-src.origin[2]
	dz, dy, dx := int(seg.b[0]>>32), int(seg.b[1]>>32), int(seg.b[2]>>32)
	if dz == 0 && dy == 0 && (dx == 1 || dx == -1) && uint(z0) < uint(d) && uint(y0) < uint(h) {
		// A plain or mirrored row (crops, flips): bulk copies instead of
		// per-voxel index arithmetic. In-bounds x satisfy 0 ≤ x0+x·dx < w.
		lo, hi := xlo, xhi
		if dx == 1 {
			lo, hi = max(lo, -x0), min(hi, w-x0)
		} else {
			lo, hi = max(lo, x0-w+1), min(hi, x0+1)
		}
		if lo >= hi {
			lo, hi = xlo, xlo
		}
		for c := range src.img {
			fill(dst[c][off+xlo:off+lo], border)
			fill(dst[c][off+hi:off+xhi], border)
		}
		if dlab != nil {
			fill(dlab[off+xlo:off+lo], lborder)
			fill(dlab[off+hi:off+xhi], lborder)
		}
		if lo == hi {
			return
		}
		row := (z0*h + y0) * w
		if dx == 1 {
			a := row + x0 + lo
			for c, img := range src.img {
				copy(dst[c][off+lo:off+hi], img[a:a+hi-lo])
			}
			if dlab != nil {
				out := dlab[off+lo : off+hi]
				in := src.lab[a : a+hi-lo]
				for i := range out {
					out[i] = float32(in[i])
				}
			}
			return
		}
		for c, img := range src.img {
			out := dst[c][off+lo : off+hi]
			in := img[row+x0-(hi-1) : row+x0-lo+1]
			n := len(out)
			for i := range out {
				out[i] = in[n-1-i]
			}
		}
		if dlab != nil {
			out := dlab[off+lo : off+hi]
			in := src.lab[row+x0-(hi-1) : row+x0-lo+1]
			n := len(out)
			for i := range out {
				out[i] = float32(in[n-1-i])
			}
		}
		return
	}
	for x := xlo; x < xhi; x++ {
		z, y, xx := z0+x*dz, y0+x*dy, x0+x*dx
		o := off + x
		if uint(z) < uint(d) && uint(y) < uint(h) && uint(xx) < uint(w) {
			i := (z*h+y)*w + xx
			for c, img := range src.img {
				dst[c][o] = img[i]
			}
			if dlab != nil {
				dlab[o] = float32(src.lab[i])
			}
			continue
		}
		for c := range src.img {
			dst[c][o] = border
		}
		if dlab != nil {
			dlab[o] = lborder
		}
	}
}

// spatialReference is the plain version of the spatial pass, one voxel at a
// time in float64: o -> C + L·(o − h + e(o)), then trilinear with bounds
// checks on every tap. Tests hold the fast path to it.
func spatialReference(s *Sample, src *region, dst [][]float32, dlab []float32, border, lborder float32) {
	p := s.Patch
	var half [3]float64
	for i := range 3 {
		half[i] = float64(p[i]-1) / 2
	}
	at := func(img []float32, z, y, x int) float64 {
		if z >= 0 && z < src.d && y >= 0 && y < src.h && x >= 0 && x < src.w {
			return float64(img[(z*src.h+y)*src.w+x])
		}
		return float64(border)
	}
	for z := 0; z < p[0]; z++ {
		for y := 0; y < p[1]; y++ {
			for x := 0; x < p[2]; x++ {
				u := [3]float64{float64(z) - half[0], float64(y) - half[1], float64(x) - half[2]}
				if s.grid.active {
					e := s.grid.at([3]float64{float64(z), float64(y), float64(x)})
					for i := range u {
						u[i] += e[i]
					}
				}
				var c [3]float64
				for i := range 3 {
					c[i] = s.center[i] - float64(src.origin[i]) + float64(s.lin[i][0]*u[0]) + float64(s.lin[i][1]*u[1]) + float64(s.lin[i][2]*u[2])
				}
				i0 := [3]int{int(floor64(c[0])), int(floor64(c[1])), int(floor64(c[2]))}
				t := [3]float64{c[0] - float64(i0[0]), c[1] - float64(i0[1]), c[2] - float64(i0[2])}
				o := (z*p[1]+y)*p[2] + x
				for ch, img := range src.img {
					v := 0.0
					for dz := range 2 {
						for dy := range 2 {
							for dx := range 2 {
								w8 := weight1(t[0], dz) * weight1(t[1], dy) * weight1(t[2], dx)
								if w8 != 0 {
									v += float64(w8 * at(img, i0[0]+dz, i0[1]+dy, i0[2]+dx))
								}
							}
						}
					}
					dst[ch][o] = float32(v)
				}
				if dlab != nil {
					n := [3]int{}
					for i := range 3 {
						n[i] = i0[i]
						if t[i] >= 0.5 {
							n[i]++
						}
					}
					if n[0] >= 0 && n[0] < src.d && n[1] >= 0 && n[1] < src.h && n[2] >= 0 && n[2] < src.w {
						dlab[o] = float32(src.lab[(n[0]*src.h+n[1])*src.w+n[2]])
					} else {
						dlab[o] = lborder
					}
				}
			}
		}
	}
}

func floor64(x float64) float64 {
	f := float64(int64(x))
	if f > x {
		f--
	}
	return f
}

// weight1 is the linear weight of tap d (0 or 1) at fraction t.
func weight1(t float64, d int) float64 {
	if d == 0 {
		return 1 - t
	}
	return t
}

// fill sets every element of s to v.
func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}
