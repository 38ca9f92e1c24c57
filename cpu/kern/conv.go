package kern

import "github.com/voxtrain/voxtrain/internal/geom"

// Implicit-GEMM convolution: forward and backward-data.
//
// Both are instances of one operation, icOp: for every row (a voxel of the
// destination) and every column (a destination channel),
//
//	dst[row·dstStep + dstOrigin, co] = bias[co] + Σ_taps Σ_c src[row·srcStep + srcOrigin + tap, c] · B[tap, c, co]
//
// (per axis D, H, W) where src positions outside the source are zero. The
// forward convolution is one such "class" (rows = output voxels, srcStep =
// stride, srcOrigin = -padding, taps = the kernel, dstStep 1, dstOrigin 0). Backward-data splits dx by the residue of each
// coordinate modulo the stride: within one residue class every dx voxel
// receives exactly the kernel taps k ≡ (residue + padding) mod stride, from
// consecutive dy voxels, so the class is a stride-1 convolution of dy with a
// flipped sub-kernel (stride 1: one class, the whole kernel flipped; kernel 2
// stride 2, the U-Net's transposed convolution: 8 classes of one tap each,
// plain GEMMs).
//
// The source planes a row plane needs are copied, zero-padded, into a small
// per-goroutine ring (scratch.ring, see preparePlanes), so the micro-kernel never tests borders and
// the (kw, c) run of a tap is contiguous. Nothing of size voxels × taps is
// ever built. When no padding is needed the source is read in place.

// icClass is one destination residue class of an icOp (see above). Axes are
// (D, H, W) = 0, 1, 2.
type icClass struct {
	rows               [3]int // rows per axis
	srcStep            [3]int // source step per row
	srcOrigin          [3]int // source coordinate of row 0, tap 0
	taps               [3]int // taps per axis
	dstStep, dstOrigin [3]int // destination coordinate = row·dstStep + dstOrigin
	packedOff          int    // offset of this class's panel 0 in icOp.packedB
	panelLen           int    // floats per column panel: taps[0]·taps[1]·taps[2]·srcC·16
}

// icOp is an implicit-GEMM convolution over a batch.
type icOp struct {
	batch   int
	src     []float32
	srcDim  [3]int
	srcC    int
	dst     []float32
	dstDim  [3]int
	dstC    int
	classes []icClass
	packedB []float32 // the GEMM's B (weights): per class, per panel, [t0][t1][t2][c][16]
	panels  int       // ceil(dstC/16)
	bias    []float32 // panels·16 floats (zero padded), or nil
}

// icItem is one unit of work: row planes [plane0, plane1) of batch element
// sample of a class, rows [row0, row1) of each plane.
type icItem struct {
	class, sample, plane0, plane1, row0, row1 int
}

// Keys of scratch.ringKeys besides plane numbers n·D + d.
const (
	onesPlane = -3 // the slot of ones (see preparePlanes)
	noPlane   = -2 // empty slot
	zeroPlane = -1 // a plane outside the source: all zero
)

// forwardClass is the one class of g's forward convolution: a row per
// output voxel, reading the input at stride steps from −padding, over the
// whole kernel. The weight gradient walks the same rows and taps.
func forwardClass(g geom.Conv) icClass {
	return icClass{
		rows:      [3]int{g.OutD(), g.OutH(), g.OutW()},
		srcStep:   [3]int{g.SD, g.SH, g.SW},
		srcOrigin: [3]int{-g.PD, -g.PH, -g.PW},
		taps:      [3]int{g.KD, g.KH, g.KW},
		dstStep:   [3]int{1, 1, 1},
	}
}

// ringGeom gives the padded plane extent of a class: Hp × Wp voxels.
func (cl *icClass) ringGeom() (hp, wp int) {
	return (cl.rows[1]-1)*cl.srcStep[1] + cl.taps[1], (cl.rows[2]-1)*cl.srcStep[2] + cl.taps[2]
}

