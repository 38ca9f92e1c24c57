package kern

// The micro-kernel: every fast kernel in this package (convolution forward,
// backward-data, backward-weight and Sgemm) is a loop over register tiles of
// 6 rows × 16 columns of a product C = A·B, where the rows of A are read
// straight out of the source tensor through offsets instead of a packed
// copy (implicit GEMM):
//
//	for each tile t, for j < 6:
//	  C[coff[6t+j] + q] (=|+=) Σ_{i<len(taps)} Σ_{s<run}  a[aoff[6t+j] + taps[i] + s·astr] · b[boff + (i·run+s)·bstr + q]   (q < 16)
//
// For a convolution forward the 6 rows are 6 output voxels, taps are the
// (kd, kh) kernel offsets into a zero-padded copy of the input planes, and
// one tap's run covers (kw, ci), which is contiguous in channels-last
// memory; B is the weight panel packed as [kd][kh][kw][ci][16 output
// channels]. For a weight gradient the 6 rows are 6 weight positions
// (kd, kh, kw, ci), the "taps" are output lines and the run steps along a
// line (astr = stride·C), and B is dy read in place (bstr = output channels).
//
// Each row accumulates its own sum in a fixed order (taps, then run), so a
// row's result does not depend on which other rows share its tile: the
// work can be split over goroutines in any way without changing a bit.

// Modes of ukArgs: how a tile's accumulator starts and is written.
const (
	modeStore  = 0 // C = Σ
	modeBias   = 1 // C = bias + Σ (bias holds 16 floats)
	modeAccum  = 2 // C = C + Σ
	tileRows   = 6 // MR: rows of a register tile
	tileCols   = 16
	tileFloats = tileRows * tileCols
)

// ukArgs is the argument block of the micro-kernel. Its layout is read by
// the assembly (ukern_amd64.s); TestUkArgsLayout checks the offsets.
type ukArgs struct {
	a     []float32 // A source; all row/tap/run offsets index into it
	aoff  []int     // 6 per tile: row bases (offsets into a)
	taps  []int     // tap offsets added to every row base
	run   int       // steps per tap (≥ 1)
	astr  int       // A offset increment per step
	b     []float32 // B source
	boff  int       // offset of the first B row
	bstr  int       // B offset increment per step (rows are 16 floats wide)
	c     []float32 // C destination
	coff  []int     // 6 per tile: offsets of the 16-float C rows
	mlast int       // rows of the last tile that are stored (1..6); other tiles store 6
	mode  int       // modeStore, modeBias or modeAccum
	bias  []float32 // 16 floats, read in modeBias
}

// ukernGo is the portable micro-kernel, used where AVX2+FMA is missing and
// in tests. It indexes through slices, so a bad offset panics instead of
// corrupting memory; the tests run every driver through it for that reason.
//
// It computes a tile as 2-row × 4-column sub-tiles whose 8 sums live in
// local variables, which the compiler keeps in registers (it keeps no array
// in registers, and more locals than registers spill). Each sum still runs
// over taps then steps in order, as in the assembly.
func ukernGo(p *ukArgs) {
	// Locals, not p's fields, in the loops: the compiler reloads fields
	// through the pointer on every use.
	as, bs, astr, bstr, run, taps := p.a, p.b, p.astr, p.bstr, p.run, p.taps
	ntile := len(p.aoff) / tileRows
	for t := 0; t < ntile; t++ {
		mr := tileRows
		if t == ntile-1 {
			mr = p.mlast
		}
		aoff := p.aoff[t*tileRows : t*tileRows+tileRows]
		coff := p.coff[t*tileRows : t*tileRows+tileRows]
		for j := 0; j < mr; j += 2 {
			two := j+1 < mr
			a0, a1 := aoff[j], aoff[j]
			if two {
				a1 = aoff[j+1]
			}
			for h := 0; h < tileCols; h += 4 {
				var c0, c1, c2, c3 float32
				if p.mode == modeBias {
					c0, c1, c2, c3 = p.bias[h], p.bias[h+1], p.bias[h+2], p.bias[h+3]
				}
				d0, d1, d2, d3 := c0, c1, c2, c3
				bi := p.boff + h
				for _, off := range taps {
					i0, i1 := a0+off, a1+off
					if astr == 1 {
						// Contiguous rows: range loops without bounds checks.
						xa, xb := as[i0:i0+run], as[i1:i1+run]
						xb = xb[:len(xa)]
						for s, x0 := range xa {
							x1 := xb[s]
							b := bs[bi : bi+4 : bi+4]
							c0 += x0 * b[0]
							c1 += x0 * b[1]
							c2 += x0 * b[2]
							c3 += x0 * b[3]
							d0 += x1 * b[0]
							d1 += x1 * b[1]
							d2 += x1 * b[2]
							d3 += x1 * b[3]
							bi += bstr
						}
						continue
					}
					for s := 0; s < run; s++ {
						b := bs[bi : bi+4 : bi+4]
						x0, x1 := as[i0], as[i1]
						c0 += x0 * b[0]
						c1 += x0 * b[1]
						c2 += x0 * b[2]
						c3 += x0 * b[3]
						d0 += x1 * b[0]
						d1 += x1 * b[1]
						d2 += x1 * b[2]
						d3 += x1 * b[3]
						i0 += astr
						i1 += astr
						bi += bstr
					}
				}
				storeGo(p, coff[j]+h, c0, c1, c2, c3)
				if two {
					storeGo(p, coff[j+1]+h, d0, d1, d2, d3)
				}
			}
		}
	}
}

// storeGo writes (or, in modeAccum, adds) 4 sums to C at offset o.
func storeGo(p *ukArgs, o int, v0, v1, v2, v3 float32) {
	c := p.c[o : o+4 : o+4]
	if p.mode == modeAccum {
		c[0] += v0
		c[1] += v1
		c[2] += v2
		c[3] += v3
		return
	}
	c[0], c[1], c[2], c[3] = v0, v1, v2, v3
}

// ukern runs the micro-kernel selected for this engine.
func (e *Engine) ukern(p *ukArgs) {
	if len(p.aoff) == 0 {
		return
	}
	if e.generic || !haveAsm {
		ukernGo(p)
		return
	}
	ukernAsm(p)
}
