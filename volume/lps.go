package volume

import (
	"fmt"
	"math"
)

// LPS returns the affine's geometry in ITK's left-posterior-superior
// world, which NRRD and MetaImage files state: the world vector of each
// voxel axis (x, y, z) and the origin, with the first two RAS+ rows
// negated. A voxel axis whose vector is zero or not finite, or an origin
// that is not finite, is an error: no file could state it.
func (a Affine) LPS() (axes [3][3]float64, origin [3]float64, err error) {
	signs := [3]float64{-1, -1, 1} // RAS+ → LPS
	for k := range 3 {
		for r := range 3 {
			axes[k][r] = signs[r] * a[r][k]
		}
		v := axes[k]
		if n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]); n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return axes, origin, fmt.Errorf("voxel axis %d has world vector %v: want a finite non-zero vector", k, v)
		}
	}
	for r := range 3 {
		origin[r] = signs[r] * a[r][3]
		if math.IsNaN(origin[r]) || math.IsInf(origin[r], 0) {
			return axes, origin, fmt.Errorf("origin %v is not finite", origin)
		}
	}
	return axes, origin, nil
}