// hwDirect reports whether the class can read source planes in place: no
// padding in H and W, and a padded line is exactly a source line.
func (cl *icClass) hwDirect(sDim [3]int) bool {
	hp, wp := cl.ringGeom()
	return cl.srcOrigin[1] >= 0 && cl.srcOrigin[1]+hp <= sDim[1] && cl.srcOrigin[2] == 0 && wp == sDim[2]
}

// resetRing forgets the ring's contents (at the start of an item).
func (s *scratch) resetRing(slots int) {
	s.ringKeys = grow(s.ringKeys, slots)
	for i := range s.ringKeys {
		s.ringKeys[i] = noPlane // a slot holds nothing yet
	}
}

// preparePlanes makes the taps[0] source planes of row plane a (batch element n)
// available and fills slotOff[td] with the offset of plane td's padded
// origin in the returned buffer; a padded line is wp·sC floats. The caller
// must have called resetRing(taps[0]+1) at the start of the item.
//
// With ones set, the planes are always copied (never read in place) and the
// ring holds one more slot filled with 1.0 at offset onesOff: a weight
// gradient row pointed there sums dy alone, which is the bias gradient.
func (s *scratch) preparePlanes(src []float32, n int, sDim [3]int, sC int, cl *icClass, a int, slotOff []int, ones bool) (buf []float32, onesOff int) {
	hp, wp := cl.ringGeom()
	pitch := wp * sC
	t0 := cl.taps[0]
	d0 := a*cl.srcStep[0] + cl.srcOrigin[0]
	if !ones && cl.hwDirect(sDim) && d0 >= 0 && d0+t0 <= sDim[0] {
		for td := 0; td < t0; td++ {
			slotOff[td] = (((n*sDim[0]+d0+td)*sDim[1] + cl.srcOrigin[1]) * sDim[2]) * sC
		}
		return src, 0
	}
	slot := hp * pitch
	slots := t0
	if ones {
		slots++
	}
	s.ring = grow(s.ring, slots*slot)
	if ones {
		onesOff = t0 * slot
		if s.ringKeys[t0] != onesPlane {
			s.ringKeys[t0] = onesPlane
			for i := range s.ring[onesOff : onesOff+slot] {
				s.ring[onesOff+i] = 1
			}
		}
	}
	for td := 0; td < t0; td++ {
		d := d0 + td
		i := ((d % t0) + t0) % t0
		slotOff[td] = i * slot
		key := zeroPlane
		if d >= 0 && d < sDim[0] {
			key = n*sDim[0] + d
		}
		if s.ringKeys[i] == key {
			continue
		}
		s.ringKeys[i] = key
		dstPlane := s.ring[i*slot : (i+1)*slot]
		if key == zeroPlane {
			clear(dstPlane)
			continue
		}
		// Valid W range of a padded line, in padded coordinates.
		w0 := max(0, -cl.srcOrigin[2])
		w1 := min(wp, sDim[2]-cl.srcOrigin[2])
		for h := 0; h < hp; h++ {
			line := dstPlane[h*pitch : (h+1)*pitch]
			sh := cl.srcOrigin[1] + h
			if sh < 0 || sh >= sDim[1] || w0 >= w1 {
				clear(line)
				continue
			}
			clear(line[:w0*sC])
			so := ((key*sDim[1]+sh)*sDim[2] + cl.srcOrigin[2] + w0) * sC
			copy(line[w0*sC:w1*sC], src[so:so+(w1-w0)*sC])
			clear(line[w1*sC:])
		}
	}
	return s.ring, onesOff
}

