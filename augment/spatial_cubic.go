package augment

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
