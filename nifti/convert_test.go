package nifti

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvertFastMatchesGeneral holds every unrolled conversion to the
// general per-voxel path, for lengths around the 8-voxel steps and both
// byte orders.
func TestConvertFastMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []Datatype{Uint8, Int8, Int16, Uint16, Float32} {
		for _, le := range []bool{true, false} {
			for n := 0; n < 37; n++ {
				src := make([]byte, n*dt.Size())
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				got := make([]float32, n)
				if !convertFast(dt, le, src, got) {
					t.Fatalf("%v: no fast path", dt)
				}
				at := scalarAt(dt, le, src)
				for i, g := range got {
					want := float32(at(i))
					if math.Float32bits(g) != math.Float32bits(want) && !(g != g && want != want) {
						t.Fatalf("%v le=%v n=%d voxel %d: %v, want %v", dt, le, n, i, g, want)
					}
				}
			}
		}
	}
}