// items splits the op into work items: whole row-plane ranges when there
// are enough planes, rows within planes otherwise. The split only decides
// which goroutine computes a row, never how, so it may depend on threads.
func (op *icOp) items(threads int, its []icItem) []icItem {
	planes := 0
	for i := range op.classes {
		planes += op.batch * op.classes[i].rows[0]
	}
	want := 4 * threads
	its = its[:0]
	if planes >= want || threads == 1 {
		chunk := max(1, planes/want)
		for ci := range op.classes {
			cl := &op.classes[ci]
			rows := cl.rows[1] * cl.rows[2]
			for n := 0; n < op.batch; n++ {
				for a := 0; a < cl.rows[0]; a += chunk {
					its = append(its, icItem{ci, n, a, min(a+chunk, cl.rows[0]), 0, rows})
				}
			}
		}
		return its
	}
	pieces := (want + planes - 1) / planes
	for ci := range op.classes {
		cl := &op.classes[ci]
		rows := cl.rows[1] * cl.rows[2]
		per := max(tileRows, (rows+pieces-1)/pieces)
		per = (per + tileRows - 1) / tileRows * tileRows
		for n := 0; n < op.batch; n++ {
			for a := 0; a < cl.rows[0]; a++ {
				for r := 0; r < rows; r += per {
					its = append(its, icItem{ci, n, a, a + 1, r, min(r+per, rows)})
				}
			}
		}
	}
	return its
}

// run computes the op on the engine's goroutines.
func (e *Engine) runIC(op *icOp, cs *scratch) {
	cs.icItems = op.items(e.threads(), cs.icItems)
	its := cs.icItems
	e.parallel(len(its), func(s *scratch, i int) { e.icItem(op, s, its[i]) })
}

// icItem computes one work item.
func (e *Engine) icItem(op *icOp, s *scratch, it icItem) {
	cl := &op.classes[it.class]
	dD, dH, dW, dC := op.dstDim[0], op.dstDim[1], op.dstDim[2], op.dstC
	if cl.taps[0] == 0 || cl.taps[1] == 0 || cl.taps[2] == 0 {
		// No tap reaches this class: its destination voxels are zero.
		for a := it.plane0; a < it.plane1; a++ {
			dd := a*cl.dstStep[0] + cl.dstOrigin[0]
			for r := it.row0; r < it.row1; r++ {
				b, c := r/cl.rows[2], r%cl.rows[2]
				o := (((it.sample*dD+dd)*dH+b*cl.dstStep[1]+cl.dstOrigin[1])*dW + c*cl.dstStep[2] + cl.dstOrigin[2]) * dC
				clear(op.dst[o : o+dC])
			}
		}
		return
	}
	_, wp := cl.ringGeom()
	pitch := wp * op.srcC
	nr := it.row1 - it.row0
	ntile := (nr + tileRows - 1) / tileRows
	padded := ntile * tileRows
	// Row tables: A offset of each row relative to the tap origin, C offset
	// relative to the destination plane.
	s.rowOffA = grow(s.rowOffA, padded)
	s.rowOffC = grow(s.rowOffC, padded)
	aoff, coff := s.rowOffA, s.rowOffC
	b, c := it.row0/cl.rows[2], it.row0%cl.rows[2]
	for i := 0; i < nr; i++ {
		aoff[i] = b*cl.srcStep[1]*pitch + c*cl.srcStep[2]*op.srcC
		coff[i] = ((b*cl.dstStep[1]+cl.dstOrigin[1])*dW + c*cl.dstStep[2] + cl.dstOrigin[2]) * dC
		if c++; c == cl.rows[2] {
			c, b = 0, b+1
		}
	}
	for i := nr; i < padded; i++ {
		aoff[i], coff[i] = aoff[0], coff[0]
	}
	t0, t1 := cl.taps[0], cl.taps[1]
	s.offTables = grow(s.offTables, t0*t1+t0+padded)
	tapOff := s.offTables[:t0*t1]
	slotOff := s.offTables[t0*t1 : t0*t1+t0]
	tileOff := s.offTables[t0*t1+t0:]
	partial := op.dstC%tileCols != 0
	if partial {
		for i := range tileOff {
			tileOff[i] = i * tileCols
		}
		s.tile = grow(s.tile, padded*tileCols)
	}
	s.resetRing(t0 + 1)
	for a := it.plane0; a < it.plane1; a++ {
		buf, _ := s.preparePlanes(op.src, it.sample, op.srcDim, op.srcC, cl, a, slotOff, false)
		for td := 0; td < t0; td++ {
			for th := 0; th < t1; th++ {
				tapOff[td*t1+th] = slotOff[td] + th*pitch
			}
		}
		plane := ((it.sample*dD + a*cl.dstStep[0] + cl.dstOrigin[0]) * dH) * dW * dC
		for p := 0; p < op.panels; p++ {
			args := ukArgs{
				a: buf, aoff: aoff[:padded], taps: tapOff, run: cl.taps[2] * op.srcC, astr: 1,
				b: op.packedB, boff: cl.packedOff + p*cl.panelLen, bstr: tileCols,
				c: op.dst[plane+p*tileCols:], coff: coff[:padded],
				mlast: nr - (ntile-1)*tileRows, mode: modeStore,
			}
			if op.bias != nil {
				args.mode, args.bias = modeBias, op.bias[p*tileCols:(p+1)*tileCols]
			}
			last := partial && p == op.panels-1
			if last {
				args.c, args.coff = s.tile, tileOff
			}
			e.ukern(&args)
			if last {
				// Element loop, not copy: nc is small and copy's call
				// overhead would dominate.
				nc := dC - p*tileCols
				for i := 0; i < nr; i++ {
					d := op.dst[plane+coff[i]+p*tileCols:][:nc]
					t := s.tile[i*tileCols:][:nc]
					for j := range d {
						d[j] = t[j]
					}
				}
			}
		}
	}
}

