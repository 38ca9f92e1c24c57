package volumetest

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// ReadLabels opens path with volume.Open and returns its header and its
// whole label map, failing the test on any error: what a writer's round
// trip reads back.
func ReadLabels(t testing.TB, path string) (volume.Header, []uint8) {
	t.Helper()
	f, err := volume.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := f.Header()
	out := make([]uint8, volume.Whole(h.Shape).Voxels())
	if err := f.ReadLabels(volume.Whole(h.Shape), out); err != nil {
		t.Fatal(err)
	}
	return h, out
}

// ObliqueHeader is a 5×6×7 (D, H, W) geometry that is anisotropic,
// oblique and off the origin, in unit: LPS axis directions the rows of
// {{0.9, 0.1, 0}, {−0.1, 0.9, 0.2}, {0, −0.2, 1.1}} normalised, spacing
// (x, y, z) = (1.2, 0.8, 2.5) and LPS origin (10.5, −20, 30.25), all
// times scale; Spacing is the affine's column lengths, as readers
// compute it. The writers' fixtures (nrrd, metaimage testdata/written)
// were made with it.
func ObliqueHeader(unit string, scale float64) volume.Header {
	oblique := [3][3]float64{{0.9, 0.1, 0}, {-0.1, 0.9, 0.2}, {0, -0.2, 1.1}}
	spacing := [3]float64{1.2 * scale, 0.8 * scale, 2.5 * scale}
	origin := [3]float64{10.5 * scale, -20 * scale, 30.25 * scale}
	lpsToRAS := [3]float64{-1, -1, 1}
	h := volume.Header{Shape: [3]int{5, 6, 7}, Channels: 1, Unit: unit}
	for k, d := range oblique {
		n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
		for r := range 3 {
			h.Affine[r][k] = lpsToRAS[r] * d[r] / n * spacing[k]
		}
	}
	for r := range 3 {
		h.Affine[r][3] = lpsToRAS[r] * origin[r]
	}
	h.Affine[3][3] = 1
	for k := range 3 {
		h.Spacing[2-k] = math.Sqrt(h.Affine[0][k]*h.Affine[0][k] + h.Affine[1][k]*h.Affine[1][k] + h.Affine[2][k]*h.Affine[2][k])
	}
	return h
}

// PatternLabels is a label map of shape with every class 0..3, varying
// unevenly along each axis so that a transposed or flipped read differs.
func PatternLabels(shape [3]int) []uint8 {
	out := make([]uint8, shape[0]*shape[1]*shape[2])
	for i := range out {
		x, y, z := i%shape[2], i/shape[2]%shape[1], i/(shape[1]*shape[2])
		out[i] = uint8((x*x + 3*y + 5*z*z + x*y) % 4)
	}
	return out
}
