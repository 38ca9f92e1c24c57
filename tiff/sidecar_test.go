package tiff

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestNNUNetFixtures reads the pairs written as nnU-Net writes them
// (testdata/nnunet/make_fixtures.py): a prediction as Tiff3DIO.write_seg
// writes it, and a channel-0000 image whose CASE.json drops the suffix.
// Shape, voxels and the sidecar's spacing are checked against
// expected.json.
func TestNNUNetFixtures(t *testing.T) {
	volumetest.Conformance(t, "testdata/nnunet", Open, 2)
}

// TestSidecarWins: the image fixture's ImageJ metadata says 9 µm between
// planes and 0.3 µm pixels; its sidecar says (3, 1.25, 1.5) with no unit,
// and nnU-Net reads only the sidecar. Without the sidecar beside it the
// same file reads the ImageJ spacing, so the test tells the two apart.
// With a sidecar that agrees with ImageJ, ImageJ's unit is kept.
func TestSidecarWins(t *testing.T) {
	const img = "testdata/nnunet/case_002_0000.tif"
	f, err := Open(img)
	if err != nil {
		t.Fatal(err)
	}
	h := f.Header()
	f.Close()
	if h.Spacing != [3]float64{3, 1.25, 1.5} || h.Unit != "" {
		t.Errorf("with the sidecar: spacing %v unit %q, want [3 1.25 1.5] and no unit", h.Spacing, h.Unit)
	}
	alone := filepath.Join(t.TempDir(), "case_002_0000.tif")
	if err := os.WriteFile(alone, volumetest.MustRead(t, img), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = Open(alone)
	if err != nil {
		t.Fatal(err)
	}
	h = f.Header()
	f.Close()
	if h.Spacing[0] != 9 || h.Unit != "micrometer" {
		t.Errorf("without the sidecar: spacing %v unit %q, want ImageJ's 9 µm between planes", h.Spacing, h.Unit)
	}
	// A sidecar that agrees with the ImageJ spacing: the numbers are in
	// ImageJ's unit, which is kept.
	if err := os.WriteFile(filepath.Join(filepath.Dir(alone), "case_002.json"), []byte(`{"spacing": [9, 0.3, 0.3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = Open(alone)
	if err != nil {
		t.Fatal(err)
	}
	h = f.Header()
	f.Close()
	if h.Spacing != [3]float64{9, 0.3, 0.3} || h.Unit != "micrometer" {
		t.Errorf("with an agreeing sidecar: spacing %v unit %q, want [9 0.3 0.3] micrometer", h.Spacing, h.Unit)
	}
}

func TestSidecarPaths(t *testing.T) {
	for in, want := range map[string][]string{
		"d/CASE.tif":        {"d/CASE.json"},
		"d/CASE_0000.tif":   {"d/CASE_0000.json", "d/CASE.json"},
		"d/CASE_0012.TIFF":  {"d/CASE_0012.json", "d/CASE.json"},
		"d/CASE_000.tif":    {"d/CASE_000.json"},
		"d/CASE_00a0.tif":   {"d/CASE_00a0.json"},
		"d/CASE-0000.tif":   {"d/CASE-0000.json"},
		"d/_0000.tif":       {"d/_0000.json"},
		"d/a.b_0001.tif":    {"d/a.b_0001.json", "d/a.b.json"},
		"CASE_0001.tif":     {"CASE_0001.json", "CASE.json"},
		"d/x.ome.tif":       {"d/x.ome.json"},
		"d/CASE_12345.tiff": {"d/CASE_12345.json"},
	} {
		if got := sidecarPaths(in); !reflect.DeepEqual(got, want) {
			t.Errorf("sidecarPaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSidecarCases puts JSON files of every kind beside a copy of the
// label fixture (whose own metadata gives spacing 1, 1, 1): sidecars are
// read, files that are no sidecar are ignored, and broken sidecars are
// errors naming the JSON file (and the key, for a bad "spacing").
func TestSidecarCases(t *testing.T) {
	tif := volumetest.MustRead(t, "testdata/nnunet/case_001.tif")
	one := [3]float64{1, 1, 1}
	big := `{"spacing": [2, 3, 4], "pad": "` + strings.Repeat("x", maxSidecar) + `"}`
	for _, c := range []struct {
		name  string
		tif   string            // the file opened
		json  map[string]string // JSON files beside it
		dirs  []string          // folders beside it
		want  [3]float64        // the spacing read, when no error
		err   string            // the JSON file the error names ("": none)
		says  []string
		ofTif bool
	}{
		{name: "no sidecar", tif: "c.tif", want: one},
		{name: "sidecar", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [2, 0.5, 0.25]}`}, want: [3]float64{2, 0.5, 0.25}},
		{name: "integers and other keys", tif: "c.tif", json: map[string]string{"c.json": `{"origin": [1,2,3], "spacing": [3, 2, 1]}`}, want: [3]float64{3, 2, 1}},
		{name: "channel suffix", tif: "c_0000.tif", json: map[string]string{"c.json": `{"spacing": [5, 6, 7]}`}, want: [3]float64{5, 6, 7}},
		{name: "own name first", tif: "c_0000.tif", json: map[string]string{"c_0000.json": `{"spacing": [1, 2, 2]}`, "c.json": `{"spacing": [5, 6, 7]}`}, want: [3]float64{1, 2, 2}},
		{name: "unrelated own name, then the case's", tif: "c_0000.tif", json: map[string]string{"c_0000.json": `{"scroll": "PHerc"}`, "c.json": `{"spacing": [5, 6, 7]}`}, want: [3]float64{5, 6, 7}},
		{name: "no spacing key", tif: "c.tif", json: map[string]string{"c.json": `{"voxel_size": [2, 2, 2]}`}, want: one},
		{name: "not an object", tif: "c.tif", json: map[string]string{"c.json": `[2, 2, 2]`}, want: one},
		{name: "key case matters", tif: "c.tif", json: map[string]string{"c.json": `{"Spacing": [2, 2, 2]}`}, want: one},
		{name: "too large", tif: "c.tif", json: map[string]string{"c.json": big}, want: one},
		{name: "a folder", tif: "c.tif", dirs: []string{"c.json"}, want: one},
		{name: "not JSON", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, 2, 3]`}, err: "c.json", says: []string{"nnU-Net spacing sidecar", "not JSON"}},
		{name: "NaN as Python writes it", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [NaN, 1, 1]}`}, err: "c.json", says: []string{"not JSON"}},
		{name: "suffix sidecar not JSON", tif: "c_0003.tif", json: map[string]string{"c.json": `spacing: 1`}, err: "c.json", says: []string{"not JSON"}},
		{name: "two numbers", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, 2]}`}, err: "c.json", says: []string{`"spacing" is [1, 2]`, "3 positive finite numbers"}},
		{name: "four numbers", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, 2, 3, 4]}`}, err: "c.json", says: []string{`"spacing"`}},
		{name: "zero", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, 0, 3]}`}, err: "c.json", says: []string{`"spacing"`}},
		{name: "negative", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, -2, 3]}`}, err: "c.json", says: []string{`"spacing"`}},
		{name: "overflow", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": [1, 1e400, 3]}`}, err: "c.json", says: []string{`"spacing"`}},
		{name: "strings", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": ["1", "2", "3"]}`}, err: "c.json", says: []string{`"spacing"`}},
		{name: "null", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": null}`}, err: "c.json", says: []string{`"spacing" is null`}},
		{name: "a number", tif: "c.tif", json: map[string]string{"c.json": `{"spacing": 1}`}, err: "c.json", says: []string{`"spacing" is 1,`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, c.tif)
			if err := os.WriteFile(p, tif, 0o644); err != nil {
				t.Fatal(err)
			}
			for n, b := range c.json {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range c.dirs {
				if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := volume.Open(p)
			if c.err != "" {
				if err == nil {
					f.Close()
					t.Fatal("no error")
				}
				msg := err.Error()
				for _, w := range append([]string{filepath.Join(dir, c.err), p}, c.says...) {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q does not say %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h := f.Header()
			if h.Spacing != c.want {
				t.Errorf("spacing %v, want %v", h.Spacing, c.want)
			}
			if a := h.Affine; a[0][0] != c.want[2] || a[1][1] != c.want[1] || a[2][2] != c.want[0] || a[3][3] != 1 || a[0][3] != 0 {
				t.Errorf("affine %v, want the diagonal of %v", a, c.want)
			}
			if h.Shape != [3]int{6, 9, 11} {
				t.Errorf("shape %v", h.Shape)
			}
		})
	}
}

// TestSidecarNotForFolders: a folder of slices reads no sidecar, not even
// a broken one named as the folder's would be.
func TestSidecarNotForFolders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s0.tif", "s1.tif"} {
		if err := os.WriteFile(filepath.Join(dir, n), onePage("ImageJ=1.54f\nimages=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(dir+".json", []byte(`{"spacing": [7, 7`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s := f.Header().Spacing; s != [3]float64{1, 1, 1} {
		t.Errorf("spacing %v, want 1, 1, 1", s)
	}
}