// convForward is Conv3DForward after the argument checks.
func (e *Engine) convForward(g geom.Conv, x, w, bias, y []float32) {
	cs := e.getScratch()
	defer e.putScratch(cs)
	cl := forwardClass(g)
	op := &icOp{
		batch: g.N, src: x, srcDim: [3]int{g.InD, g.InH, g.InW}, srcC: g.InC,
		dst: y, dstDim: cl.rows, dstC: g.OutC, classes: append(cs.classes[:0], cl),
		panels: (g.OutC + tileCols - 1) / tileCols,
	}
	cs.classes = op.classes
	k := g.PatchLen()
	op.classes[0].panelLen = k * tileCols
	cs.callBuf = grow(cs.callBuf, op.panels*k*tileCols)
	op.packedB = cs.callBuf
	// Pack W as [panel][kd][kh][kw][ci][16 output channels]; the kernel's
	// (kd, kh, kw, ci) order is already the order of a weight row.
	e.parallel(op.panels, func(_ *scratch, p int) {
		dst := op.packedB[p*k*tileCols : (p+1)*k*tileCols]
		for j := 0; j < tileCols; j++ {
			co := p*tileCols + j
			if co >= g.OutC {
				for i := 0; i < k; i++ {
					dst[i*tileCols+j] = 0
				}
				continue
			}
			row := w[co*k : (co+1)*k]
			for i, v := range row {
				dst[i*tileCols+j] = v
			}
		}
	})
	if bias != nil {
		cs.biasBuf = grow(cs.biasBuf, op.panels*tileCols)
		op.bias = cs.biasBuf
		clear(op.bias)
		copy(op.bias, bias[:g.OutC])
	}
	e.runIC(op, cs)
}

