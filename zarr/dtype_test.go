package zarr

import (
	"testing"
)

// TestConvertContiguous: the contiguous loops of convert give what the
// element-wise at gives, for every run length around their unrolling
// and at every offset, and write nothing past the run.
func TestConvertContiguous(t *testing.T) {
	for _, name := range []string{"|u1", "|i1", "<u2", "<i2", "<f4"} {
		dt, err := parseV2Dtype(name)
		if err != nil {
			t.Fatal(err)
		}
		src := make([]byte, 64*dt.size)
		for i := range src {
			src[i] = byte(i*37 + 11)
		}
		for s := range 9 {
			for n := range 40 {
				dst := make([]float32, n+1)
				dst[n] = -7
				dt.convert(dst, 1, src, s, 1, n)
				for i := range n {
					if want := dt.at(src, s+i); dst[i] != want {
						t.Fatalf("%s offset %d run %d: element %d = %g, want %g", name, s, n, i, dst[i], want)
					}
				}
				if dst[n] != -7 {
					t.Fatalf("%s offset %d run %d: wrote past the run", name, s, n)
				}
			}
		}
	}
}

// BenchmarkConvertUint8 converts 128-voxel uint8 runs (a patch's rows in
// a 128³ chunk) to float32.
func BenchmarkConvertUint8(b *testing.B) {
	dt, _ := parseV2Dtype("|u1")
	src := make([]byte, 1<<16)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		for o := 0; o < len(src); o += 128 {
			dt.convert(dst[o:], 1, src, o, 1, 128)
		}
	}
}
