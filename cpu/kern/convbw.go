package kern

import "github.com/voxtrain/voxtrain/internal/geom"

// Backward-weight: dW[co, k] = Σ_voxels dy[voxel, co] · x[voxel·S - P + tap(k), ci(k)],
// a GEMM whose reduction runs over all output voxels of the batch.
//
// The register tile is 6 weight positions k (rows, broadcast from the padded
// input planes) × 16 output channels (read in place from dy). The voxels are
// cut into reduction units — ranges of whole output planes — whose number
// depends only on the geometry (reductionUnits). Each unit's sum goes to its
// own partial buffer, in a fixed order: planes in order, each plane in line
// blocks (a few output lines, so the block's dy and input rows stay in L2
// while every k tile passes over it), each block summed from zero and then
// added to the partial. The partials are added in unit order at the end.
// So the result is the same for any thread count; threads only decide which
// goroutine computes a (unit, k tiles, column panels) item.

// reductionUnits is the number of chunks the voxel reduction of a weight
// gradient is cut into. It must depend on the geometry only (determinism).
// More units mean more parallelism for large layers but more partial sums
// to add and keep; a unit has at least ~4096 voxels, and all units' partial
// sums (partLen floats each) fit in maxPartialFloats.
func reductionUnits(planes, voxels, partLen int) int {
	return max(1, min(planes, voxels/4096, 32, maxPartialFloats/partLen))
}

// maxPartialFloats caps the partial sums of a weight gradient (64 MiB).
const maxPartialFloats = 16 << 20

// bwItem is one work item: reduction unit unit, k tiles [ktile0, ktile1),
// column panels [panel0, panel1).
type bwItem struct{ unit, ktile0, ktile1, panel0, panel1 int }

