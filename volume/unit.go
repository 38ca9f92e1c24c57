package volume

import (
	"fmt"
	"math"
	"strings"
)

// Spatial units. A Header's Unit is the length unit its Spacing and
// Affine are in, spelt as UDUNITS-2 names it and OME-NGFF writes it
// ("nanometer", "micrometer", "millimeter", …), whatever the file wrote
// ("nm", "µm", "micron", NIfTI's xyzt_units code): readers pass what the
// format says through NormalizeUnit. "" is a file that does not say (a
// MetaImage, a plain TIFF, a NIfTI file whose xyzt_units is 0). Files
// that must agree in place and voxel size (a manifest's raw volume and
// its label crops, a case's image and label) are compared in one unit:
// UnitScale converts between two stated units, and one that is not a
// length unit it knows is an error, as comparing numbers in it would be
// a guess.

// decimalUnits holds the length units UDUNITS-2 names with a power of
// ten metres, as OME-NGFF 0.4 and 0.5 list them for a space axis: the
// exponent, so that a conversion between two is an exact power of ten
// (1e-6/1e-9 in floating point is not 1000).
var decimalUnits = map[string]int{
	"yoctometer": -24, "zeptometer": -21, "attometer": -18,
	"femtometer": -15, "picometer": -12, "angstrom": -10,
	"nanometer": -9, "micrometer": -6, "millimeter": -3,
	"centimeter": -2, "decimeter": -1, "meter": 0,
	"hectometer": 2, "kilometer": 3, "megameter": 6,
	"gigameter": 9, "terameter": 12, "petameter": 15,
	"exameter": 18, "zettameter": 21, "yottameter": 24,
}

// otherUnits holds the metres in one of OME-NGFF's other length units.
var otherUnits = map[string]float64{
	"inch": 0.0254, "foot": 0.3048, "yard": 0.9144, "mile": 1609.344,
	"parsec": 3.0856775814913673e16,
}

// unitAliases maps the spellings files use (lower-cased) to UDUNITS-2
// names: SI symbols (NRRD's "mm", N5's "nm", OME-XML's "µm" and "Å"),
// ImageJ's "micron", plurals and British spellings.
var unitAliases = map[string]string{
	"am": "attometer", "fm": "femtometer", "pm": "picometer",
	"nm": "nanometer", "um": "micrometer", "µm": "micrometer", "μm": "micrometer",
	"micron": "micrometer", "mm": "millimeter", "cm": "centimeter",
	"dm": "decimeter", "m": "meter", "km": "kilometer",
	"å": "angstrom", "ångström": "angstrom", "ångstrom": "angstrom",
	"in": "inch", "ft": "foot", "feet": "foot", "inches": "inch",
}

// NormalizeUnit returns the UDUNITS-2 name of the length unit s, as a
// file writes it: "nm" → "nanometer", "um", "µm", "micron", "microns" →
// "micrometer", "Å" → "angstrom", "metre" → "meter"; case and
// surrounding space do not matter. "" and "pixel" (ImageJ's word for an
// uncalibrated image) give "": no unit. Any other string is returned
// trimmed, as written, so that a Header keeps what its file says and
// UnitScale can name it when it refuses it.
func NormalizeUnit(s string) string {
	t := strings.TrimSpace(s)
	l := strings.ToLower(t)
	switch l {
	case "", "pixel", "pixels", "px", "voxel", "voxels":
		return ""
	}
	if u, ok := unitAliases[l]; ok {
		return u
	}
	l = strings.ReplaceAll(l, "metre", "meter")
	if _, ok := UnitMeters(l); ok {
		return l
	}
	// Plurals of names, not of symbols: "ms" is a millisecond.
	if s, ok := strings.CutSuffix(l, "s"); ok && len(s) > 3 {
		if u, ok := unitAliases[s]; ok {
			return u
		}
		if _, ok := UnitMeters(s); ok {
			return s
		}
	}
	return t
}

