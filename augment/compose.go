package augment

import (
	"math"

	"github.com/voxtrain/voxtrain/volume"
)

// mat3 multiplies 3×3 matrices. The products are small sums of products of
// cosines; explicit conversions keep them unfused (see detmath.go).
func mat3(a, b [3][3]float64) [3][3]float64 {
	var m [3][3]float64
	for i := range 3 {
		for j := range 3 {
			m[i][j] = float64(a[i][0]*b[0][j]) + float64(a[i][1]*b[1][j]) + float64(a[i][2]*b[2][j])
		}
	}
	return m
}

func identity3() [3][3]float64 {
	return [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
}

// rotation returns the rotation by theta about axis ax: in the plane of
// the two other axes (i < j), (i, j) -> (c i - s j, s i + c j).
func rotation(ax int, theta float64) [3][3]float64 {
	m := identity3()
	if theta == 0 {
		return m
	}
	i, j := (ax+1)%3, (ax+2)%3
	if i > j {
		i, j = j, i
	}
	sn, cs := dsincos(theta)
	m[i][i], m[i][j], m[j][i], m[j][j] = cs, -sn, sn, cs
	return m
}

// quarter returns k quarter turns in the plane (i, j).
func quarter(k int, i, j int) [3][3]float64 {
	m := identity3()
	var c, s float64
	switch k & 3 {
	case 0:
		return m
	case 1:
		c, s = 0, 1
	case 2:
		c, s = -1, 0
	case 3:
		c, s = 0, -1
	}
	m[i][i], m[i][j], m[j][i], m[j][j] = c, -s, s, c
	return m
}

// compose builds the coordinate map from the drawn parameters and the box
// of source voxels it reads.
func (s *Plan) compose(cubic bool) {
	sp := &s.Spatial
	l := identity3()
	for ax := range 3 {
		l = mat3(l, rotation(ax, sp.Angles[ax]))
	}
	var sc [3][3]float64
	for i := range 3 {
		f := sp.Scale[i]
		if f == 0 {
			f = 1
		}
		sc[i][i] = f
	}
	l = mat3(l, sc)
	var mir [3][3]float64
	for i := range 3 {
		mir[i][i] = 1
		if sp.Mirror[i] {
			mir[i][i] = -1
		}
	}
	l = mat3(l, mir)
	if sp.Rot90K != 0 {
		l = mat3(l, quarter(sp.Rot90K, sp.Rot90Axes[0], sp.Rot90Axes[1]))
	}
	s.lin = l

	var half [3]float64
	for i := range 3 {
		half[i] = float64(s.Patch[i]-1) / 2
	}
	s.exact = !s.grid.active && signedPermutation(l)
	for i := range 3 {
		s.center[i] = float64(s.Corner[i]) + half[i]
	}
	if s.exact {
		// A quarter turn between axes of odd and even length would land
		// every voxel half-way between source voxels: shift the centre by
		// half a voxel so the crop stays exact.
		for i := range 3 {
			for j := range 3 {
				if l[i][j] != 0 {
					s.center[i] += frac(half[j]) - frac(half[i])
				}
			}
		}
	}
	s.Box = s.bounds(half, cubic)
}

func frac(x float64) float64 { return x - math.Floor(x) }

func signedPermutation(l [3][3]float64) bool {
	for i := range 3 {
		n := 0
		for j := range 3 {
			switch l[i][j] {
			case 0:
			case 1, -1:
				n++
			default:
				return false
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}

// bounds returns the source voxels the sample reads, clipped to the volume.
func (s *Plan) bounds(half [3]float64, cubic bool) volume.Box {
	var b volume.Box
	for i := range 3 {
		ext := 0.0
		for j := range 3 {
			ext += float64(math.Abs(s.lin[i][j]) * (half[j] + float64(s.grid.maxAbs[j])))
		}
		lo, hi := s.center[i]-ext, s.center[i]+ext
		var l, h int
		if s.exact {
			l, h = int(math.Round(lo)), int(math.Round(hi))+1
		} else {
			// Trilinear reads floor(x) and floor(x)+1; one more voxel on
			// each side covers float32 rounding of the coordinates, one
			// more the cubic kernel's support.
			l, h = int(math.Floor(lo))-1, int(math.Floor(hi))+3
			if cubic {
				l, h = l-1, h+1
			}
		}
		b.Lo[i] = max(l, 0)
		b.Hi[i] = min(h, s.Shape[i])
		if b.Hi[i] < b.Lo[i] {
			b.Hi[i] = b.Lo[i]
		}
	}
	if b.Empty() {
		return volume.Box{}
	}
	return b
}
