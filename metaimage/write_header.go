package metaimage

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/volume"
)

// labelHeader returns the text of a MetaImage header for a zlib-compressed
// MET_UCHAR label map with h's geometry, in the fields and order ITK's
// MetaImageIO writes, ending with ElementDataFile = dataFile ("LOCAL" for
// data in the same file). compressed is the size of the zlib stream.
//
// Geometry: MetaIO's world is LPS, world = Offset + Σ_k index_k ·
// ElementSpacing_k · direction_k, direction_k being TransformMatrix's
// k-th triple (as Open reads it). The RAS+ affine's columns, their first
// two rows negated, are spacing times direction: the spacing written is
// a column's length and the direction the column over it. MetaIO has no
// unit field and ITK reads millimetres, so a header in another known
// length unit is converted to millimetres; one with no unit, or a unit
// volume does not know, is written as its numbers are.
func labelHeader(h volume.Header, compressed int, dataFile string) (string, error) {
	if _, ok := volume.UnitMeters(h.Unit); ok {
		var err error
		if h, err = h.InUnit("millimeter"); err != nil {
			return "", err
		}
	}
	dir, spacing, origin, err := lpsGeometry(h.Affine)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	field := func(key, value string) { fmt.Fprintf(&b, "%s = %s\n", key, value) }
	field("ObjectType", "Image")
	field("NDims", "3")
	field("BinaryData", "True")
	field("BinaryDataByteOrderMSB", "False")
	field("CompressedData", "True")
	field("CompressedDataSize", strconv.Itoa(compressed))
	field("TransformMatrix", nums(dir[0][:], dir[1][:], dir[2][:]))
	field("Offset", nums(origin[:]))
	field("CenterOfRotation", "0 0 0")
	field("AnatomicalOrientation", anatomicalOrientation(dir))
	field("ElementSpacing", nums(spacing[:]))
	field("DimSize", fmt.Sprintf("%d %d %d", h.Shape[2], h.Shape[1], h.Shape[0]))
	field("ElementType", "MET_UCHAR")
	field("ElementDataFile", dataFile)
	return b.String(), nil
}

// lpsGeometry splits the RAS+ affine a into the LPS unit vector of each
// voxel axis (x, y, z), the axes' spacings and the LPS origin
// (volume.Affine.LPS, each axis vector over its length).
func lpsGeometry(a volume.Affine) (dir [3][3]float64, spacing, origin [3]float64, err error) {
	axes, origin, err := a.LPS()
	if err != nil {
		return dir, spacing, origin, err
	}
	for k, v := range axes {
		spacing[k] = math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
		for r := range 3 {
			dir[k][r] = v[r] / spacing[k]
		}
	}
	return dir, spacing, origin, nil
}

// nums formats numbers separated by spaces, each in the shortest form
// that parses back to the same float64 (a negative zero as 0).
func nums(groups ...[]float64) string {
	var parts []string
	for _, g := range groups {
		for _, x := range g {
			if x == 0 {
				x = 0
			}
			parts = append(parts, strconv.FormatFloat(x, 'g', -1, 64))
		}
	}
	return strings.Join(parts, " ")
}
