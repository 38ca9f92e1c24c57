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
