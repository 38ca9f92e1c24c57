package zarr

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// cosemExpected is testdata/cosem/expected.json, what make_fixtures.py
// wrote through cellmap-schemas and zarr-python's N5 store.
type cosemExpected struct {
	Groups []struct {
		Path   string `json:"path"`
		Order  string `json:"order"`
		Levels []struct {
			Path    string     `json:"path"`
			Shape   [3]int     `json:"shape"`
			Spacing [3]float64 `json:"spacing"`
			Origin  [3]float64 `json:"origin"`
			Unit    string     `json:"unit"`
			SHA     string     `json:"sha256"`
		} `json:"levels"`
	} `json:"groups"`
}

func loadCOSEM(t *testing.T) cosemExpected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cosem", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e cosemExpected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Groups) != 2 {
		t.Fatalf("%d groups in expected.json, want the C and F ones", len(e.Groups))
	}
	return e
}

// cosemGroup is the fixture group written with transform order C (axes
// z, y, x), as OpenOrganelle's are.
const cosemGroup = "testdata/cosem/tiny.n5/em/fibsem-uint8"

// TestCOSEMFixtures: the COSEM groups cellmap-schemas wrote (transform
// order C and F) list their levels with the shape, spacing, origin and
// unit the transforms state, per axis by name, and every level reads
// the voxels zarr-python reads — through the group (Options.Level) and
// through its array's path.
func TestCOSEMFixtures(t *testing.T) {
	e := loadCOSEM(t)
	for _, g := range e.Groups {
		path := filepath.Join("testdata", "cosem", g.Path)
		ls, err := ImageLevels(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(ls) != len(g.Levels) {
			t.Fatalf("%s (order %s): %d levels, want %d", path, g.Order, len(ls), len(g.Levels))
		}
		for k, want := range g.Levels {
			got := ls[k]
			if got.Path != want.Path || got.Shape != want.Shape || got.Spacing != want.Spacing || got.Origin != want.Origin || got.Unit != want.Unit {
				t.Errorf("%s (order %s) level %d: %+v, want %+v", path, g.Order, k, got, want)
			}
			byLevel, err := OpenWith(path, Options{Level: k})
			if err != nil {
				t.Fatal(err)
			}
			byPath, err := Open(filepath.Join(path, want.Path))
			if err != nil {
				t.Fatal(err)
			}
			h := byLevel.Header()
			if h != byPath.Header() {
				t.Errorf("%s level %d: header by level %+v, by path %+v", path, k, h, byPath.Header())
			}
			if h.Affine[0][0] != want.Spacing[2] || h.Affine[2][2] != want.Spacing[0] || h.Affine[0][3] != want.Origin[2] || h.Affine[2][3] != want.Origin[0] {
				t.Errorf("%s level %d: affine %v, want x spacing %g at %g, z %g at %g", path, k, h.Affine, want.Spacing[2], want.Origin[2], want.Spacing[0], want.Origin[0])
			}
			if cs := byLevel.(volume.Chunked).ChunkShape(); cs != [3]int{4, 4, 4} {
				t.Errorf("%s level %d: chunk shape %v, want [4 4 4]", path, k, cs)
			}
			for _, f := range []volume.File{byLevel, byPath} {
				if sha := voxelSHA(readAll(t, f, volume.Whole(h.Shape))); sha != want.SHA {
					t.Errorf("%s level %d: voxels sha256 %s, want %s", path, k, sha, want.SHA)
				}
				f.Close()
			}
		}
	}
	// Levels of a level named by path: the group's; ImageLevels: none.
	ls, err := Levels(filepath.Join(cosemGroup, "s1"))
	if err != nil || len(ls) != 3 || ls[1].Spacing != [3]float64{10.48, 8, 6} {
		t.Errorf("Levels of s1: %+v, %v", ls, err)
	}
	if il, err := ImageLevels(filepath.Join(cosemGroup, "s1")); err != nil || il != nil {
		t.Errorf("ImageLevels of s1: %+v, %v; want none", il, err)
	}
}

// TestCOSEMChooseLevel: OpenWith's TargetSpacing picks a COSEM group's
// level as an OME-Zarr image's: the coarsest nowhere coarser than the
// target, by its (z, y, x) spacing.
func TestCOSEMChooseLevel(t *testing.T) {
	for _, tc := range []struct {
		target [3]float64
		want   string
	}{
		{[3]float64{5.24, 4, 3}, "s0"},
		{[3]float64{10.48, 8, 6}, "s1"},
		{[3]float64{12, 9, 7}, "s1"},
		{[3]float64{20.96, 16, 12}, "s2"},
		{[3]float64{100, 100, 100}, "s2"},
		// x at s2's 12 nm but z finer than s1's: s0 (z 5.24 ≤ 6).
		{[3]float64{6, 16, 12}, "s0"},
		// Anisotropy the other way round (y, x fine): s0.
		{[3]float64{20.96, 4, 3}, "s0"},
	} {
		f, err := OpenWith(cosemGroup, Options{TargetSpacing: tc.target})
		if err != nil {
			t.Fatal(err)
		}
		g, err := Open(filepath.Join(cosemGroup, tc.want))
		if err != nil {
			t.Fatal(err)
		}
		if f.Header() != g.Header() {
			t.Errorf("target %v: opened spacing %v, want %s's %v", tc.target, f.Header().Spacing, tc.want, g.Header().Spacing)
		}
		f.Close()
		g.Close()
	}
	ls, err := ImageLevels(cosemGroup)
	if err != nil || len(ls) != 3 {
		t.Fatalf("ImageLevels: %d levels, %v", len(ls), err)
	}
	for _, l := range ls {
		g, err := Open(filepath.Join(cosemGroup, l.Path))
		if err != nil {
			t.Fatal(err)
		}
		if l.Header != g.Header() {
			t.Errorf("level %s listed with header %+v, opened by path %+v", l.Path, l.Header, g.Header())
		}
		g.Close()
	}
	if _, err := OpenWith(cosemGroup, Options{Level: 3}); err == nil || !strings.Contains(err.Error(), "level 3 of 3") {
		t.Errorf("level 3 of 3: %v", err)
	}
}

// copyCOSEM copies the fixture group into a new N5 container (whose
// metadata a test may then rewrite) and returns the copy's path.
func copyCOSEM(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "c.n5")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "attributes.json"), []byte(`{"n5": "2.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(root, "fibsem-uint8")
	if err := os.CopyFS(g, os.DirFS(cosemGroup)); err != nil {
		t.Fatal(err)
	}
	return g
}

// cosemArray copies the fixture group and drops the group's multiscales,
// so that its level s1 is an N5 array with only its own transform (and
// Neuroglancer's pixelResolution), as a level copied out of its group
// is; it returns the group and s1's attributes.json.
func cosemArray(t *testing.T) (group, attrs string) {
	t.Helper()
	group = copyCOSEM(t)
	editJSON(t, filepath.Join(group, "attributes.json"), func(m map[string]any) { delete(m, "multiscales") })
	return group, filepath.Join(group, "s1", "attributes.json")
}

// setTransform edits the transform attribute of an N5 attributes.json.
func setTransform(t *testing.T, attrs string, edit func(tx map[string]any)) {
	t.Helper()
	editJSON(t, attrs, func(m map[string]any) { edit(m["transform"].(map[string]any)) })
}

// TestCOSEMArrayTransform: an N5 array's own transform gives its
// spacing, origin and unit (the level's, as in its group), over a
// pixelResolution that disagrees; "F" order reverses the lists (a
// transform saying the slowest array axis is x reads the array
// transposed), and the key may be spelt "ordering".
func TestCOSEMArrayTransform(t *testing.T) {
	ref, err := Open(filepath.Join(cosemGroup, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Header()
	whole := readAll(t, ref, volume.Whole(want.Shape))[0]
	ref.Close()
	group, attrs := cosemArray(t)
	if _, err := Open(group); err == nil || !strings.Contains(err.Error(), "a group without multiscales") {
		t.Errorf("the group without multiscales: %v", err)
	}
	s1 := filepath.Join(group, "s1")
	header := func() (volume.Header, []float32, error) {
		f, err := Open(s1)
		if err != nil {
			return volume.Header{}, nil, err
		}
		defer f.Close()
		h := f.Header()
		return h, readAll(t, f, volume.Whole(h.Shape))[0], nil
	}
	h, _, err := header()
	if err != nil || h != want || h.Spacing != [3]float64{10.48, 8, 6} || h.Unit != "nanometer" {
		t.Fatalf("s1 alone: %+v, %v; want %+v", h, err, want)
	}
	// pixelResolution disagrees (and says µm): the transform is read.
	editJSON(t, attrs, func(m map[string]any) {
		m["pixelResolution"] = map[string]any{"dimensions": []float64{1, 2, 3}, "unit": "um"}
	})
	if h, _, err := header(); err != nil || h != want {
		t.Errorf("with a disagreeing pixelResolution: %+v, %v; want the transform's %+v", h, err, want)
	}
	// Order F, lists in the F order: the same volume. Spelt "ordering"
	// (funlib, DaCapo): the same.
	for _, key := range []string{"order", "ordering"} {
		setTransform(t, attrs, func(tx map[string]any) {
			delete(tx, "order")
			tx[key] = "F"
			for _, k := range []string{"axes", "scale", "translate", "units"} {
				l := tx[k].([]any)
				for i, j := 0, len(l)-1; i < j; i, j = i+1, j-1 {
					l[i], l[j] = l[j], l[i]
				}
			}
		})
		if h, _, err := header(); err != nil || h != want {
			t.Errorf("%s F, lists reversed: %+v, %v; want %+v", key, h, err, want)
		}
		setTransform(t, attrs, func(tx map[string]any) {
			delete(tx, key)
			tx["axes"], tx["scale"], tx["translate"] = []string{"z", "y", "x"}, []float64{10.48, 8, 6}, []float64{12.620000000000001, 22, 31.5}
		})
	}
	if h, _, err := header(); err != nil || h != want {
		t.Fatalf("no order (C by default): %+v, %v; want %+v", h, err, want)
	}
	// Order F with the C lists: the array's slowest axis (3 long) is x
	// and its fastest (5 long) z, so the volume is the transpose, each
	// axis keeping the spacing and origin its name has.
	setTransform(t, attrs, func(tx map[string]any) { tx["order"] = "F" })
	h, got, err := header()
	if err != nil {
		t.Fatal(err)
	}
	if h.Shape != [3]int{5, 4, 3} || h.Spacing != want.Spacing || h.Affine[0][3] != want.Affine[0][3] || h.Affine[2][3] != want.Affine[2][3] {
		t.Fatalf("order F over C lists: shape %v spacing %v affine %v; want the transpose [5 4 3] with spacing %v and affine %v", h.Shape, h.Spacing, h.Affine, want.Spacing, want.Affine)
	}
	n := want.Shape
	for d := range n[0] {
		for y := range n[1] {
			for x := range n[2] {
				if a, b := whole[(d*n[1]+y)*n[2]+x], got[(x*n[1]+y)*n[0]+d]; a != b {
					t.Fatalf("voxel (%d %d %d): %g, transposed %g", d, y, x, a, b)
				}
			}
		}
	}
}

// TestCOSEMMalformed: a transform that cannot be read as it says is an
// error naming the attributes.json and the key, never spacing 1 read
// silently: lists of the wrong length, numbers that are not, unknown or
// repeated axes, units the spatial axes disagree on, a bad order; in
// the group's multiscales too, and a level whose array disagrees with
// its group.
func TestCOSEMMalformed(t *testing.T) {
	arrayCases := []struct {
		name string
		edit func(tx map[string]any)
		want string
	}{
		{"scale too short", func(tx map[string]any) { tx["scale"] = []float64{8, 6} }, "transform: scale has 2 entries for the array's 3 dimensions"},
		{"axes too long", func(tx map[string]any) { tx["axes"] = []string{"c", "z", "y", "x"} }, "transform: axes has 4 entries for the array's 3 dimensions"},
		{"units too short", func(tx map[string]any) { tx["units"] = []string{"nm"} }, "transform: units has 1 entries"},
		{"translate missing", func(tx map[string]any) { delete(tx, "translate") }, `transform: no "translate"`},
		{"scale not numbers", func(tx map[string]any) { tx["scale"] = []any{"10.48", 8, 6} }, "transform: scale"},
		{"translate not a list", func(tx map[string]any) { tx["translate"] = 4 }, "transform: translate 4"},
		{"scale zero", func(tx map[string]any) { tx["scale"] = []float64{10.48, 0, 6} }, "scale [10.48 0 6]: axis y is 0"},
		{"scale negative", func(tx map[string]any) { tx["scale"] = []float64{-1, 8, 6} }, "axis z is -1"},
		{"unknown axis", func(tx map[string]any) { tx["axes"] = []string{"z", "y", "w"} }, `axis "w" is not one of z, y, x, c, t`},
		{"numbered axes", func(tx map[string]any) { tx["axes"] = []string{"0", "1", "2"} }, `axis "0" is not one of`},
		{"axis twice", func(tx map[string]any) { tx["axes"] = []string{"z", "x", "x"} }, `axis "x" twice`},
		{"units disagree", func(tx map[string]any) { tx["units"] = []string{"nm", "nm", "um"} }, `the spatial axes disagree on their unit: z is in "nm", x in "um"`},
		{"unit not stated on one axis", func(tx map[string]any) { tx["units"] = []string{"nm", "", "nm"} }, `z is in "nm", y in ""`},
		{"order unknown", func(tx map[string]any) { tx["order"] = "Z" }, `transform: order "Z": want "C"`},
		{"order and ordering disagree", func(tx map[string]any) { tx["ordering"] = "F" }, `order "C" and ordering "F" disagree`},
		{"no y axis", func(tx map[string]any) { tx["axes"] = []string{"z", "c", "x"} }, "lack y and x"},
	}
	for _, tc := range arrayCases {
		_, attrs := cosemArray(t)
		setTransform(t, attrs, tc.edit)
		_, err := Open(filepath.Dir(attrs))
		if err == nil || !strings.Contains(err.Error(), attrs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant an error naming %s and %q", tc.name, err, attrs, tc.want)
		}
	}
	{
		_, attrs := cosemArray(t)
		editJSON(t, attrs, func(m map[string]any) { m["transform"] = "zyx" })
		if _, err := Open(filepath.Dir(attrs)); err == nil || !strings.Contains(err.Error(), attrs) || !strings.Contains(err.Error(), "want a COSEM transform object") {
			t.Errorf("transform a string: %v", err)
		}
	}

	// The group's multiscales.
	datasets := func(m map[string]any) []any {
		return m["multiscales"].([]any)[0].(map[string]any)["datasets"].([]any)
	}
	groupCases := []struct {
		name string
		edit func(group string)
		file string // the file the error names, relative to the group
		want string
	}{
		{"a level's transform too short", func(g string) {
			editJSON(t, filepath.Join(g, "attributes.json"), func(m map[string]any) {
				datasets(m)[1].(map[string]any)["transform"].(map[string]any)["translate"] = []float64{1}
			})
		}, "attributes.json", "multiscales[0].datasets[1].transform: translate has 1 entries"},
		{"a level without a transform", func(g string) {
			editJSON(t, filepath.Join(g, "attributes.json"), func(m map[string]any) {
				delete(datasets(m)[2].(map[string]any), "transform")
			})
		}, "attributes.json", "multiscales[0].datasets[2] (s2) has no transform"},
		{"a level's units disagree", func(g string) {
			units := []string{"um", "nm", "nm"}
			editJSON(t, filepath.Join(g, "attributes.json"), func(m map[string]any) {
				datasets(m)[0].(map[string]any)["transform"].(map[string]any)["units"] = units
			})
			setTransform(t, filepath.Join(g, "s0", "attributes.json"), func(tx map[string]any) { tx["units"] = units })
		}, "attributes.json", `z is in "um", y in "nm"`},
		{"array and group disagree", func(g string) {
			setTransform(t, filepath.Join(g, "s1", "attributes.json"), func(tx map[string]any) { tx["translate"] = []float64{0, 0, 0} })
		}, filepath.Join("s1", "attributes.json"), "transform disagrees with " + "GROUP" + " multiscales[0].datasets[1].transform: translate [0 0 0], not [12.620000000000001 22 31.5]"},
	}
	for _, tc := range groupCases {
		g := copyCOSEM(t)
		tc.edit(g)
		want := strings.ReplaceAll(tc.want, "GROUP", filepath.Join(g, "attributes.json"))
		_, err := ImageLevels(g)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(g, tc.file)) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant an error naming %s and %q", tc.name, err, filepath.Join(g, tc.file), want)
		}
	}
}

// TestCOSEMTransformAgreesWithinFloatFormatting: a level's array and its
// group may write the same numbers differently (1e-12 apart): they
// agree.
func TestCOSEMTransformAgreesWithinFloatFormatting(t *testing.T) {
	g := copyCOSEM(t)
	setTransform(t, filepath.Join(g, "s1", "attributes.json"), func(tx map[string]any) {
		tx["translate"] = []float64{12.62, 22 + 1e-12, 31.5}
	})
	ls, err := ImageLevels(g)
	if err != nil || math.Abs(ls[1].Origin[0]-12.62) > 1e-12 {
		t.Fatalf("levels %+v, %v", ls, err)
	}
}

// TestCOSEMZarrGroup: fibsem-tools writes the same COSEM metadata into
// Zarr groups (.zattrs); such a group is a multiscale image too, its
// levels read by the group's transforms.
func TestCOSEMZarrGroup(t *testing.T) {
	g := filepath.Join(t.TempDir(), "raw.zarr", "em")
	data := make([]byte, 4*6*8)
	for i := range data {
		data[i] = byte(i)
	}
	writeV2(t, filepath.Join(g, "s0"), [3]int{4, 6, 8}, [3]int{4, 4, 4}, data)
	writeV2(t, filepath.Join(g, "s1"), [3]int{2, 3, 4}, [3]int{4, 4, 4}, data[:24])
	tx := func(s, o float64) map[string]any {
		return map[string]any{"axes": []string{"z", "y", "x"}, "order": "C", "units": []string{"nm", "nm", "nm"},
			"scale": []float64{2 * s, s, s}, "translate": []float64{o, o, o}}
	}
	attrs, _ := json.Marshal(map[string]any{"multiscales": []any{map[string]any{"datasets": []any{
		map[string]any{"path": "s0", "transform": tx(4, 0)}, map[string]any{"path": "s1", "transform": tx(8, 2)}}}}})
	for p, b := range map[string][]byte{".zgroup": []byte(`{"zarr_format": 2}`), ".zattrs": attrs} {
		if err := os.WriteFile(filepath.Join(g, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := ImageLevels(g)
	if err != nil || len(ls) != 2 || ls[1].Spacing != [3]float64{16, 8, 8} || ls[1].Origin != [3]float64{2, 2, 2} || ls[1].Unit != "nanometer" || ls[1].Shape != [3]int{2, 3, 4} {
		t.Fatalf("levels %+v, %v", ls, err)
	}
}

// TestCOSEMOverHTTP: a COSEM group served over HTTP (as OpenOrganelle's
// are, from object storage) lists the same levels and reads the same
// voxels as the local one.
func TestCOSEMOverHTTP(t *testing.T) {
	e := loadCOSEM(t)
	srv := newTestServer(t, nil)
	for _, g := range e.Groups {
		u := srv.URL + "/cosem/" + g.Path
		ls, err := ImageLevels(u)
		local, lerr := ImageLevels(filepath.Join("testdata", "cosem", g.Path))
		if err != nil || lerr != nil || len(ls) != len(local) {
			t.Fatalf("%s: levels %+v, %v; local %+v, %v", u, ls, err, local, lerr)
		}
		for k := range ls {
			if ls[k] != local[k] {
				t.Errorf("%s level %d: %+v, local %+v", u, k, ls[k], local[k])
			}
		}
		f, err := OpenWith(u, Options{TargetSpacing: g.Levels[1].Spacing})
		if err != nil {
			t.Fatal(err)
		}
		if sha := voxelSHA(readAll(t, f, volume.Whole(f.Header().Shape))); sha != g.Levels[1].SHA {
			t.Errorf("%s level 1 over HTTP: sha256 %s, want %s", u, sha, g.Levels[1].SHA)
		}
		f.Close()
	}
}
