package kern

import "fmt"

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (see SgemmRef). When beta is
// 0, C is not read (it may hold NaNs).
//
// op(B) is packed into 16-column panels and op(A) in row blocks; each C
// element is summed by one goroutine over k in an order fixed by k alone
// (blocks of kBlock), so results do not depend on Threads.
func (e *Engine) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("kern.Sgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if ld < cols {
			panic(fmt.Sprintf("kern.Sgemm: leading dimension of %s is %d, less than its %d columns", name, ld, cols))
		}
		if rows > 0 && len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("kern.Sgemm: %s has %d floats, needs %d (%d×%d, ld %d)", name, len(s), (rows-1)*ld+cols, rows, cols, ld))
		}
	}
	if transA {
		need("A", a, k, m, lda)
	} else {
		need("A", a, m, k, lda)
	}
	if transB {
		need("B", b, n, k, ldb)
	} else {
		need("B", b, k, n, ldb)
	}
	need("C", c, m, n, ldc)
	if k == 0 || alpha == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
		return
	}

	cs := e.getScratch()
	defer e.putScratch(cs)
	panels := (n + tileCols - 1) / tileCols
	cs.callBuf = grow(cs.callBuf, panels*k*tileCols)
	bp := cs.callBuf
	e.parallel(panels, func(_ *scratch, p int) {
		dst := bp[p*k*tileCols : (p+1)*k*tileCols]
		for j := 0; j < tileCols; j++ {
			col := p*tileCols + j
			for kk := 0; kk < k; kk++ {
				var v float32
				if col < n {
					if transB {
						v = b[col*ldb+kk]
					} else {
						v = b[kk*ldb+col]
					}
				}
				dst[kk*tileCols+j] = v
			}
		}
	})

	// Items: blocks of rowBlock rows of C, and ranges of column panels when
	// there are few row blocks. An item packs its rows of op(A), one k block
	// at a time, into a contiguous buffer whose row stride is not a multiple
	// of 4 KiB (strided A rows would alias in L1), then runs every panel of
	// its range over it; a k block of a B panel (16 KiB) stays in L1 while
	// all the item's row tiles pass over it.
	const rowBlock = 16 * tileRows
	blocks := (m + rowBlock - 1) / rowBlock
	pgroups := min(panels, max(1, (4*e.threads()+blocks-1)/blocks))
	direct := alpha == 1 && (beta == 0 || beta == 1)
	e.parallel(blocks*pgroups, func(s *scratch, item int) {
		blk, pg := item/pgroups, item%pgroups
		p0, p1 := pg*panels/pgroups, (pg+1)*panels/pgroups
		i0, i1 := blk*rowBlock, min(m, (blk+1)*rowBlock)
		nr := i1 - i0
		ntile := (nr + tileRows - 1) / tileRows
		padded := ntile * tileRows
		kb := min(k, kBlock+kBlock/2) // the longest k block
		ks := kb + tileCols
		s.ring = grow(s.ring, nr*ks)
		apack := s.ring
		s.rowOffA = grow(s.rowOffA, padded)
		s.rowOffC = grow(s.rowOffC, padded)
		s.offTables = grow(s.offTables, padded)
		aoff, coff, toff := s.rowOffA, s.rowOffC, s.offTables
		tw := (p1 - p0) * tileCols // row stride of the scratch C tile
		for r := 0; r < padded; r++ {
			rr := min(r, nr-1)
			aoff[r] = rr * ks
			coff[r] = (i0 + rr) * ldc
			toff[r] = rr * tw
		}
		s.tile = grow(s.tile, nr*tw)
		args := ukArgs{
			a: apack, aoff: aoff[:padded], astr: 1, b: bp, bstr: tileCols,
			mlast: nr - (ntile-1)*tileRows,
		}
		var tap [1]int
		args.taps = tap[:]
		for k0 := 0; k0 < k; {
			k1 := min(k, k0+kBlock)
			if k-k1 < kBlock/2 {
				k1 = k // no short last block
			}
			// Pack rows [i0, i1) × [k0, k1) of op(A).
			if transA {
				for kk := k0; kk < k1; kk++ {
					src := a[kk*lda+i0 : kk*lda+i1]
					for r, v := range src {
						apack[r*ks+kk-k0] = v
					}
				}
			} else {
				for r := 0; r < nr; r++ {
					copy(apack[r*ks:r*ks+k1-k0], a[(i0+r)*lda+k0:(i0+r)*lda+k1])
				}
			}
			args.run = k1 - k0
			for p := p0; p < p1; p++ {
				args.boff = p*k*tileCols + k0*tileCols
				if direct && p*tileCols+tileCols <= n {
					args.c, args.coff = c[p*tileCols:], coff[:padded]
					args.mode = modeAccum
					if k0 == 0 && beta == 0 {
						args.mode = modeStore
					}
				} else {
					args.c, args.coff = s.tile[(p-p0)*tileCols:], toff[:padded]
					args.mode = modeAccum
					if k0 == 0 {
						args.mode = modeStore
					}
				}
				e.ukern(&args)
			}
			k0 = k1
		}
		// Panels computed in the scratch tile: C = alpha·tile + beta·C.
		for p := p0; p < p1; p++ {
			if direct && p*tileCols+tileCols <= n {
				continue
			}
			nc := min(tileCols, n-p*tileCols)
			for r := 0; r < nr; r++ {
				row := c[(i0+r)*ldc+p*tileCols:][:nc]
				t := s.tile[r*tw+(p-p0)*tileCols:][:nc]
				for j := range row {
					if beta == 0 {
						row[j] = alpha * t[j]
					} else {
						row[j] = alpha*t[j] + beta*row[j]
					}
				}
			}
		}
	})
}

// kBlock is the depth of Sgemm's k blocks: 256 rows of a 16-column B panel
// are 16 KiB, half of a 32 KiB L1.
const kBlock = 256
