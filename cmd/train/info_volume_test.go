package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfoOtherFormats: `train info --json` on NRRD, MetaImage and TIFF
// fixtures (a folder of TIFF slices among them) gives the shape (x, y, z), the voxel checksum and the sum the
// reference tools recorded in each format's expected.json.
func TestInfoOtherFormats(t *testing.T) {
	for _, pkg := range []string{"nrrd", "metaimage", "tiff"} {
		b, err := os.ReadFile(filepath.Join("..", "..", pkg, "testdata", "expected.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Files []struct {
				File     string  `json:"file"`
				Shape    []int   `json:"shape"` // (D, H, W)
				Channels int     `json:"channels"`
				SHA      string  `json:"sha256_f32le"`
				Sum      float64 `json:"sum"`
			} `json:"files"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Files) == 0 {
			t.Fatalf("%s: no fixtures", pkg)
		}
		// The first fixture and the last (for TIFF, a folder of slices).
		for _, f := range []struct {
			File     string  `json:"file"`
			Shape    []int   `json:"shape"` // (D, H, W)
			Channels int     `json:"channels"`
			SHA      string  `json:"sha256_f32le"`
			Sum      float64 `json:"sum"`
		}{doc.Files[0], doc.Files[len(doc.Files)-1]} {
			path := filepath.Join("..", "..", pkg, "testdata", f.File)
			out, errb, err := runCmd(t, "info", "--json", path)
			if err != nil {
				t.Fatalf("%s: %v\n%s", path, err, errb)
			}
			var got struct {
				Format string `json:"format"`
				Shape  []int  `json:"shape"`
				SHA    string `json:"float32_sha256"`
				Stats  struct {
					Sum float64 `json:"sum"`
				} `json:"stats"`
			}
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 1<<20)
			if !sc.Scan() || json.Unmarshal(sc.Bytes(), &got) != nil {
				t.Fatalf("%s: no JSON line: %s", path, out)
			}
			want := []int{f.Shape[2], f.Shape[1], f.Shape[0]}
			if f.Channels > 1 {
				want = append(want, f.Channels)
			}
			if got.Format != pkg || len(got.Shape) != len(want) || got.Shape[0] != want[0] || got.Shape[2] != want[2] ||
				got.SHA != f.SHA || got.Stats.Sum != f.Sum {
				t.Errorf("%s: format %s shape %v sha %s sum %v; want %s %v %s %v", path, got.Format, got.Shape, got.SHA, got.Stats.Sum, pkg, want, f.SHA, f.Sum)
			}
		}
	}
}

// TestInfoUnit: `train info` prints each file's spatial unit, under the
// key "unit" in every format's JSON (as the file states it, normalised;
// "" where the format has no unit), and beside the voxel size in the
// table.
func TestInfoUnit(t *testing.T) {
	for path, want := range map[string]string{
		filepath.Join("..", "..", "testdata", "demo", "imagesTr", "hippocampus_001.nii.gz"): "millimeter",
		filepath.Join("..", "..", "zarr", "testdata", "v2", "ome04.ome.zarr"):               "millimeter",
		filepath.Join("..", "..", "zarr", "testdata", "v2", "n5_raw_u2.n5"):                 "millimeter",
		filepath.Join("..", "..", "tiff", "testdata", "imagej_uint16.tif"):                  "micrometer",
		filepath.Join("..", "..", "metaimage", "testdata", "float32.mha"):                   "",
	} {
		out, errb, err := runCmd(t, "info", "--json", path)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, errb)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v: %s", path, err, out)
		}
		if u, ok := got["unit"].(string); !ok || u != want {
			t.Errorf("%s: unit %v, want %q", path, got["unit"], want)
		}
		if want == "" || strings.HasSuffix(path, ".nii.gz") {
			continue
		}
		out, errb, err = runCmd(t, "info", path)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, errb)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: the table does not print the unit %s:\n%s", path, want, out)
		}
	}
}

// TestInfoLevels: `train info` on a multiscale group — the COSEM N5
// groups cellmap-schemas wrote (transform order C and F) and an OME-Zarr
// image — lists its levels under "levels" (x, y, z as the other keys)
// with the spacing, origin and unit their metadata states, the other
// keys describing level 0; an array (a level named by path) has none.
func TestInfoLevels(t *testing.T) {
	type level struct {
		Path    string     `json:"path"`
		Shape   [3]int     `json:"shape"`
		Spacing [3]float64 `json:"spacing"`
		Origin  [3]float64 `json:"origin"`
		Unit    string     `json:"unit"`
	}
	var doc struct {
		Groups []struct {
			Path   string  `json:"path"`
			Levels []level `json:"levels"` // (z, y, x)
		} `json:"groups"`
	}
	dir := filepath.Join("..", "..", "zarr", "testdata", "cosem")
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Groups) != 2 {
		t.Fatalf("expected.json: %v, %d groups", err, len(doc.Groups))
	}
	xyz := func(l level) level {
		return level{l.Path, [3]int{l.Shape[2], l.Shape[1], l.Shape[0]}, [3]float64{l.Spacing[2], l.Spacing[1], l.Spacing[0]}, [3]float64{l.Origin[2], l.Origin[1], l.Origin[0]}, l.Unit}
	}
	info := func(path string) (got struct {
		Shape   []int      `json:"shape"`
		Spacing [3]float64 `json:"spacing"`
		Levels  []level    `json:"levels"`
	}, raw map[string]any) {
		t.Helper()
		out, errb, err := runCmd(t, "info", "--json", path)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, errb)
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v: %s", path, err, out)
		}
		_ = json.Unmarshal(out.Bytes(), &raw)
		return got, raw
	}
	for _, g := range doc.Groups {
		path := filepath.Join(dir, g.Path)
		got, _ := info(path)
		if len(got.Levels) != len(g.Levels) {
			t.Fatalf("%s: levels %+v, want %d", path, got.Levels, len(g.Levels))
		}
		for k, l := range g.Levels {
			if want := xyz(l); got.Levels[k] != want {
				t.Errorf("%s level %d: %+v, want %+v", path, k, got.Levels[k], want)
			}
		}
		if s0 := xyz(g.Levels[0]); got.Spacing != s0.Spacing || got.Shape[0] != s0.Shape[0] || got.Shape[2] != s0.Shape[2] {
			t.Errorf("%s: shape %v spacing %v, want level 0's %v %v", path, got.Shape, got.Spacing, s0.Shape, s0.Spacing)
		}
		out, errb, err := runCmd(t, "info", path)
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, errb)
		}
		if !strings.Contains(out.String(), "levels          s0     [10 8 6]") || !strings.Contains(out.String(), "s2     [2 2 1]      12 × 16 × 20.96 nanometer  origin (34.5, 26, 17.86)") {
			t.Errorf("%s: the table does not list the levels:\n%s", path, out)
		}
	}
	ome := filepath.Join("..", "..", "zarr", "testdata", "v2", "ome04.ome.zarr")
	if got, _ := info(ome); len(got.Levels) != 2 || got.Levels[1].Path != "1" || got.Levels[1].Spacing != [3]float64{1.4, 1.6, 5} {
		t.Errorf("%s: levels %+v, want 0 and 1 (1 at 1.4 × 1.6 × 5)", ome, got.Levels)
	}
	for _, array := range []string{filepath.Join(dir, doc.Groups[0].Path, "s1"), filepath.Join(ome, "1")} {
		if _, raw := info(array); raw["levels"] != nil {
			t.Errorf("%s (an array): levels %v, want none", array, raw["levels"])
		}
	}
}
