package augment

// axisAligned reports whether s's map keeps the axes apart without being
// exact (a scaling, with flips, and no rotation or field): along a row
// only the W coordinate moves, and it moves the same way in every row.
func axisAligned(s *Plan) bool {
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
