package augment

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

// fill sets every element of s to v.
func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}
