package data

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// writeGrid writes a one-level OME-Zarr image as writeImage does, at the
// given spacing, its axes without a unit.
func writeGrid(t *testing.T, dir string, shape [3]int, spacing, origin [3]float64, labels bool, value func(z, y, x int) float32) {
	t.Helper()
	writeGridUnit(t, dir, shape, spacing, origin, "", labels, value)
}

// writeGridUnit is writeGrid with unit on the spatial axes.
func writeGridUnit(t *testing.T, dir string, shape [3]int, spacing, origin [3]float64, unit string, labels bool, value func(z, y, x int) float32) {
	t.Helper()
	spec := zarr.ImageSpec{Shape: shape, Chunks: [3]int{8, 8, 8}, DType: "float32", Spacing: spacing, Origin: origin, Unit: unit, Compressor: "zlib"}
	if labels {
		spec.DType = "uint8"
	}
	w, err := zarr.CreateImage(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	n := shape[0] * shape[1] * shape[2]
	f, u := make([]float32, n), make([]uint8, n)
	for z := range shape[0] {
		for y := range shape[1] {
			for x := range shape[2] {
				i := (z*shape[1]+y)*shape[2] + x
				f[i] = value(z, y, x)
				u[i] = uint8(f[i])
			}
		}
	}
	var src any = f
	if labels {
		src = u
	}
	if err := w.WriteBlock(volume.Whole(shape), src); err != nil {
		t.Fatal(err)
	}
}

// pyramidLevel is one level of a raw test pyramid.
type pyramidLevel struct {
	path            string
	shape           [3]int
	spacing, origin [3]float64
	value           func(z, y, x int) float32
}

// writePyramid writes an OME-NGFF 0.4 multiscale image of the levels
// (each written by writeGrid, then moved into one group).
func writePyramid(t *testing.T, dir string, levels []pyramidLevel) {
	t.Helper()
	var datasets []any
	for k, l := range levels {
		tmp := dir + ".level" + l.path
		writeGrid(t, tmp, l.shape, l.spacing, l.origin, false, l.value)
		if k == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(filepath.Join(tmp, "0"), filepath.Join(dir, l.path)); err != nil {
			t.Fatal(err)
		}
		datasets = append(datasets, map[string]any{"path": l.path, "coordinateTransformations": []any{
			map[string]any{"type": "scale", "scale": l.spacing[:]},
			map[string]any{"type": "translation", "translation": l.origin[:]},
		}})
	}
	axes := []any{}
	for _, n := range []string{"z", "y", "x"} {
		axes = append(axes, map[string]string{"name": n, "type": "space", "unit": "nanometer"})
	}
	attrs, _ := json.Marshal(map[string]any{"multiscales": []any{map[string]any{"version": "0.4", "axes": axes, "datasets": datasets}}})
	if err := os.WriteFile(filepath.Join(dir, ".zattrs"), attrs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".zgroup"), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

// resCrop is a label crop of the resolution fixture.
type resCrop struct {
	id, file        string
	shape           [3]int
	spacing, origin [3]float64 // origin: where the manifest places voxel 0
}

// resClass is every crop's label: classes 0..2 by position, so that a
// voxel read from the wrong place shows.
func resClass(z, y, x int) float32 {
	switch {
	case (z+2*y+3*x)%4 == 0:
		return 1
	case (3*z+y)%5 == 1:
		return 2
	}
	return 0
}

// expectPlacement computes, by trying every raw voxel, the box of the
// raw level (spacing s, origin o, shape n) that crop c covers wholly (a
// voxel spans its centre ± s/2), and each box voxel's label: the crop's
// voxel with the nearest centre (ties to the larger index).
func expectPlacement(c resCrop, s, o [3]float64, n [3]int, value func(z, y, x int) float32) (volume.Box, []uint8) {
	var box volume.Box
	var idx [3][]int
	for a := range 3 {
		lo := c.origin[a] - c.spacing[a]/2
		hi := c.origin[a] + (float64(c.shape[a])-0.5)*c.spacing[a]
		box.Lo[a], box.Hi[a] = -1, -1
		for i := range n[a] {
			if o[a]+(float64(i)-0.5)*s[a] >= lo-1e-9 && o[a]+(float64(i)+0.5)*s[a] <= hi+1e-9 {
				if box.Lo[a] < 0 {
					box.Lo[a] = i
				}
				box.Hi[a] = i + 1
				pos := o[a] + float64(i)*s[a]
				best, bestD := 0, math.Inf(1)
				for j := range c.shape[a] {
					if d := math.Abs(pos - (c.origin[a] + float64(j)*c.spacing[a])); d <= bestD+1e-9 {
						best, bestD = j, math.Min(d, bestD)
					}
				}
				idx[a] = append(idx[a], best)
			}
		}
	}
	var lbl []uint8
	for _, z := range idx[0] {
		for _, y := range idx[1] {
			for _, x := range idx[2] {
				lbl = append(lbl, uint8(value(z, y, x)))
			}
		}
	}
	return box, lbl
}

// resFixture writes the raw pyramid raw.zarr (s0 at 8 nm, s1 at 16 nm,
// centred on s0's voxel pairs as OME-NGFF pyramids are) and the crops'
// label files (each at its own spacing, its origin in its metadata).
func resFixture(t *testing.T, crops []resCrop) (dir string, levels []pyramidLevel) {
	dir = t.TempDir()
	levels = []pyramidLevel{
		{path: "s0", shape: [3]int{24, 32, 32}, spacing: [3]float64{8, 8, 8},
			value: func(z, y, x int) float32 { return float32((z*7+y*3+x)%23) + 0.5*float32(z) }},
		{path: "s1", shape: [3]int{12, 16, 16}, spacing: [3]float64{16, 16, 16}, origin: [3]float64{4, 4, 4},
			value: func(z, y, x int) float32 { return 1000 + float32(z*256+y*16+x) }},
	}
	writePyramid(t, filepath.Join(dir, "raw.zarr"), levels)
	for _, c := range crops {
		writeGrid(t, filepath.Join(dir, c.file), c.shape, c.spacing, c.origin, true, resClass)
	}
	return dir, levels
}

// checkResCases checks each case against its crop: the raw level it is
// on (want[k], an index into levels; its image path the level's), the box
// and labels expectPlacement computes, the image voxels the level's, and
// the weights cellmap's from those labels' class counts.
func checkResCases(t *testing.T, cfg config.Data, dir string, levels []pyramidLevel, crops []resCrop, want []int, rawPath []string) {
	t.Helper()
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != len(crops) {
		t.Fatalf("%d cases, want %d", len(ds.Cases), len(crops))
	}
	counts := make([][3]int64, len(crops))
	for k, c := range crops {
		l := levels[want[k]]
		box, lbl := expectPlacement(c, l.spacing, l.origin, l.shape, resClass)
		cs := ds.Cases[k]
		if img := volume.WindowPath(filepath.Join(dir, rawPath[k]), box); cs.ID != c.id || cs.Images[0] != img {
			t.Errorf("crop %s: case %s image %s, want %s", c.id, cs.ID, cs.Images[0], img)
			continue
		}
		v, err := ReadCase(cfg, cs, 1)
		if err != nil {
			t.Fatalf("crop %s: %v", c.id, err)
		}
		if v.Shape != box.Size() {
			t.Fatalf("crop %s: shape %v, want %v", c.id, v.Shape, box.Size())
		}
		i := 0
		for z := box.Lo[0]; z < box.Hi[0]; z++ {
			for y := box.Lo[1]; y < box.Hi[1]; y++ {
				for x := box.Lo[2]; x < box.Hi[2]; x++ {
					if v.Label[i] != lbl[i] || v.Image[0][i] != l.value(z, y, x) {
						t.Fatalf("crop %s, raw voxel (%d %d %d) of %s: label %d image %g, want %d and %g", c.id, z, y, x, l.path, v.Label[i], v.Image[0][i], lbl[i], l.value(z, y, x))
					}
					counts[k][lbl[i]]++
					i++
				}
			}
		}
	}
	var total [3]float64
	sum := 0.0
	for _, c := range counts {
		for v := 1; v < 3; v++ {
			total[v] += float64(c[v])
			sum += float64(c[v])
		}
	}
	for k, c := range counts {
		w := 0.0
		for v := 1; v < 3; v++ {
			w += float64(c[v]) * (1 - total[v]/sum)
		}
		if got := ds.Cases[k].Weight; math.Abs(got-w) > 1e-9*w {
			t.Errorf("crop %s: weight %g, want %g from its class counts %v on the raw's grid", crops[k].id, got, w, c)
		}
	}
}

var resCrops = []resCrop{
	// On the raw group's levels: at s0's and s1's spacing, no resampling.
	{id: "at8", file: "crops/at8.zarr", shape: [3]int{6, 8, 8}, spacing: [3]float64{8, 8, 8}, origin: [3]float64{16, 24, 40}},
	{id: "at16", file: "crops/at16.zarr", shape: [3]int{4, 5, 6}, spacing: [3]float64{16, 16, 16}, origin: [3]float64{36, 52, 20}},
	// 2× finer than s0, with ties (s0's centres halfway between its
	// voxels'), and the same as s0 on z only.
	{id: "at4", file: "crops/at4.zarr", shape: [3]int{10, 12, 9}, spacing: [3]float64{4, 4, 4}, origin: [3]float64{30, 50, 62}},
	{id: "aniso", file: "crops/aniso.zarr", shape: [3]int{4, 10, 10}, spacing: [3]float64{8, 4, 4}, origin: [3]float64{80, 162, 14}},
	// On the array raw.zarr/s0 (no levels to choose): 2× coarser (on
	// s1's grid) and 1.5× coarser.
	{id: "coarse", file: "crops/coarse.zarr", shape: [3]int{3, 4, 5}, spacing: [3]float64{16, 16, 16}, origin: [3]float64{36, 20, 4}},
	{id: "at12", file: "crops/at12.zarr", shape: [3]int{5, 5, 5}, spacing: [3]float64{12, 12, 12}, origin: [3]float64{50, 60, 70}},
}

const resManifest = `classes: {background: 0, a: 1, b: 2}
volumes:
  - raw: raw.zarr
    crops:
      - {id: at8, label: crops/at8.zarr, offset: [2, 3, 5]}
      - {id: at16, label: crops/at16.zarr}
      - {id: at4, label: crops/at4.zarr}
      - {id: aniso, label: crops/aniso.zarr, translation: [80, 162, 14]}
  - raw: raw.zarr/s0
    crops:
      - {id: coarse, label: crops/coarse.zarr}
      - {id: at12, label: crops/at12.zarr}
`

// TestManifestResolutions: crops at the raw group's levels' spacings are
// cases on those levels, unresampled; crops at other spacings (2× finer,
// 2× coarser, 1.5×, anisotropic) read their labels resampled by nearest
// neighbour onto the raw's grid over the raw voxels they wholly cover,
// through every reader (whole case, both sources, Verify), and their
// class counts (the weights) are the resampled labels'.
func TestManifestResolutions(t *testing.T) {
	dir, levels := resFixture(t, resCrops)
	p := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(p, []byte(resManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	checkResCases(t, cfg, dir, levels, resCrops, []int{0, 1, 0, 0, 0, 0},
		[]string{"raw.zarr", "raw.zarr/s1", "raw.zarr", "raw.zarr", "raw.zarr/s0", "raw.zarr/s0"})
	// The resampled labels' paths name the resampling.
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ds.Cases[2].Label, "#resample=") || strings.Contains(ds.Cases[0].Label, "#") {
		t.Errorf("labels %s, %s: want the second resampled, the first the file", ds.Cases[2].Label, ds.Cases[0].Label)
	}
	// The loader's sources read the same labels as ReadCase.
	for _, src := range []string{"gz", "cache"} {
		c := cfg
		c.Source = src
		l, err := Open(c, Options{Seed: 1, Iterations: 1, Patch: [3]int{4, 4, 4}, Batch: 1, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		for k := range resCrops {
			v, err := l.LoadCase(context.Background(), k)
			if err != nil {
				t.Fatalf("%s source, crop %s: %v", src, resCrops[k].id, err)
			}
			want, err := ReadCase(cfg, ds.Cases[k], 1)
			if err != nil {
				t.Fatal(err)
			}
			if string(v.Label) != string(want.Label) {
				t.Errorf("%s source, crop %s: labels differ from ReadCase's", src, resCrops[k].id)
			}
		}
		l.Close()
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{4, 4, 4}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}
}

// TestManifestResolutionsSameBatches: crops resampled and on several
// levels give the same batches for 1 and 3 workers.
func TestManifestResolutionsSameBatches(t *testing.T) {
	dir, _ := resFixture(t, resCrops)
	p := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(p, []byte(resManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	base := filled(config.Data{Manifest: p, Fold: -1})
	opt := Options{Seed: 3, Iterations: 2, Patch: [3]int{4, 8, 8}, Batch: 2, Augment: nnunetAug(t)}
	sameBatchesEverywhere(t, base, opt, []string{"gz"}, []int{1, 3}, 2, 4, nil)
}

// TestManifestTargetSpacing: the manifest's spacing puts every crop on
// the raw's level there, resampling the labels at other spacings.
func TestManifestTargetSpacing(t *testing.T) {
	crops := resCrops[:3]
	dir, levels := resFixture(t, crops)
	p := filepath.Join(dir, "manifest.yaml")
	m := "spacing: [16, 16, 16]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - {id: at8, label: crops/at8.zarr}\n      - {id: at16, label: crops/at16.zarr}\n      - {id: at4, label: crops/at4.zarr}\n"
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	checkResCases(t, cfg, dir, levels, crops, []int{1, 1, 1}, []string{"raw.zarr/s1", "raw.zarr/s1", "raw.zarr/s1"})
}

// TestManifestResolutionErrors: crops that cannot be placed are refused
// naming the manifest, the crop and the field.
func TestManifestResolutionErrors(t *testing.T) {
	dir, _ := resFixture(t, append(resCrops[:3:3], resCrop{file: "crops/tiny.zarr", shape: [3]int{1, 4, 4}, spacing: [3]float64{4, 4, 4}, origin: [3]float64{30, 50, 62}}))
	for _, tc := range []struct{ manifest, want string }{
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/tiny.zarr\n", "crops[0] (tiny): the label's origin [30 50 62]: the label " + filepath.Join(dir, "crops/tiny.zarr") + " (spacing [4 4 4], shape [1 4 4]) on the raw " + filepath.Join(dir, "raw.zarr") + " (spacing [8 8 8] nanometer): axis 0"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at4.zarr\n        offset: [1, 1, 1]\n", "crops[0] (at4): offset [1 1 1]"},
		{"spacing: [300, 12, 12]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at8.zarr\n", "volumes[0].raw: spacing [300 12 12]: the raw " + filepath.Join(dir, "raw.zarr") + " has no level at it, and " + filepath.Join(dir, "raw.zarr") + " (spacing [8 8 8] nanometer) cannot be interpolated onto it: axis 0 is 192 long (24 voxels of 8), less than one voxel at 300"},
		{"spacing: [16, 16, 16]\nvolumes:\n  - raw: raw.zarr/s0\n    crops:\n      - label: crops/at8.zarr\n        offset: [1, 1, 1]\n", "offset [1 1 1]: counts voxels of the raw, and the label " + filepath.Join(dir, "crops/at8.zarr") + " (spacing [8 8 8]) is not on the raw's grid (" + filepath.Join(dir, "raw.zarr/s0") + " interpolated to spacing [16 16 16] nanometer"},
		{"spacing: [16, 16]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at8.zarr\n", "spacing [16 16]: want [z, y, x]"},
		{"spacing: [0, 8, 8]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at8.zarr\n", "spacing [0 8 8]: want finite spacings > 0"},
		{"spacing: [-8, 8, 8]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at8.zarr\n", "spacing [-8 8 8]: want finite spacings > 0"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/at4.zarr\n        translation: [30, 50, 1000]\n", "is not inside the raw"},
	} {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(tc.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(filled(config.Data{Manifest: p}))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "data.manifest "+p) {
			t.Errorf("%q:\nerror %v\nwant one naming %s and %q", tc.manifest, err, p, tc.want)
		}
	}
}

// TestManifestResolutionMask: a resampled crop's mask is resampled as its
// label is: the ignore label wherever the mask voxel nearest a raw voxel
// is 0, through ReadCase and the gz source's store handles.
func TestManifestResolutionMask(t *testing.T) {
	const ignore = 200
	c := resCrops[2] // at 4 nm, resampled onto s0
	dir, levels := resFixture(t, []resCrop{c})
	keep := func(z, y, x int) float32 { return map[bool]float32{true: 1}[x >= 4] }
	writeGrid(t, filepath.Join(dir, "crops/mask.zarr"), c.shape, c.spacing, c.origin, true, keep)
	p := filepath.Join(dir, "manifest.yaml")
	m := "volumes:\n  - raw: raw.zarr\n    crops:\n      - {id: at4, label: crops/at4.zarr, mask: crops/mask.zarr}\n"
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	masked := func(z, y, x int) float32 {
		if keep(z, y, x) == 0 {
			return ignore
		}
		return resClass(z, y, x)
	}
	_, want := expectPlacement(c, levels[0].spacing, levels[0].origin, levels[0].shape, masked)
	checkMaskedCase(t, p, want, ignore, [3]int{4, 4, 4})
}

// checkMaskedCase reads the manifest p's first case (no normalisation,
// loss.ignore_label ignore) by ReadCase and by the loader's gz source
// (patch size patch) and holds both labels to want, which must mask out
// some voxels but not all (else the fixture tests nothing).
func checkMaskedCase(t *testing.T, p string, want []uint8, ignore uint8, patch [3]int) {
	t.Helper()
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}, IgnoreLabel: int(ignore)})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ReadCase(cfg, ds.Cases[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(cfg, Options{Seed: 1, Iterations: 1, Patch: patch, Batch: 1, IgnoreLabel: int(ignore), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g, err := l.LoadCase(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ignored := 0
	for i := range want {
		if v.Label[i] != want[i] || g.Label[i] != want[i] {
			t.Fatalf("voxel %d: ReadCase %d, gz source %d, want %d", i, v.Label[i], g.Label[i], want[i])
		}
		if want[i] == ignore {
			ignored++
		}
	}
	if ignored == 0 || ignored == len(want) {
		t.Fatalf("%d of %d voxels masked out: the fixture tests nothing", ignored, len(want))
	}
}
