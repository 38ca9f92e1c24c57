package testutil

import (
	"math"
	"math/rand/v2"
)

// SmoothVolume is a smooth test image of shape (D, H, W): a few
// low-frequency waves drawn from seed.
func SmoothVolume(shape [3]int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	type wave struct {
		k       [3]float64
		ph, amp float64
	}
	ws := make([]wave, 4)
	for i := range ws {
		for a := range 3 {
			ws[i].k[a] = (r.Float64() - 0.5) * 0.5
		}
		ws[i].ph = r.Float64() * 6
		ws[i].amp = 0.5 + r.Float64()
	}
	v := make([]float32, shape[0]*shape[1]*shape[2])
	for z := 0; z < shape[0]; z++ {
		for y := 0; y < shape[1]; y++ {
			for x := 0; x < shape[2]; x++ {
				s := 0.0
				for _, w := range ws {
					s += w.amp * math.Sin(w.k[0]*float64(z)+w.k[1]*float64(y)+w.k[2]*float64(x)+w.ph)
				}
				v[(z*shape[1]+y)*shape[2]+x] = float32(s)
			}
		}
	}
	return v
}

// LabelsOf thresholds a SmoothVolume into classes 0..3 (three nested
// foreground classes).
func LabelsOf(img []float32) []uint8 {
	l := make([]uint8, len(img))
	for i, v := range img {
		switch {
		case v > 1.5:
			l[i] = 3
		case v > 0.8:
			l[i] = 2
		case v > 0.2:
			l[i] = 1
		}
	}
	return l
}

// NoiseVolume is a rough test image of shape (D, H, W), every voxel an
// independent normal draw from seed, so any interpolation shows.
func NoiseVolume(shape [3]int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 9))
	v := make([]float32, shape[0]*shape[1]*shape[2])
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// MRILike is an image and label map shaped like an MRI case, for
// benchmarks: SmoothVolume(shape, 1) plus 0.3 × NoiseVolume(shape, 2),
// thresholded by LabelsOf.
func MRILike(shape [3]int) ([]float32, []uint8) {
	img := SmoothVolume(shape, 1)
	noise := NoiseVolume(shape, 2)
	for i := range img {
		img[i] += 0.3 * noise[i]
	}
	return img, LabelsOf(img)
}