// UnitMeters returns the metres in one of u, a name NormalizeUnit
// returns; false when u is not a length unit (or not normalised).
func UnitMeters(u string) (float64, bool) {
	if e, ok := decimalUnits[u]; ok {
		return math.Pow10(e), true
	}
	m, ok := otherUnits[u]
	return m, ok
}

// UnitScale returns the factor that turns a length in unit from into
// unit to (both as Header.Unit holds them). When either is "" — the file
// does not say — it is 1: the two are taken to be in the same unit, as
// they were before files stated units. A unit that is not a length unit
// UnitMeters knows is an error naming it.
func UnitScale(from, to string) (float64, error) {
	for _, u := range []string{from, to} {
		if _, ok := UnitMeters(u); !ok && u != "" {
			return 0, fmt.Errorf("spatial unit %q is not a length unit (want one of UDUNITS-2's, as OME-NGFF: nanometer, micrometer, millimeter, … or nm, um, mm, …)", u)
		}
	}
	if from == "" || to == "" || from == to {
		return 1, nil
	}
	ef, okf := decimalUnits[from]
	et, okt := decimalUnits[to]
	if okf && okt {
		return math.Pow10(ef - et), nil
	}
	mf, _ := UnitMeters(from)
	mt, _ := UnitMeters(to)
	return mf / mt, nil
}

// InUnit returns h with its Spacing and Affine converted into unit u and
// Unit set to it. When h or u states no unit, h is returned as it is (its
// numbers are taken to be in u already, see UnitScale), its Unit set to u
// when u is not "". An error names a unit that is not a length.
func (h Header) InUnit(u string) (Header, error) {
	f, err := UnitScale(h.Unit, u)
	if err != nil {
		return h, err
	}
	if u != "" {
		h.Unit = u
	}
	if f == 1 {
		return h, nil
	}
	for a := range h.Spacing {
		h.Spacing[a] *= f
	}
	for r := range 3 {
		for c := range 4 {
			h.Affine[r][c] *= f
		}
	}
	return h, nil
}

// UnitName is u for messages: "no unit" for "".
func UnitName(u string) string {
	if u == "" {
		return "no unit"
	}
	return u
}

// AxesUnit is the one unit of a volume's spatial axes as its file states
// them, in NormalizeUnit's spelling: units[i] is what the axis (or
// metadata key) names[i] states, as written ("" or "pixel": none); ""
// when no axis states one. Readers of every format call it, so that the
// rule is one:
//
// Every axis listed must state the same unit. A Header has one Unit for
// its Spacing and Affine, so a voxel size in nanometres along z and
// micrometres along x would be read wrongly in any one unit. An axis that
// states none beside axes that do is refused too: its spacing may be in
// pixels, in the others' unit or in a third, and taking the others' unit
// for it would be a guess that silently scales that axis. Where a format
// itself says what an axis without a stated unit is in, that is a fact of
// the format and its reader applies it before calling AxesUnit (OME-XML:
// a PhysicalSize without its Unit is in µm; ImageJ: no yunit= or zunit=
// is unit='s; NRRD: "???" is no unit); an axis with no spacing at all,
// hence no unit to agree on (OME-XML without a PhysicalSize), is left out
// of units.
//
// The error names the first axis and the first that disagrees with it,
// with their units as written; the reader wraps it with its file (and
// field).
func AxesUnit(units, names []string) (string, error) {
	if len(names) != len(units) {
		panic(fmt.Sprintf("volume.AxesUnit: %d units for %d names", len(units), len(names)))
	}
	unit := ""
	for i, u := range units {
		n := NormalizeUnit(u)
		if i == 0 {
			unit = n
		} else if n != unit {
			return "", fmt.Errorf("the spatial axes disagree on their unit: %s is in %q, %s in %q (voxtrain reads one unit for every spatial axis)", names[0], units[0], names[i], u)
		}
	}
	return unit, nil
}
