package volume

import (
	"strings"
	"testing"
)

// TestNormalizeUnit: the spellings files use become UDUNITS-2 names;
// no-unit words become ""; anything else is kept as written.
func TestNormalizeUnit(t *testing.T) {
	for in, want := range map[string]string{
		"nm": "nanometer", "NM": "nanometer", " nanometer ": "nanometer", "nanometers": "nanometer",
		"nanometre": "nanometer", "um": "micrometer", "µm": "micrometer", "μm": "micrometer",
		"micron": "micrometer", "microns": "micrometer", "Micrometer": "micrometer",
		"mm": "millimeter", "millimetres": "millimeter", "m": "meter", "metre": "meter",
		"cm": "centimeter", "pm": "picometer", "Å": "angstrom", "angstroms": "angstrom",
		"inch": "inch", "parsec": "parsec",
		"": "", "pixel": "", "pixels": "",
		"second": "second", "furlong": "furlong", "Ms": "Ms", "ms": "ms",
	} {
		if got := NormalizeUnit(in); got != want {
			t.Errorf("NormalizeUnit(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnitScale: conversions between decimal units are exact powers of
// ten; an unstated unit scales by 1; a unit that is not a length is an
// error naming it.
func TestUnitScale(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     float64
	}{
		{"micrometer", "nanometer", 1000},
		{"nanometer", "micrometer", 0.001},
		{"millimeter", "nanometer", 1e6},
		{"angstrom", "nanometer", 0.1},
		{"meter", "millimeter", 1000},
		{"picometer", "angstrom", 0.01},
		{"centimeter", "millimeter", 10},
		{"inch", "millimeter", 25.4},
		{"nanometer", "nanometer", 1},
		{"", "nanometer", 1},
		{"micrometer", "", 1},
	} {
		got, err := UnitScale(tc.from, tc.to)
		if err != nil || got != tc.want {
			t.Errorf("UnitScale(%q, %q) = %v, %v; want %v exactly", tc.from, tc.to, got, err, tc.want)
		}
	}
	for _, u := range []string{"second", "furlong", "Ms"} {
		for _, pair := range [][2]string{{u, "nanometer"}, {"nanometer", u}, {u, ""}} {
			if _, err := UnitScale(pair[0], pair[1]); err == nil || !strings.Contains(err.Error(), `"`+u+`"`) {
				t.Errorf("UnitScale(%q, %q): %v, want an error naming %q", pair[0], pair[1], err, u)
			}
		}
	}
}

// TestHeaderInUnit: spacing and every affine entry are converted; an
// unstated unit on either side leaves the numbers.
func TestHeaderInUnit(t *testing.T) {
	h := Header{Shape: [3]int{2, 3, 4}, Channels: 1, Spacing: [3]float64{0.004, 0.008, 0.016}, Unit: "micrometer"}
	h.Affine = Affine{{0.016, 0, 0, 1.5}, {0, 0.008, 0, -2}, {0, 0, 0.004, 0.25}, {0, 0, 0, 1}}
	got, err := h.InUnit("nanometer")
	if err != nil {
		t.Fatal(err)
	}
	want := Affine{{16, 0, 0, 1500}, {0, 8, 0, -2000}, {0, 0, 4, 250}, {0, 0, 0, 1}}
	near := func(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }
	for a := range 3 {
		if !near(got.Spacing[a], [3]float64{4, 8, 16}[a]) {
			t.Errorf("spacing %v, want [4 8 16]", got.Spacing)
		}
	}
	for r := range 4 {
		for c := range 4 {
			if !near(got.Affine[r][c], want[r][c]) {
				t.Errorf("affine %v, want %v", got.Affine, want)
			}
		}
	}
	if got.Unit != "nanometer" || got.Shape != h.Shape {
		t.Errorf("unit %q shape %v, want nanometer and %v", got.Unit, got.Shape, h.Shape)
	}
	none := h
	none.Unit = ""
	if got, err := none.InUnit("nanometer"); err != nil || got.Spacing != h.Spacing || got.Unit != "nanometer" {
		t.Errorf("an unstated unit: %v %q %v, want the numbers as they are, in nanometer", got.Spacing, got.Unit, err)
	}
	if got, err := h.InUnit(""); err != nil || got.Spacing != h.Spacing || got.Unit != "micrometer" {
		t.Errorf("into no unit: %v %q %v, want h as it is", got.Spacing, got.Unit, err)
	}
	bad := h
	bad.Unit = "second"
	if _, err := bad.InUnit("nanometer"); err == nil || !strings.Contains(err.Error(), `"second"`) {
		t.Errorf("a time unit: %v, want an error naming it", err)
	}
}

// memLabels is a one-channel label volume in memory.
type memLabels struct {
	hdr Header
	v   []uint8
}

func (m *memLabels) Header() Header { return m.hdr }
func (m *memLabels) Close() error   { return nil }
func (m *memLabels) ReadLabels(box Box, dst []uint8) error {
	i := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				dst[i] = m.v[(z*m.hdr.Shape[1]+y)*m.hdr.Shape[2]+x]
				i++
			}
		}
	}
	return nil
}
func (m *memLabels) ReadRegion(box Box, dst [][]float32) error {
	b := make([]uint8, box.Voxels())
	if err := m.ReadLabels(box, b); err != nil {
		return err
	}
	for i, x := range b {
		dst[0][i] = float32(x)
	}
	return nil
}

