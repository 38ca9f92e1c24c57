package zarr

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// COSEM metadata: the spatial metadata that Janelia's COSEM / CellMap
// project writes on the N5 volumes OpenOrganelle publishes (fibsem-tools,
// modelled by cellmap-schemas' multiscale.cosem), from before OME-NGFF
// could state a translation or a unit per axis. Each scale level array
// has a "transform" attribute,
//
//	{"axes": ["z", "y", "x"], "order": "C", "scale": [5.24, 4, 4],
//	 "translate": [0, 0, 0], "units": ["nm", "nm", "nm"]}
//
// (world = scale·index + translate per axis, positions being voxel
// centres), and the group above the levels a "multiscales" attribute,
//
//	[{"name": "fibsem-uint8", "datasets": [{"path": "s0", "transform": {…}}, …]}]
//
// listing the levels, finest first, with the same transforms.
//
// "order" says in which order the lists run: "C" (the default when
// absent, and what OpenOrganelle's volumes have) is the array's axes
// slowest first, as numpy and zarr-python index an N5 array and as this
// package's shapes are; "F" is N5's own order, fastest first (x, y, z).
// Older writers and DaCapo/funlib spell the key "ordering"; either is
// read (both, disagreeing, is an error).

// stTransform is a COSEM "transform", its lists in the array's axis order
// (slowest first, as arrayMeta.shape), "F" lists reversed into it.
type stTransform struct {
	axes      []string
	units     []string
	scale     []float64
	translate []float64
}

// cosemAxes are the axis names a transform may use: the spatial ones and
// those rolesFromNames knows (a channel and a time axis).
var cosemAxes = []string{"z", "y", "x", "c", "t"}

// parseSTTransform reads the COSEM transform raw, found in file under key
// (for errors: "transform", "multiscales[0].datasets[1].transform"), for
// an array of ndim dimensions. Everything it says must be usable: all
// four lists present, of ndim entries each, numbers that are numbers
// (scale finite and > 0, translate finite), axes named x, y, z (or c, t)
// once each, and an order of C or F.
func parseSTTransform(raw json.RawMessage, ndim int, file, key string) (*stTransform, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s: %s", file, key, fmt.Sprintf(format, a...))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, bad("want a COSEM transform object {axes, order, scale, translate, units}, got %.80s", raw)
	}
	get := func(name string, v any) error {
		r, ok := fields[name]
		if !ok {
			return bad("no %q (a COSEM transform lists axes, scale, translate and units)", name)
		}
		if err := json.Unmarshal(r, v); err != nil {
			return bad("%s %.80s: %v", name, r, err)
		}
		return nil
	}
	t := &stTransform{}
	if err := get("axes", &t.axes); err != nil {
		return nil, err
	}
	if err := get("units", &t.units); err != nil {
		return nil, err
	}
	if err := get("scale", &t.scale); err != nil {
		return nil, err
	}
	if err := get("translate", &t.translate); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"axes", len(t.axes)}, {"units", len(t.units)}, {"scale", len(t.scale)}, {"translate", len(t.translate)}} {
		if l.n != ndim {
			return nil, bad("%s has %d entries for the array's %d dimensions", l.name, l.n, ndim)
		}
	}
	order := ""
	for _, name := range []string{"order", "ordering"} {
		r, ok := fields[name]
		if !ok || string(r) == "null" {
			continue
		}
		var o string
		if err := json.Unmarshal(r, &o); err != nil || (o != "C" && o != "F") {
			return nil, bad("%s %.80s: want \"C\" (the lists slowest axis first) or \"F\" (fastest first)", name, r)
		}
		if order != "" && o != order {
			return nil, bad("order %q and ordering %q disagree", order, o)
		}
		order = o
	}
	seen := map[string]bool{}
	for _, a := range t.axes {
		if !slices.Contains(cosemAxes, a) {
			return nil, bad("axes %q: axis %q is not one of %s", t.axes, a, strings.Join(cosemAxes, ", "))
		}
		if seen[a] {
			return nil, bad("axes %q: axis %q twice", t.axes, a)
		}
		seen[a] = true
	}
	for i, s := range t.scale {
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, bad("scale %v: axis %s is %g, want a finite spacing > 0", t.scale, t.axes[i], s)
		}
	}
	for i, v := range t.translate {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, bad("translate %v: axis %s is %g", t.translate, t.axes[i], v)
		}
	}
	if order == "F" {
		slices.Reverse(t.axes)
		slices.Reverse(t.units)
		slices.Reverse(t.scale)
		slices.Reverse(t.translate)
	}
	return t, nil
}

// differs describes how t and u differ ("" when they agree): axes and
// units exactly, scale and translate to 1e-9 relative, the precision a
// writer's float formatting keeps.
func (t *stTransform) differs(u *stTransform) string {
	switch {
	case !slices.Equal(t.axes, u.axes):
		return fmt.Sprintf("axes %q, not %q", t.axes, u.axes)
	case !slices.Equal(t.units, u.units):
		return fmt.Sprintf("units %q, not %q", t.units, u.units)
	}
	near := func(a, b []float64) bool {
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9*math.Max(math.Abs(a[i]), math.Abs(b[i])) {
				return false
			}
		}
		return true
	}
	switch {
	case !near(t.scale, u.scale):
		return fmt.Sprintf("scale %v, not %v", t.scale, u.scale)
	case !near(t.translate, u.translate):
		return fmt.Sprintf("translate %v, not %v", t.translate, u.translate)
	}
	return ""
}

// cosemDatasetKey is where a COSEM multiscale's level transform is, for
// errors.
func cosemDatasetKey(level int) string {
	return fmt.Sprintf("multiscales[0].datasets[%d].transform", level)
}

// cosemLevel is the transform of level of a COSEM multiscale image and
// the file that states it. The group's multiscales lists it and the
// level's array repeats it in its own attributes (cellmap-schemas
// requires both, equal); a level whose array says otherwise is an error
// naming both files, as neither can be known to be the right one and
// reading either would misplace every crop on it. An array without its
// own transform is read by the group's.
func (n *node) cosemLevel(level int, m *arrayMeta) (*stTransform, string, error) {
	key := cosemDatasetKey(level)
	g, err := parseSTTransform(n.ms.Datasets[level].Transform, len(m.shape), n.msFile, key)
	if err != nil {
		return nil, "", err
	}
	raw, ok := m.attrs["transform"]
	if !ok {
		return g, n.msFile, nil
	}
	a, err := parseSTTransform(raw, len(m.shape), m.file, "transform")
	if err != nil {
		return nil, "", err
	}
	if d := a.differs(g); d != "" {
		return nil, "", fmt.Errorf("%s: transform disagrees with %s %s: %s (fix the one that is wrong)", m.file, n.msFile, key, d)
	}
	return g, n.msFile, nil
}
