package nifti

import (
	"fmt"
	"math"
)

// Matrix4 is a 4×4 affine, row-major: world = M · [i j k 1]ᵀ.
type Matrix4 [4][4]float64

// Identity4 returns the 4×4 identity.
func Identity4() Matrix4 {
	return Matrix4{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}
}

// QformAffine returns the affine from the quaternion, voxel sizes, qfac and
// offsets, computed as nibabel's Nifti1Header.get_qform does (it is returned
// whatever qform_code is). An error means the quaternion's b²+c²+d² exceeds 1
// by more than float32 rounding, which nibabel also rejects.
func (h *Header) QformAffine() (Matrix4, error) {
	b, c, d := h.QuaternB, h.QuaternC, h.QuaternD
	w2 := 1 - (b*b + c*c + d*d)
	var a float64
	if w2 < 0 {
		// nibabel's quaternion_threshold: -3 × float32 eps for NIfTI-1,
		// -3 × float64 eps for NIfTI-2.
		thresh := -3 * float64(math.Nextafter32(1, 2)-1)
		if h.Version == 2 {
			thresh = -3 * (math.Nextafter(1, 2) - 1)
		}
		if w2 < thresh {
			return Matrix4{}, fmt.Errorf("qform quaternion (%g, %g, %g) has norm > 1", b, c, d)
		}
		a = 0
	} else {
		a = math.Sqrt(w2)
	}
	r := quatToMat(a, b, c, d)
	vx, vy, vz := h.Pixdim[1], h.Pixdim[2], h.Pixdim[3]
	if h.Pixdim[0] < 0 {
		vz = -vz
	}
	m := Identity4()
	for i := 0; i < 3; i++ {
		m[i][0] = r[i][0] * vx
		m[i][1] = r[i][1] * vy
		m[i][2] = r[i][2] * vz
	}
	m[0][3], m[1][3], m[2][3] = h.QoffsetX, h.QoffsetY, h.QoffsetZ
	return m, nil
}