// convBackwardWeight is Conv3DBackwardWeight after the argument checks.
func (e *Engine) convBackwardWeight(g geom.Conv, x, dy, dw, dbias []float32) {
	cs := e.getScratch()
	defer e.putScratch(cs)
	cl := forwardClass(g)
	sDim := [3]int{g.InD, g.InH, g.InW}
	co := g.OutC
	panels := (co + tileCols - 1) / tileCols
	cop := panels * tileCols
	k := g.PatchLen()
	// With a bias gradient, row k of the product is the bias: its A operand
	// is the ring's slot of ones (see preparePlanes).
	//
	// Where the input can be read in place (1×1×1 and stride = kernel
	// convolutions), copying it into the ring only to add that row would
	// cost more than summing dy directly, which is done instead.
	inPlace := cl.hwDirect(sDim) && cl.srcOrigin[0] >= 0 && (cl.rows[0]-1)*cl.srcStep[0]+cl.srcOrigin[0]+cl.taps[0] <= sDim[0]
	onesRow := dbias != nil && !inPlace
	krows := k
	if onesRow {
		krows++
	}
	ktiles := (krows + tileRows - 1) / tileRows
	planes := g.N * cl.rows[0]
	rows := cl.rows[1] * cl.rows[2]
	units := reductionUnits(planes, planes*rows, krows*cop)
	// Partial sums: [unit][krows][cop].
	cs.callBuf = grow(cs.callBuf, units*krows*cop)
	part := cs.callBuf

	// Items: every unit, its k tiles cut into pieces so that there are about
	// 4 items per goroutine; column panels are cut too when k is small.
	threads := e.threads()
	pieces := max(1, (4*threads+units-1)/units)
	ppieces := 1
	if pieces > ktiles {
		ppieces = min(panels, (pieces+ktiles-1)/ktiles)
	}
	kpieces := min(ktiles, max(1, pieces/ppieces))
	its := cs.bwItems[:0]
	for u := 0; u < units; u++ {
		for pk := 0; pk < kpieces; pk++ {
			for pp := 0; pp < ppieces; pp++ {
				its = append(its, bwItem{
					unit:   u,
					ktile0: pk * ktiles / kpieces, ktile1: (pk + 1) * ktiles / kpieces,
					panel0: pp * panels / ppieces, panel1: (pp + 1) * panels / ppieces,
				})
			}
		}
	}
	cs.bwItems = its
	// Output lines per block: about 128 voxels, so that the block's dy
	// columns and the input rows one k tile reads stay in L1 while the next
	// k tiles (same tap, neighbouring channels) reuse them.
	lb := max(1, min(cl.rows[1], 128/cl.rows[2]))
	_, wp := cl.ringGeom()
	pitch := wp * g.InC
	padDy := co%tileCols != 0

	e.parallel(len(its), func(s *scratch, i int) {
		it := its[i]
		kr0, kr1 := it.ktile0*tileRows, min(krows, it.ktile1*tileRows)
		nk := kr1 - kr0
		padded := (it.ktile1 - it.ktile0) * tileRows
		t0, t1 := cl.taps[0], cl.taps[1]
		run := cl.taps[2] * g.InC
		s.rowOffA = grow(s.rowOffA, padded)
		s.rowOffC = grow(s.rowOffC, padded)
		s.offTables = grow(s.offTables, cl.rows[1]+t0)
		koff, kc := s.rowOffA[:padded], s.rowOffC[:padded]
		lineOff, slotOff := s.offTables[:cl.rows[1]], s.offTables[cl.rows[1]:cl.rows[1]+t0]
		for kk := 0; kk < padded; kk++ {
			kc[kk] = min(kr0+kk, kr1-1) * cop
		}
		for b := range lineOff {
			lineOff[b] = b * cl.srcStep[1] * pitch
		}
		if padDy {
			s.bpad = grow(s.bpad, lb*cl.rows[2]*cop)
			clear(s.bpad)
		}
		p0 := it.unit * planes / units
		p1 := (it.unit + 1) * planes / units
		pu := part[it.unit*krows*cop:]
		first := true
		s.resetRing(t0 + 1)
		for pl := p0; pl < p1; pl++ {
			n, a := pl/cl.rows[0], pl%cl.rows[0]
			buf, onesOff := s.preparePlanes(x, n, sDim, g.InC, &cl, a, slotOff, onesRow)
			// Row offsets of the tile rows: weight position kq = (td, th, q)
			// with q = kw·C + ci, i.e. the tap run of the forward pass.
			for kk := 0; kk < padded; kk++ {
				kq := min(kr0+kk, kr1-1)
				if kq == k {
					koff[kk] = onesOff
					continue
				}
				td, rest := kq/(t1*run), kq%(t1*run)
				th, q := rest/run, rest%run
				koff[kk] = slotOff[td] + th*pitch + q
			}
			dyPlane := pl * rows * co
			for b0 := 0; b0 < cl.rows[1]; b0 += lb {
				b1 := min(b0+lb, cl.rows[1])
				bsrc, boff, bstr := dy, dyPlane+b0*cl.rows[2]*co, co
				if padDy {
					nv := (b1 - b0) * cl.rows[2]
					for v := 0; v < nv; v++ {
						d := s.bpad[v*cop:][:co]
						src := dy[boff+v*co:][:co]
						for c := range d {
							d[c] = src[c]
						}
					}
					bsrc, boff, bstr = s.bpad, 0, cop
				}
				for p := it.panel0; p < it.panel1; p++ {
					args := ukArgs{
						a: buf, aoff: koff, taps: lineOff[b0:b1], run: cl.rows[2], astr: cl.srcStep[2] * g.InC,
						b: bsrc, boff: boff + p*tileCols, bstr: bstr,
						c: pu[p*tileCols:], coff: kc,
						mlast: nk - (it.ktile1-it.ktile0-1)*tileRows, mode: modeAccum,
					}
					if first {
						args.mode = modeStore
					}
					e.ukern(&args)
				}
				first = false
			}
		}
	})

	// dw[co][k] = Σ_u part[u][k][co] and dbias[co] = Σ_u part[u][k][co]
	// (the ones row), units in order.
	kchunk := max(64, (krows+4*threads-1)/(4*threads))
	e.parallel((krows+kchunk-1)/kchunk, func(_ *scratch, i int) {
		for kk := i * kchunk; kk < min(krows, (i+1)*kchunk); kk++ {
			for c := 0; c < co; c++ {
				v := part[kk*cop+c]
				for u := 1; u < units; u++ {
					v += part[(u*krows+kk)*cop+c]
				}
				if kk == k {
					dbias[c] = v
				} else {
					dw[c*k+kk] = v
				}
			}
		}
	})
	if dbias != nil && !onesRow {
		// dbias[c] = Σ_voxels dy[voxel, c] in voxel order, in float64; one
		// item per group of channels.
		voxels := planes * rows
		e.parallel((co+3)/4, func(_ *scratch, i int) {
			c0, c1 := 4*i, min(co, 4*i+4)
			var acc [4]float64
			for v := 0; v < voxels; v++ {
				row := dy[v*co+c0 : v*co+c1]
				for j, val := range row {
					acc[j] += float64(val)
				}
			}
			for j := c0; j < c1; j++ {
				dbias[j] = float32(acc[j-c0])
			}
		})
	}
}