// convBackwardData is Conv3DBackwardData after the argument checks.
func (e *Engine) convBackwardData(g geom.Conv, dy, w, dx []float32) {
	cs := e.getScratch()
	defer e.putScratch(cs)
	inDim := [3]int{g.InD, g.InH, g.InW}
	outDim := [3]int{g.OutD(), g.OutH(), g.OutW()}
	kDim := [3]int{g.KD, g.KH, g.KW}
	strideDim := [3]int{g.SD, g.SH, g.SW}
	padDim := [3]int{g.PD, g.PH, g.PW}
	op := &icOp{
		batch: g.N, src: dy, srcDim: outDim, srcC: g.OutC,
		dst: dx, dstDim: inDim, dstC: g.InC,
		panels:  (g.InC + tileCols - 1) / tileCols,
		classes: cs.classes[:0],
	}
	// One class per residue (rd, rh, rw) of the dx coordinate modulo the
	// stride. Along an axis, dx index i = S·q + r receives kernel taps
	// k = k0 + S·t (k0 = (r+P) mod S) from dy index o = q + c - t
	// (c = (r+P) div S); listing the taps as t' = T-1-t makes it a
	// correlation with source origin so = c - (T-1).
	type axisClass struct{ r, R, T, so, k0 int }
	var ax [3][]axisClass
	for d := 0; d < 3; d++ {
		S, P, K := strideDim[d], padDim[d], kDim[d]
		for r := 0; r < S && r < inDim[d]; r++ {
			ac := axisClass{r: r, R: (inDim[d] - r + S - 1) / S, k0: (r + P) % S}
			if ac.k0 < K {
				ac.T = (K - ac.k0 + S - 1) / S
			}
			ac.so = (r+P)/S - (ac.T - 1)
			ax[d] = append(ax[d], ac)
		}
	}
	total := 0
	for _, a0 := range ax[0] {
		for _, a1 := range ax[1] {
			for _, a2 := range ax[2] {
				cl := icClass{
					rows:      [3]int{a0.R, a1.R, a2.R},
					srcStep:   [3]int{1, 1, 1},
					srcOrigin: [3]int{a0.so, a1.so, a2.so},
					taps:      [3]int{a0.T, a1.T, a2.T},
					dstStep:   strideDim,
					dstOrigin: [3]int{a0.r, a1.r, a2.r},
				}
				cl.packedOff = total
				cl.panelLen = a0.T * a1.T * a2.T * g.OutC * tileCols
				total += op.panels * cl.panelLen
				op.classes = append(op.classes, cl)
			}
		}
	}
	cs.classes = op.classes
	cs.callBuf = grow(cs.callBuf, total)
	op.packedB = cs.callBuf
	// Pack each class's sub-kernel as [panel][t0][t1][t2][co][16 input
	// channels], tap t' of an axis being kernel index k0 + S·(T-1-t').
	k0s := func(d int, ci int) int { return ax[d][ci].k0 }
	nc := [3]int{len(ax[0]), len(ax[1]), len(ax[2])}
	e.parallel(len(op.classes)*op.panels, func(_ *scratch, item int) {
		ci, p := item/op.panels, item%op.panels
		cl := &op.classes[ci]
		c0, c1, c2 := ci/(nc[1]*nc[2]), (ci/nc[2])%nc[1], ci%nc[2]
		dst := op.packedB[cl.packedOff+p*cl.panelLen : cl.packedOff+(p+1)*cl.panelLen]
		i := 0
		for t0 := 0; t0 < cl.taps[0]; t0++ {
			kd := k0s(0, c0) + g.SD*(cl.taps[0]-1-t0)
			for t1 := 0; t1 < cl.taps[1]; t1++ {
				kh := k0s(1, c1) + g.SH*(cl.taps[1]-1-t1)
				for t2 := 0; t2 < cl.taps[2]; t2++ {
					kw := k0s(2, c2) + g.SW*(cl.taps[2]-1-t2)
					for co := 0; co < g.OutC; co++ {
						wo := (((co*g.KD+kd)*g.KH+kh)*g.KW + kw) * g.InC
						for j := 0; j < tileCols; j++ {
							if ci := p*tileCols + j; ci < g.InC {
								dst[i] = w[wo+ci]
							} else {
								dst[i] = 0
							}
							i++
						}
					}
				}
			}
		}
	})
	e.runIC(op, cs)
}