// quatToMat is nibabel's quaternions.quat2mat for (w, x, y, z).
func quatToMat(w, x, y, z float64) [3][3]float64 {
	nq := w*w + x*x + y*y + z*z
	if nq < 2.220446049250313e-16 {
		return [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	}
	s := 2.0 / nq
	X, Y, Z := x*s, y*s, z*s
	wX, wY, wZ := w*X, w*Y, w*Z
	xX, xY, xZ := x*X, x*Y, x*Z
	yY, yZ, zZ := y*Y, y*Z, z*Z
	return [3][3]float64{
		{1 - (yY + zZ), xY - wZ, xZ + wY},
		{xY + wZ, 1 - (xX + zZ), yZ - wX},
		{xZ - wY, yZ + wX, 1 - (xX + yY)},
	}
}

// SformAffine returns the affine whose first three rows are srow_x, srow_y,
// srow_z (returned whatever sform_code is).
func (h *Header) SformAffine() Matrix4 {
	m := Identity4()
	for r := 0; r < 3; r++ {
		m[r] = h.Srow[r]
	}
	m[3] = [4]float64{0, 0, 0, 1}
	return m
}

// BaseAffine is the fallback affine used when neither code is set: diagonal
// voxel sizes with x flipped, centred on the volume (nibabel's
// get_base_affine / shape_zoom_affine with x_flip).
func (h *Header) BaseAffine() Matrix4 {
	shape := [3]float64{1, 1, 1}
	zooms := [3]float64{1, 1, 1}
	dims := h.Shape()
	for i := 0; i < 3 && i < len(dims); i++ {
		shape[i] = float64(dims[i])
		zooms[i] = h.Pixdim[i+1]
	}
	zooms[0] = -zooms[0]
	m := Identity4()
	for i := 0; i < 3; i++ {
		m[i][i] = zooms[i]
		m[i][3] = -(shape[i] - 1) / 2 * zooms[i]
	}
	return m
}

// Affine returns the affine nibabel's img.affine would: the sform if
// sform_code > 0, else the qform if qform_code > 0, else BaseAffine.
func (h *Header) Affine() (Matrix4, error) {
	if h.SformCode > 0 {
		return h.SformAffine(), nil
	}
	if h.QformCode > 0 {
		return h.QformAffine()
	}
	return h.BaseAffine(), nil
}

// SetAffine stores m as both the sform (srow) and, as well as a rigid
// rotation allows, the qform (quaternion, qfac, offsets, voxel sizes), and
// sets both codes to code. It mirrors nibabel's set_sform + set_qform.
func (h *Header) SetAffine(m Matrix4, code int32) {
	for r := 0; r < 3; r++ {
		h.Srow[r] = m[r]
	}
	h.SformCode = code
	// Voxel sizes are the column norms; the rotation is what remains.
	var rot [3][3]float64
	var zooms [3]float64
	for c := 0; c < 3; c++ {
		n := math.Sqrt(m[0][c]*m[0][c] + m[1][c]*m[1][c] + m[2][c]*m[2][c])
		if n == 0 {
			n = 1
		}
		zooms[c] = n
		for r := 0; r < 3; r++ {
			rot[r][c] = m[r][c] / n
		}
	}
	qfac := 1.0
	if det3(rot) < 0 {
		qfac = -1
		for r := 0; r < 3; r++ {
			rot[r][2] = -rot[r][2]
		}
	}
	a, b, c, d := matToQuat(rot)
	if a < 0 {
		b, c, d = -b, -c, -d
	}
	h.QuaternB, h.QuaternC, h.QuaternD = b, c, d
	h.QoffsetX, h.QoffsetY, h.QoffsetZ = m[0][3], m[1][3], m[2][3]
	h.Pixdim[0] = qfac
	h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = zooms[0], zooms[1], zooms[2]
	h.QformCode = code
}

func det3(m [3][3]float64) float64 {
	return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
}

// matToQuat converts a proper rotation matrix to a unit quaternion (w,x,y,z)
// with the numerically stable branch choice.
func matToQuat(m [3][3]float64) (w, x, y, z float64) {
	tr := m[0][0] + m[1][1] + m[2][2]
	switch {
	case tr > 0:
		s := math.Sqrt(tr+1) * 2
		w = 0.25 * s
		x = (m[2][1] - m[1][2]) / s
		y = (m[0][2] - m[2][0]) / s
		z = (m[1][0] - m[0][1]) / s
	case m[0][0] > m[1][1] && m[0][0] > m[2][2]:
		s := math.Sqrt(1+m[0][0]-m[1][1]-m[2][2]) * 2
		w = (m[2][1] - m[1][2]) / s
		x = 0.25 * s
		y = (m[0][1] + m[1][0]) / s
		z = (m[0][2] + m[2][0]) / s
	case m[1][1] > m[2][2]:
		s := math.Sqrt(1+m[1][1]-m[0][0]-m[2][2]) * 2
		w = (m[0][2] - m[2][0]) / s
		x = (m[0][1] + m[1][0]) / s
		y = 0.25 * s
		z = (m[1][2] + m[2][1]) / s
	default:
		s := math.Sqrt(1+m[2][2]-m[0][0]-m[1][1]) * 2
		w = (m[1][0] - m[0][1]) / s
		x = (m[0][2] + m[2][0]) / s
		y = (m[1][2] + m[2][1]) / s
		z = 0.25 * s
	}
	return
}

// Orientation returns the axis codes of an affine, one letter per voxel
// axis naming the world direction the axis points to (R/L, A/P, S/I), e.g.
// "RAS" or "LPI", as nibabel's aff2axcodes does for non-oblique affines: each
// voxel axis is assigned the world axis it is most aligned with, largest
// alignment first, each world axis used once.
func Orientation(m Matrix4) string {
	var cols [3][3]float64
	for c := 0; c < 3; c++ {
		n := math.Sqrt(m[0][c]*m[0][c] + m[1][c]*m[1][c] + m[2][c]*m[2][c])
		for r := 0; r < 3; r++ {
			if n > 0 {
				cols[c][r] = m[r][c] / n
			}
		}
	}
	var out [3]byte
	usedVox, usedWorld := [3]bool{}, [3]bool{}
	pos := [3]byte{'R', 'A', 'S'}
	neg := [3]byte{'L', 'P', 'I'}
	for k := 0; k < 3; k++ {
		best, bv, bw := -1.0, -1, -1
		for v := 0; v < 3; v++ {
			if usedVox[v] {
				continue
			}
			for w := 0; w < 3; w++ {
				if usedWorld[w] {
					continue
				}
				a := math.Abs(cols[v][w])
				if math.IsNaN(a) {
					a = 0 // a NaN or infinite matrix entry: no direction
				}
				if a > best {
					best, bv, bw = a, v, w
				}
			}
		}
		usedVox[bv], usedWorld[bw] = true, true
		switch {
		case best == 0:
			out[bv] = '?'
		case cols[bv][bw] > 0:
			out[bv] = pos[bw]
		default:
			out[bv] = neg[bw]
		}
	}
	return string(out[:])
}
