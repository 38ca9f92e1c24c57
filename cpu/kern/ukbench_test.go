package kern

import "testing"

// BenchmarkMicroKernel measures the micro-kernel alone on L1-resident data:
// the ceiling for everything built on it (one goroutine).
func BenchmarkMicroKernel(b *testing.B) {
	const run, ntile = 256, 64
	a := make([]float32, 4096)
	bb := make([]float32, run*tileCols)
	c := make([]float32, tileFloats)
	aoff, coff := make([]int, ntile*tileRows), make([]int, ntile*tileRows)
	for i := range aoff {
		aoff[i] = (i % tileRows) * 300
		coff[i] = (i % tileRows) * tileCols
	}
	for _, gen := range []bool{false, true} {
		name := "asm"
		if gen {
			name = "generic"
		} else if !haveAsm {
			continue
		}
		b.Run(name, func(b *testing.B) {
			e := &Engine{generic: gen}
			p := ukArgs{a: a, aoff: aoff, taps: []int{0}, run: run, astr: 1, b: bb, bstr: tileCols, c: c, coff: coff, mlast: tileRows}
			for i := 0; i < b.N; i++ {
				e.ukern(&p)
			}
			b.ReportMetric(2*tileFloats*run*ntile*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