// TestResampledUnit: a source in micrometres read on a grid in
// nanometres takes the voxels the same source in nanometres gives, and
// its path names the unit (and parses back); a grid without a unit reads
// the source's numbers as they are.
func TestResampledUnit(t *testing.T) {
	shape := [3]int{1, 1, 8}
	vals := []uint8{0, 1, 2, 3, 4, 5, 6, 7}
	nm := &memLabels{hdr: Header{Shape: shape, Channels: 1, Spacing: [3]float64{4, 4, 4}, Unit: "nanometer"}, v: vals}
	um := &memLabels{hdr: Header{Shape: shape, Channels: 1, Spacing: [3]float64{0.004, 0.004, 0.004}, Unit: "micrometer"}, v: vals}
	// Target: 8 nm voxels, voxel 0 at 6 nm; the source's voxel 0 at 0.
	r := Resampling{Shape: [3]int{1, 1, 3}, Spacing: [3]float64{8, 8, 8}, Origin: [3]float64{0, 0, 6}, Unit: "nanometer"}
	read := func(f File, r Resampling) []uint8 {
		t.Helper()
		rf, err := Resampled(f, r)
		if err != nil {
			t.Fatal(err)
		}
		if rf.Header().Unit != "nanometer" {
			t.Errorf("resampled unit %q, want nanometer", rf.Header().Unit)
		}
		out := make([]uint8, 3)
		if err := rf.ReadLabels(Whole(r.Shape), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := read(nm, r)
	if string(want) != string([]uint8{2, 4, 6}) {
		t.Fatalf("nanometre source: %v, want [2 4 6] (centres 6, 14, 22 nm)", want)
	}
	if got := read(um, r); string(got) != string(want) {
		t.Errorf("micrometre source: %v, want %v", got, want)
	}
	p := ResampledPath("crop.zarr", r)
	if !strings.HasSuffix(p, "&unit=nanometer") {
		t.Errorf("path %s does not name the unit", p)
	}
	if _, back, ok, err := SplitResample(p); err != nil || !ok || back != r {
		t.Errorf("SplitResample(%s) = %+v %v %v, want %+v", p, back, ok, err, r)
	}
	r.Unit = ""
	if p := ResampledPath("crop.zarr", r); strings.Contains(p, "unit") {
		t.Errorf("path %s names a unit the resampling has not", p)
	}
	if _, _, _, err := SplitResample("crop.zarr#resample=shape=1,1,3&spacing=8,8,8&origin=0,0,6&at=0,0,0&unit=second"); err == nil || !strings.Contains(err.Error(), `"second"`) {
		t.Errorf("a path with a time unit: %v, want an error naming it", err)
	}
	// Without a unit on the grid the micrometre numbers are taken as they
	// are: 0.004-wide voxels, the grid reaches past them.
	if _, err := Resampled(um, r); err == nil {
		t.Error("a micrometre source read as nanometres fit a grid 2000× its size")
	}
}

// TestPackedUnits: class arrays in different units are compared in the
// first's: a micrometre array at a thousandth of the nanometre one's
// spacing is on its grid, one with the same numbers is not.
func TestPackedUnits(t *testing.T) {
	shape := [3]int{1, 2, 2}
	nm := &memLabels{hdr: Header{Shape: shape, Channels: 1, Spacing: [3]float64{8, 8, 8}, Unit: "nanometer"}, v: []uint8{0, 1, 1, 0}}
	um := &memLabels{hdr: Header{Shape: shape, Channels: 1, Spacing: [3]float64{0.008, 0.008, 0.008}, Unit: "micrometer"}, v: []uint8{1, 1, 0, 0}}
	names := map[int]string{0: "mito", 1: "er"}
	p, err := Packed(map[int]File{0: nm, 1: um}, names)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uint8, 4)
	if err := p.ReadLabels(Whole(shape), got); err != nil || string(got) != string([]uint8{2, 3, 1, 0}) {
		t.Errorf("packed %v (%v), want [2 3 1 0]", got, err)
	}
	um.hdr.Spacing = nm.hdr.Spacing
	if _, err := Packed(map[int]File{0: nm, 1: um}, names); err == nil || !strings.Contains(err.Error(), "micrometer") || !strings.Contains(err.Error(), "nanometer") {
		t.Errorf("8 µm beside 8 nm: %v, want an error naming both units", err)
	}
}

// TestAxesUnit: axes that state one unit (in any spelling) give it;
// none stated gives ""; differing units, or an axis that states none
// beside one that does, are errors naming the first axis and the one
// that disagrees, with their units as written.
func TestAxesUnit(t *testing.T) {
	names := []string{"z", "y", "x"}
	for _, tc := range []struct {
		units     []string
		want, err string
	}{
		{[]string{"nm", "nanometer", "NM"}, "nanometer", ""},
		{[]string{"µm", "micron", "um"}, "micrometer", ""},
		{[]string{"", "", ""}, "", ""},
		{[]string{"pixel", "", "px"}, "", ""},
		{[]string{"nm", "nm", "um"}, "", `z is in "nm", x in "um"`},
		{[]string{"", "nm", "nm"}, "", `z is in "", y in "nm"`},
		{[]string{"mm", "mm", "pixel"}, "", `z is in "mm", x in "pixel"`},
	} {
		got, err := AxesUnit(tc.units, names)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), "disagree") || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("AxesUnit(%q): %q, %v; want an error with %s", tc.units, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("AxesUnit(%q) = %q, %v; want %q", tc.units, got, err, tc.want)
		}
	}
	// Two axes (a 2-D image) and none (no spacing stated) are fine.
	if u, err := AxesUnit([]string{"nm", "nm"}, []string{"y", "x"}); u != "nanometer" || err != nil {
		t.Errorf("two axes: %q, %v", u, err)
	}
	if u, err := AxesUnit(nil, nil); u != "" || err != nil {
		t.Errorf("no axes: %q, %v", u, err)
	}
}
