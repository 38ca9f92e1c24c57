package nrrd

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/volume"
)

// unitSymbols are the spellings "space units" gets for the commonest
// lengths, as Slicer and ITK write them ("mm"); any other length unit
// volume knows is written by its UDUNITS name, which Open reads back as
// it is (volume.NormalizeUnit).
var unitSymbols = map[string]string{
	"millimeter": "mm", "micrometer": "um", "nanometer": "nm",
	"centimeter": "cm", "meter": "m",
}

// labelHeader returns the text of a uint8 gzip NRRD header for a label
// map with h's geometry, each line ending in a newline and no blank line
// after the last; dataFile, when not "", is the detached data file's
// name. The RAS+ affine becomes ITK's left-posterior-superior space by
// negating its first two world rows (as Open's spaceSigns undo).
func labelHeader(h volume.Header, dataFile string) (string, error) {
	dirs, origin, err := lpsGeometry(h.Affine)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("NRRD0004")
	line("# Complete NRRD file format specification at:")
	line("# http://teem.sourceforge.net/nrrd/format.html")
	line("type: uint8")
	line("dimension: 3")
	line("space: left-posterior-superior")
	line("sizes: %d %d %d", h.Shape[2], h.Shape[1], h.Shape[0])
	line("space directions: %s %s %s", vec(dirs[0]), vec(dirs[1]), vec(dirs[2]))
	line("kinds: domain domain domain")
	// No "endian": the NRRD format leaves it out for one-byte samples.
	line("encoding: gzip")
	line("space origin: %s", vec(origin))
	if u := spaceUnit(h.Unit); u != "" {
		line(`space units: "%s" "%s" "%s"`, u, u, u)
	}
	if dataFile != "" {
		line("data file: %s", dataFile)
	}
	return b.String(), nil
}

// lpsGeometry returns the LPS world vector of each voxel axis (x, y, z)
// and the LPS origin of the RAS+ affine a. An axis whose vector is zero
// or not finite is an error: no reader could take a voxel size from it.
func lpsGeometry(a volume.Affine) (dirs [3][3]float64, origin [3]float64, err error) {
	signs := [3]float64{-1, -1, 1}
	for r := range 3 {
		for k := range 3 {
			dirs[k][r] = signs[r] * a[r][k]
		}
		origin[r] = signs[r] * a[r][3]
	}
	for k, d := range dirs {
		n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
		if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return dirs, origin, fmt.Errorf("voxel axis %d has world vector %v: want a finite non-zero vector", k, d)
		}
	}
	for _, x := range origin {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dirs, origin, fmt.Errorf("origin %v is not finite", origin)
		}
	}
	return dirs, origin, nil
}

// spaceUnit is the "space units" entry for unit, a Header's Unit; "" (no
// field) when unit is no length unit volume knows, since Open would read
// any other string back as a unit it cannot convert.
func spaceUnit(unit string) string {
	if _, ok := volume.UnitMeters(unit); !ok {
		return ""
	}
	if s, ok := unitSymbols[unit]; ok {
		return s
	}
	return unit
}

// vec formats a NRRD vector "(x,y,z)" with numbers that parse back to the
// same float64.
func vec(v [3]float64) string {
	return "(" + num(v[0]) + "," + num(v[1]) + "," + num(v[2]) + ")"
}

// num formats x in the shortest form that parses back exactly; a negative
// zero (a negated 0 of the affine) is written 0.
func num(x float64) string {
	if x == 0 {
		x = 0
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
