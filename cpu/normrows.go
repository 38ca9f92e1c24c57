package cpu

// The inner loops of the fused instance norm + activation, one block of
// voxel rows (rows × c channels, channels innermost) at a time. Each comes
// twice: the Go loop here for the channels from j0 on, and on amd64 an
// AVX2 loop (normrows_amd64.s) for the first c &^ 3 channels with the same
// operations in the same order, so both give the same bits
// (TestNormRowsMatchGo). The dispatchers at the bottom use the assembly
// where it can run and this Go for the rest.

// normSumsGo adds each row's x and x² (in float64) into s and q, channels
// j0 and up.
func normSumsGo(x []float32, c, j0 int, s, q []float64) {
	s, q = s[j0:c:c], q[j0:c:c]
	for r := 0; r+c <= len(x); r += c {
		row := x[r+j0 : r+c]
		s, q := s[:len(row)], q[:len(row)] // lets the compiler drop bounds checks
		for j, x := range row {
			f := float64(x)
			s[j] += f
			q[j] += f * f
		}
	}
}

// normActGo writes y = act((x − mean)·scale + shift), channels j0 and up.
func normActGo(x, y []float32, c, j0 int, mean, scale, shift []float32, fac [2]float32) {
	mean, scale, shift = mean[j0:c:c], scale[j0:c:c], shift[j0:c:c]
	for r := 0; r+c <= len(x); r += c {
		xr := x[r+j0 : r+c]
		yr, mean, scale, shift := y[r+j0:r+j0+len(xr)], mean[:len(xr)], scale[:len(xr)], shift[:len(xr)]
		for j, x := range xr {
			z := (x-mean[j])*scale[j] + shift[j]
			yr[j] = z * fac[signBit(z)]
		}
	}
}

// normActGradSumsGo adds each row's g = dy·act'(z) and g·x (in float64)
// into sg and sgx, with z recomputed as the forward did; channels j0 and up.
func normActGradSumsGo(x, dy []float32, c, j0 int, mean, scale, shift []float32, fac [2]float32, sg, sgx []float64) {
	mean, scale, shift = mean[j0:c:c], scale[j0:c:c], shift[j0:c:c]
	sg, sgx = sg[j0:c:c], sgx[j0:c:c]
	for r := 0; r+c <= len(x); r += c {
		xr := x[r+j0 : r+c]
		gr, mean, scale, shift := dy[r+j0:r+j0+len(xr)], mean[:len(xr)], scale[:len(xr)], shift[:len(xr)]
		sg, sgx := sg[:len(xr)], sgx[:len(xr)]
		for j, x := range xr {
			z := (x-mean[j])*scale[j] + shift[j]
			g := float64(gr[j] * fac[signBit(z)])
			sg[j] += g
			sgx[j] += g * float64(x)
		}
	}
}

// normActGradGo writes dx = A·g + B·(x − mean) + C with g = dy·act'(z);
// channels j0 and up.
func normActGradGo(x, dy, dx []float32, c, j0 int, mean, scale, shift, A, B, C []float32, fac [2]float32) {
	mean, scale, shift = mean[j0:c:c], scale[j0:c:c], shift[j0:c:c]
	A, B, C = A[j0:c:c], B[j0:c:c], C[j0:c:c]
	for r := 0; r+c <= len(x); r += c {
		xr := x[r+j0 : r+c]
		n := len(xr)
		gr, or, mean, scale, shift, A, B, C := dy[r+j0:r+j0+n], dx[r+j0:r+j0+n], mean[:n], scale[:n], shift[:n], A[:n], B[:n], C[:n]
		for j, x := range xr {
			xc := x - mean[j]
			g := gr[j] * fac[signBit(xc*scale[j]+shift[j])]
			or[j] = A[j]*g + B[j]*xc + C[j]
		}
	}
}

// interleave lays the per-channel vectors out as the assembly reads them:
// for each group of 8 channels (and a last group of 4 where c4 is not a
// multiple of 8), the group's values of each vector in turn.
func interleave(c4 int, vecs ...[]float32) []float32 {
	out := make([]float32, 0, c4*len(vecs))
	for j := 0; j < c4; j += 8 {
		hi := min(j+8, c4)
		for _, v := range vecs {
			out = append(out, v[j:hi]...)
		}
	}
	return out
}

// asmChannels returns how many leading channels of c the assembly takes:
// c rounded down to 4, or 0 where no assembly runs.
func asmChannels(c int) int {
	if !haveNormAsm {
		return 0
	}
	return c &^ 3
}

// rowsOf returns the number of whole rows of c in x, checking that the
// other slices hold as many (the assembly does not check).
func rowsOf(c int, x []float32, others ...[]float32) int {
	rows := len(x) / c
	for _, o := range others {
		if len(o) < rows*c {
			panic("cpu: norm row block shorter than its input")
		}
	}
	return rows
}

// normSums is normSumsGo over all channels, the first ones in assembly.
func normSums(x []float32, c int, s, q []float64) {
	c4 := asmChannels(c)
	if c4 > 0 {
		if rows := rowsOf(c, x); rows > 0 {
			_, _ = s[c-1], q[c-1]
			normSumsAVX2(&x[0], rows, c, c4, &s[0], &q[0])
		}
	}
	if c4 < c {
		normSumsGo(x, c, c4, s, q)
	}
}

// normAct is normActGo over all channels, the first ones in assembly.
func normAct(x, y []float32, c int, mean, scale, shift []float32, fac [2]float32) {
	c4 := asmChannels(c)
	if c4 > 0 {
		if rows := rowsOf(c, x, y); rows > 0 {
			p := interleave(c4, mean, scale, shift)
			normActAVX2(&x[0], &y[0], rows, c, c4, &p[0], fac[1])
		}
	}
	if c4 < c {
		normActGo(x, y, c, c4, mean, scale, shift, fac)
	}
}

// normActGradSums is normActGradSumsGo over all channels, the first ones
// in assembly.
func normActGradSums(x, dy []float32, c int, mean, scale, shift []float32, fac [2]float32, sg, sgx []float64) {
	c4 := asmChannels(c)
	if c4 > 0 {
		if rows := rowsOf(c, x, dy); rows > 0 {
			_, _ = sg[c-1], sgx[c-1]
			p := interleave(c4, mean, scale, shift)
			normActGradSumsAVX2(&x[0], &dy[0], rows, c, c4, &p[0], fac[1], &sg[0], &sgx[0])
		}
	}
	if c4 < c {
		normActGradSumsGo(x, dy, c, c4, mean, scale, shift, fac, sg, sgx)
	}
}

// normActGrad is normActGradGo over all channels, the first ones in
// assembly.
func normActGrad(x, dy, dx []float32, c int, mean, scale, shift, A, B, C []float32, fac [2]float32) {
	c4 := asmChannels(c)
	if c4 > 0 {
		if rows := rowsOf(c, x, dy, dx); rows > 0 {
			p := interleave(c4, mean, scale, shift, A, B, C)
			normActGradAVX2(&x[0], &dy[0], &dx[0], rows, c, c4, &p[0], fac[1])
		}
	}
	if c4 < c {
		normActGradGo(x, dy, dx, c, c4, mean, scale, shift, A, B, C, fac)
	}
}
