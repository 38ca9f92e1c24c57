package data

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/zarr"
)

// writeCOSEMPyramid writes the levels as an N5 multiscale group the way
// OpenOrganelle publishes its EM volumes (cellmap-schemas' COSEM
// layout): group is a path inside an N5 container (raw.n5/em/fibsem),
// each level an N5 float32 array (raw blocks, 8³) whose "transform"
// attribute (axes z, y, x; order C; units nm) gives its spacing and
// origin, beside Neuroglancer's pixelResolution, and the group's
// "multiscales" lists the levels with the same transforms.
func writeCOSEMPyramid(t *testing.T, group string, levels []pyramidLevel) {
	t.Helper()
	write := func(path string, v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The container's root and the groups above the image.
	root := group
	for !strings.HasSuffix(root, ".n5") {
		root = filepath.Dir(root)
	}
	for d := filepath.Dir(group); ; d = filepath.Dir(d) {
		write(filepath.Join(d, "attributes.json"), map[string]any{"n5": "2.0.0"})
		if d == root {
			break
		}
	}
	const block = 8
	var datasets []any
	for _, l := range levels {
		transform := map[string]any{"axes": []string{"z", "y", "x"}, "order": "C", "units": []string{"nm", "nm", "nm"},
			"scale": l.spacing[:], "translate": l.origin[:]}
		datasets = append(datasets, map[string]any{"path": l.path, "transform": transform})
		dir := filepath.Join(group, l.path)
		n := l.shape
		write(filepath.Join(dir, "attributes.json"), map[string]any{
			"dimensions": []int{n[2], n[1], n[0]}, "blockSize": []int{block, block, block}, "dataType": "float32",
			"compression": map[string]any{"type": "raw"}, "transform": transform,
			"pixelResolution": map[string]any{"dimensions": []float64{l.spacing[2], l.spacing[1], l.spacing[0]}, "unit": "nm"},
		})
		for bz := 0; bz*block < n[0]; bz++ {
			for by := 0; by*block < n[1]; by++ {
				for bx := 0; bx*block < n[2]; bx++ {
					sz := [3]int{min(block, n[0]-bz*block), min(block, n[1]-by*block), min(block, n[2]-bx*block)}
					// N5's block: mode 0, 3 dimensions, its size x first,
					// then the values big-endian, x fastest.
					b := binary.BigEndian.AppendUint16(nil, 0)
					b = binary.BigEndian.AppendUint16(b, 3)
					for _, s := range []int{sz[2], sz[1], sz[0]} {
						b = binary.BigEndian.AppendUint32(b, uint32(s))
					}
					for z := range sz[0] {
						for y := range sz[1] {
							for x := range sz[2] {
								v := l.value(bz*block+z, by*block+y, bx*block+x)
								b = binary.BigEndian.AppendUint32(b, math.Float32bits(v))
							}
						}
					}
					p := filepath.Join(dir, fmt.Sprint(bx), fmt.Sprint(by), fmt.Sprint(bz))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	write(filepath.Join(group, "attributes.json"), map[string]any{
		"n5": "2.0.0", "axes": []string{"x", "y", "z"}, "units": []string{"nm", "nm", "nm"},
		"pixelResolution": map[string]any{"dimensions": []float64{levels[0].spacing[2], levels[0].spacing[1], levels[0].spacing[0]}, "unit": "nm"},
		"multiscales":     []any{map[string]any{"name": filepath.Base(group), "datasets": datasets}},
	})
}

// TestManifestN5Multiscale: a manifest whose raw is an OpenOrganelle-
// style N5 group (COSEM transforms, in nm) places its crops as on an
// OME-Zarr image: crops at s0's and s1's spacings on those levels,
// unresampled, by offset, translation or their own origin; a crop at 4
// nm resampled onto s0; a crop written in micrometres on s1 by the N5
// transform's unit; and the manifest's spacing puts every crop on s1.
func TestManifestN5Multiscale(t *testing.T) {
	dir, levels := resFixture(t, resCrops[:4])
	const raw = "raw.n5/em/fibsem"
	writeCOSEMPyramid(t, filepath.Join(dir, raw), levels)
	ls, err := zarr.ImageLevels(filepath.Join(dir, raw))
	if err != nil || len(ls) != 2 || ls[1].Spacing != [3]float64{16, 16, 16} || ls[1].Origin != [3]float64{4, 4, 4} || ls[1].Unit != "nanometer" {
		t.Fatalf("the N5 group's levels: %+v, %v", ls, err)
	}
	// at16 again, in µm (its spacing 0.016): on s1 only if the raw's
	// nanometres are read from its transform.
	inUnit(t, dir, resCrops[1], "crops/at16um.zarr", "micrometer", 1000, resClass)
	manifest := `classes: {background: 0, a: 1, b: 2}
volumes:
  - raw: RAW
    crops:
      - {id: at8, label: crops/at8.zarr, offset: [2, 3, 5]}
      - {id: at16, label: crops/at16.zarr}
      - {id: at4, label: crops/at4.zarr}
      - {id: aniso, label: crops/aniso.zarr, translation: [80, 162, 14]}
      - {id: at16um, label: crops/at16um.zarr}
`
	p := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(manifest, "RAW", raw)), 0o644); err != nil {
		t.Fatal(err)
	}
	crops := append(resCrops[:4:4], resCrop{id: "at16um", shape: resCrops[1].shape, spacing: resCrops[1].spacing, origin: resCrops[1].origin})
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	s1 := raw + "/s1"
	checkResCases(t, cfg, dir, levels, crops, []int{0, 1, 0, 0, 1}, []string{raw, s1, raw, raw, s1})

	// The manifest's spacing: every crop on s1 (at8 and at4 resampled).
	m := "spacing: [16, 16, 16]\nvolumes:\n  - raw: " + raw + "\n    crops:\n      - {id: at8, label: crops/at8.zarr}\n      - {id: at16, label: crops/at16.zarr}\n      - {id: at4, label: crops/at4.zarr}\n"
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	checkResCases(t, cfg, dir, levels, resCrops[:3], []int{1, 1, 1}, []string{s1, s1, s1})

	// A spacing the group has no level at: the crops are on the group
	// read at it, interpolated from s0 (the coarsest level no coarser).
	m = "spacing: [12, 12, 12]\nvolumes:\n  - raw: " + raw + "\n    crops:\n      - {id: at8, label: crops/at8.zarr}\n"
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatalf("spacing 12 on the N5 group: %v", err)
	}
	if img := ds.Cases[0].Images[0]; !strings.HasPrefix(img, filepath.Join(dir, raw)+"#resample=shape=16,21,21&spacing=12,12,12&origin=2,2,2&at=0,0,0&interp=linear#window=") {
		t.Errorf("spacing 12 on the N5 group: image %s, want a window of s0 interpolated onto the 12 nm grid from its first face", img)
	}
	if _, err := ReadCase(cfg, ds.Cases[0], 1); err != nil {
		t.Fatal(err)
	}
}
