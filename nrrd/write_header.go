package nrrd

import (
	"fmt"
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
// name. The RAS+ affine becomes ITK's left-posterior-superior space
// (volume.Affine.LPS; Open's spaceSigns undo it).
func labelHeader(h volume.Header, dataFile string) (string, error) {
	dirs, origin, err := h.Affine.LPS()
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
