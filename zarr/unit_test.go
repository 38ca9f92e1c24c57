package zarr

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// copyTree copies the fixture store src to a temporary directory (under
// the same base name) whose metadata a test may then rewrite.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// editJSON rewrites a JSON file through edit.
func editJSON(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setAxisUnits sets the units of an OME 0.4 image's axes (by name; ""
// removes the key).
func setAxisUnits(t *testing.T, store string, units map[string]string) {
	editJSON(t, filepath.Join(store, ".zattrs"), func(m map[string]any) {
		for _, a := range m["multiscales"].([]any)[0].(map[string]any)["axes"].([]any) {
			ax := a.(map[string]any)
			if u, ok := units[ax["name"].(string)]; ok {
				if u == "" {
					delete(ax, "unit")
				} else {
					ax["unit"] = u
				}
			}
		}
	})
}

// TestUnitFixtures: the unit of the stores written by ome-zarr-py,
// zarr-python and zarr's N5Store, as their metadata states it.
func TestUnitFixtures(t *testing.T) {
	for path, want := range map[string]string{
		"testdata/v2/ome04.ome.zarr":      "millimeter", // OME-NGFF 0.4 axes
		"testdata/v2/ome04.ome.zarr/1":    "millimeter", // a level named by path
		"testdata/v3/ome05.ome.zarr":      "millimeter", // OME-NGFF 0.5, under attributes.ome
		"testdata/v2/ome04_tzyx.ome.zarr": "",           // only t has a unit (second): no spatial one
		"testdata/v2/n5_raw_u2.n5":        "millimeter", // pixelResolution's "mm"
		"testdata/v2/dtype_u1.zarr":       "",           // a plain array
	} {
		f, err := Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got := f.Header().Unit; got != want {
			t.Errorf("%s: unit %q, want %q", path, got, want)
		}
		f.Close()
	}
	ls, err := ImageLevels("testdata/v2/ome04.ome.zarr")
	if err != nil || len(ls) != 2 || ls[0].Unit != "millimeter" || ls[1].Unit != "millimeter" {
		t.Errorf("levels %+v (%v), want two in millimeter", ls, err)
	}
}

// TestUnitN5Units: an N5 array's "units" list (BigDataViewer's, beside
// "resolution"; fastest axis first) gives its unit, normalised; spatial
// units that disagree are an error naming attributes.json and the axes.
func TestUnitN5Units(t *testing.T) {
	store := copyTree(t, "testdata/v2/n5_raw_u2.n5")
	attrs := filepath.Join(store, "attributes.json")
	editJSON(t, attrs, func(m map[string]any) {
		delete(m, "pixelResolution")
		m["resolution"] = []float64{4, 4, 40}
		m["units"] = []string{"nm", "nm", "nm"}
	})
	f, err := Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if h := f.Header(); h.Unit != "nanometer" || h.Spacing != [3]float64{40, 4, 4} {
		t.Errorf("unit %q spacing %v, want nanometer and [40 4 4]", h.Unit, h.Spacing)
	}
	f.Close()
	// The spacing comes from pixelResolution, which states no unit: the
	// list beside "resolution" is resolution's, not pixelResolution's.
	editJSON(t, attrs, func(m map[string]any) { m["pixelResolution"] = map[string]any{"dimensions": []float64{8, 8, 80}} })
	if f, err = Open(store); err != nil {
		t.Fatal(err)
	}
	if h := f.Header(); h.Unit != "" || h.Spacing != [3]float64{80, 8, 8} {
		t.Errorf("pixelResolution without a unit beside resolution+units: unit %q spacing %v, want none and [80 8 8]", h.Unit, h.Spacing)
	}
	f.Close()
	// Without "resolution" the list is the only unit stated: taken.
	editJSON(t, attrs, func(m map[string]any) { delete(m, "resolution") })
	if f, err = Open(store); err != nil {
		t.Fatal(err)
	}
	if h := f.Header(); h.Unit != "nanometer" || h.Spacing != [3]float64{80, 8, 8} {
		t.Errorf("pixelResolution without a unit, units list alone: unit %q spacing %v, want nanometer and [80 8 8]", h.Unit, h.Spacing)
	}
	f.Close()
	editJSON(t, attrs, func(m map[string]any) { delete(m, "pixelResolution"); m["resolution"] = []float64{4, 4, 40} })
	editJSON(t, attrs, func(m map[string]any) { m["units"] = []string{"um", "nm", "nm"} })
	_, err = Open(store)
	if err == nil || !strings.Contains(err.Error(), attrs) || !strings.Contains(err.Error(), `z is in "nm", x in "um"`) {
		t.Errorf("units x=um, z=nm: %v, want an error naming %s and the axes", err, attrs)
	}
}

// TestUnitOMEAxes: OME axes' units are normalised ("nm" → nanometer);
// spatial axes that disagree, or that state a unit beside one that does
// not, are errors naming .zattrs and the axes.
func TestUnitOMEAxes(t *testing.T) {
	store := copyTree(t, "testdata/v2/ome04.ome.zarr")
	zattrs := filepath.Join(store, ".zattrs")
	setAxisUnits(t, store, map[string]string{"z": "nm", "y": "nanometer", "x": "NM"})
	f, err := Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if u := f.Header().Unit; u != "nanometer" {
		t.Errorf("unit %q, want nanometer", u)
	}
	f.Close()
	for _, tc := range []struct {
		units map[string]string
		want  string
	}{
		{map[string]string{"x": "micrometer"}, `z is in "nm", x in "micrometer"`},
		{map[string]string{"z": "", "x": "nm"}, `z is in "", y in "nanometer"`},
	} {
		setAxisUnits(t, store, tc.units)
		_, err := Open(store)
		if err == nil || !strings.Contains(err.Error(), zattrs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("units %v: %v, want an error naming %s and %s", tc.units, err, zattrs, tc.want)
		}
	}
}

// TestUnitWritten: CreateImage's unit reads back as the image's.
func TestUnitWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pred.ome.zarr")
	w, err := CreateImage(dir, ImageSpec{Shape: [3]int{2, 2, 2}, Chunks: [3]int{2, 2, 2}, DType: "uint8", Spacing: [3]float64{8, 8, 8}, Unit: "nanometer", Compressor: "zlib"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBlock(volume.Whole([3]int{2, 2, 2}), make([]uint8, 8)); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if u := f.Header().Unit; u != "nanometer" {
		t.Errorf("unit %q, want nanometer", u)
	}
}
