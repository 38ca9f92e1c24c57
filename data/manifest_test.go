package data

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// manifestFixture is a raw OME-Zarr volume with label crops inside it.
type manifestFixture struct {
	dir, raw string
	shape    [3]int
	rawAt    func(z, y, x int) float32
	crops    []fixtureCrop
}

type fixtureCrop struct {
	id, label string
	lo, shape [3]int
	counts    [4]int64 // voxels per class 0..3
}

// writeImage writes a one-block OME-Zarr image (spacing 2 everywhere)
// with value at every voxel.
func writeImage(t *testing.T, dir string, shape [3]int, origin [3]float64, labels bool, value func(z, y, x int) float32) {
	t.Helper()
	spec := zarr.ImageSpec{Shape: shape, Chunks: [3]int{8, 8, 8}, DType: "float32", Spacing: [3]float64{2, 2, 2}, Origin: origin, Compressor: "zlib"}
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

// newManifestFixture writes a 32×40×48 raw volume (spacing 2, origin
// (10, 0, 0)) and three crops: one placed by offset, one by translation,
// one by its own OME origin; the manifest goes to dir/manifest.yaml with
// the extra YAML appended to the first crop.
func newManifestFixture(t *testing.T, extra string) *manifestFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &manifestFixture{dir: dir, raw: filepath.Join(dir, "raw.zarr"), shape: [3]int{32, 40, 48}}
	fx.rawAt = func(z, y, x int) float32 { return float32((z*7+y*3+x)%23) + 0.5*float32(z) }
	writeImage(t, fx.raw, fx.shape, [3]float64{10, 0, 0}, false, fx.rawAt)
	fx.crops = []fixtureCrop{
		{id: "c1", label: "crops/c1.zarr", lo: [3]int{4, 8, 8}, shape: [3]int{12, 16, 16}},
		{id: "c2", label: "crops/c2.zarr", lo: [3]int{16, 20, 24}, shape: [3]int{12, 12, 16}},
		{id: "c3", label: "crops/c3.zarr", lo: [3]int{2, 2, 30}, shape: [3]int{8, 8, 8}},
	}
	for k := range fx.crops {
		c := &fx.crops[k]
		// Class by position: crop c1 holds classes 1 and 2, c2 only 1,
		// c3 1..3 (a third class in one crop only).
		cls := func(z, y, x int) float32 {
			switch {
			case (z+y+x)%5 == 0:
				return 1
			case k != 1 && (x+2*y)%7 == 0:
				return 2
			case k == 2 && z == 3:
				return 3
			}
			return 0
		}
		for z := range c.shape[0] {
			for y := range c.shape[1] {
				for x := range c.shape[2] {
					c.counts[int(cls(z, y, x))]++
				}
			}
		}
		origin := [3]float64{}
		if k == 2 { // placed by its own origin: world = 2·voxel + raw origin
			origin = [3]float64{10 + 2*float64(c.lo[0]), 2 * float64(c.lo[1]), 2 * float64(c.lo[2])}
		}
		writeImage(t, filepath.Join(dir, c.label), c.shape, origin, true, cls)
	}
	m := `classes: {background: 0, mito: 1, er: 2, nucleus: 3}
volumes:
  - raw: raw.zarr
    crops:
      - id: c1
        label: crops/c1.zarr
        offset: [4, 8, 8]
` + extra + `      - id: c2
        label: crops/c2.zarr
        translation: [42, 40, 48]
      - id: c3
        label: crops/c3.zarr
`
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestManifestCropsAsCases: each crop is a case whose image is the raw
// volume's box under it, wherever the manifest placed it (offset,
// translation, the label's own origin), weighted as cellmap weighs crops.
func TestManifestCropsAsCases(t *testing.T) {
	fx := newManifestFixture(t, "")
	cfg := filled(config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml"), Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 3 || ds.LabelNames[2] != "er" || len(ds.Warnings) != 0 {
		t.Fatalf("dataset: %d cases, labels %v, warnings %v", len(ds.Cases), ds.LabelNames, ds.Warnings)
	}
	// cellmap's weights, computed here from the fixture's own counts.
	var total [4]float64
	sum := 0.0
	for _, c := range fx.crops {
		for v := 1; v < 4; v++ {
			total[v] += float64(c.counts[v])
			sum += float64(c.counts[v])
		}
	}
	for k, c := range fx.crops {
		cs := ds.Cases[k]
		want := 0.0
		for v := 1; v < 4; v++ {
			want += float64(c.counts[v]) * (1 - total[v]/sum)
		}
		if cs.ID != c.id || cs.Weight < want*(1-1e-12) || cs.Weight > want*(1+1e-12) {
			t.Errorf("crop %s: case %s weight %g, want %g", c.id, cs.ID, cs.Weight, want)
		}
		v, err := ReadCase(cfg, cs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if v.Shape != c.shape {
			t.Fatalf("crop %s: shape %v, want %v", c.id, v.Shape, c.shape)
		}
		for _, p := range [][3]int{{0, 0, 0}, {c.shape[0] - 1, 3, c.shape[2] - 1}, {5, c.shape[1] - 1, 2}} {
			i := (p[0]*c.shape[1]+p[1])*c.shape[2] + p[2]
			want := fx.rawAt(c.lo[0]+p[0], c.lo[1]+p[1], c.lo[2]+p[2])
			if v.Image[0][i] != want {
				t.Errorf("crop %s voxel %v: image %g, want the raw's %g at %v", c.id, p, v.Image[0][i], want, c.lo)
			}
		}
		if v.Affine[2][3] != 10+2*float64(c.lo[0]) || v.Affine[0][3] != 2*float64(c.lo[2]) {
			t.Errorf("crop %s: affine %v, want the raw's shifted to %v", c.id, v.Affine, c.lo)
		}
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 4, Patch: [3]int{8, 8, 8}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}
}

// TestManifestOverrideAndErrors: a crop's weight replaces the computed
// one; bad manifests are refused naming the crop and the problem.
func TestManifestOverrideAndErrors(t *testing.T) {
	fx := newManifestFixture(t, "        weight: 7.5\n")
	ds, err := OpenDataset(filled(config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml")}))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Cases[0].Weight != 7.5 || ds.Cases[1].Weight == 7.5 {
		t.Errorf("weights %g %g, want 7.5 then computed", ds.Cases[0].Weight, ds.Cases[1].Weight)
	}
	for _, tc := range []struct{ manifest, want string }{
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        offset: [4, 30, 8]\n",
			"is not inside the raw"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        translation: [11, 0, 0]\n",
			"falls between the raw's voxels"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        offset: [4, 8, 8]\n        mask: crops/c2.zarr\n",
			"mask: needs loss.ignore_label"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - labels: {mito: crops/c1.zarr}\n", "multi-label"},
		{"volumes:\n  - raw: nowhere.zarr\n    crops:\n      - label: crops/c1.zarr\n", "nowhere.zarr"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/none.zarr\n", "none.zarr"},
		{"classes: {background: 0, mito: 1}\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        offset: [4, 8, 8]\n",
			"label value 2"},
		{"volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        ofset: [4, 8, 8]\n", "ofset"},
	} {
		p := filepath.Join(fx.dir, "bad.yaml")
		if err := os.WriteFile(p, []byte(tc.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(filled(config.Data{Manifest: p}))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: error %v, want one naming bad.yaml and %q", tc.manifest, err, tc.want)
		}
	}
	// Labels at another spacing than the raw are refused.
	writeZarr(t, filepath.Join(fx.dir, "plain.zarr"), [3]int{4, 4, 4}, func(int) float64 { return 1 }, true)
	p := filepath.Join(fx.dir, "spacing.yaml")
	os.WriteFile(p, []byte("volumes:\n  - raw: raw.zarr\n    crops:\n      - label: plain.zarr\n        offset: [0, 0, 0]\n"), 0o644)
	if _, err := OpenDataset(filled(config.Data{Manifest: p})); err == nil || !strings.Contains(err.Error(), "spacing") {
		t.Errorf("label at spacing 1 in a raw at 2: %v", err)
	}
	// Overlapping crops are a warning.
	p = filepath.Join(fx.dir, "overlap.yaml")
	os.WriteFile(p, []byte("volumes:\n  - raw: raw.zarr\n    crops:\n      - {id: a, label: crops/c1.zarr, offset: [0, 0, 0]}\n      - {id: b, label: crops/c1.zarr, offset: [6, 6, 6]}\n"), 0o644)
	ds, err = OpenDataset(filled(config.Data{Manifest: p}))
	if err != nil || len(ds.Warnings) != 1 || !strings.Contains(ds.Warnings[0], "overlap") {
		t.Errorf("overlapping crops: %v, warnings %v", err, ds.Warnings)
	}
}

// TestManifestSameBatches: crops of a Zarr raw volume give the same
// batches for any worker count and either source (gz: the raw's chunks
// read region by region through the windows; cache: decoded whole).
func TestManifestSameBatches(t *testing.T) {
	fx := newManifestFixture(t, "")
	base := filled(config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml"), Fold: -1})
	opt := Options{Seed: 5, Iterations: 2, Patch: [3]int{8, 16, 16}, Batch: 2, Augment: nnunetAug(t)}
	sameBatchesEverywhere(t, base, opt, []string{"gz", "cache"}, []int{1, 3}, 2, 4, nil)
}

// TestManifestMask: a crop's mask makes its labels read as the ignore
// label where the mask is 0, through every reader (the whole-case read,
// the loader's sources, Verify), and its masked-out voxels count in no
// class weight; a mask without loss.ignore_label, of another shape or
// unreadable is refused naming the files.
func TestManifestMask(t *testing.T) {
	const ignore = 200
	fx := newManifestFixture(t, "        mask: crops/m1.zarr\n")
	c1 := fx.crops[0]
	// The mask keeps the half x ≥ 8 of crop c1.
	writeImage(t, filepath.Join(fx.dir, "crops/m1.zarr"), c1.shape, [3]float64{}, true,
		func(z, y, x int) float32 { return map[bool]float32{true: 1}[x >= 8] })
	// The unmasked labels, to compare with.
	lf, err := volume.Open(filepath.Join(fx.dir, c1.label))
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]uint8, volume.Whole(c1.shape).Voxels())
	if err := lf.ReadLabels(volume.Whole(c1.shape), plain); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	want := append([]uint8(nil), plain...)
	var kept [4]int64 // c1's class counts where the mask keeps the labels
	for i := range want {
		if i%c1.shape[2] < 8 {
			want[i] = ignore
		} else {
			kept[want[i]]++
		}
	}

	cfg := filled(config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml"), Fold: -1, Workers: workers(2), Normalization: config.StringList{"none"}, IgnoreLabel: ignore})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// c1 weighs its kept voxels only, with class weights of the kept
	// voxels of every crop.
	counts := [][4]int64{kept, fx.crops[1].counts, fx.crops[2].counts}
	var total [4]float64
	sum := 0.0
	for _, c := range counts {
		for v := 1; v < 4; v++ {
			total[v] += float64(c[v])
			sum += float64(c[v])
		}
	}
	for k, c := range counts {
		w := 0.0
		for v := 1; v < 4; v++ {
			w += float64(c[v]) * (1 - total[v]/sum)
		}
		if got := ds.Cases[k].Weight; got < w*(1-1e-12) || got > w*(1+1e-12) {
			t.Errorf("crop %d: weight %g, want %g (masked-out voxels counted in no class)", k, got, w)
		}
	}
	same := func(what string, got []uint8) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: voxel %d is %d, want %d (label %d, masked out: %v)", what, i, got[i], want[i], plain[i], i%c1.shape[2] < 8)
			}
		}
	}
	v, err := ReadCase(cfg, ds.Cases[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	same("ReadCase", v.Label)
	for _, src := range []string{"gz", "cache"} {
		c := cfg
		c.Source = src
		l, err := Open(c, Options{Seed: 1, Iterations: 1, Patch: [3]int{8, 8, 8}, Batch: 1, IgnoreLabel: ignore, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		v, err := l.LoadCase(context.Background(), 0)
		l.Close()
		if err != nil {
			t.Fatalf("%s source: %v", src, err)
		}
		same(src+" source", v.Label)
	}
	// Verify takes the ignore label; without it the masked voxels' value
	// is a label out of range.
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 4, IgnoreLabel: ignore, Patch: [3]int{8, 8, 8}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}

	// Errors name the manifest and the problem.
	writeImage(t, filepath.Join(fx.dir, "small.zarr"), [3]int{4, 4, 4}, [3]float64{}, true, func(z, y, x int) float32 { return 1 })
	for _, tc := range []struct {
		mask, want string
		ignore     int
	}{
		{"crops/m1.zarr", "mask: needs loss.ignore_label", 0},
		{"small.zarr", "small.zarr and label " + filepath.Join(fx.dir, c1.label), ignore},
		{"nowhere.zarr", "nowhere.zarr", ignore},
	} {
		p := filepath.Join(fx.dir, "bad.yaml")
		m := "volumes:\n  - raw: raw.zarr\n    crops:\n      - label: crops/c1.zarr\n        offset: [4, 8, 8]\n        mask: " + tc.mask + "\n"
		if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(filled(config.Data{Manifest: p, IgnoreLabel: tc.ignore}))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "data.manifest "+p) {
			t.Errorf("mask %s, ignore %d: error %v, want one naming data.manifest %s and %q", tc.mask, tc.ignore, err, p, tc.want)
		}
	}
}

// TestPreparedStoreRefusesChunkedCases: `train prepare` (and source
// store) on a manifest's crops or on Zarr case folders fails at once
// naming the case, the file and source gz, instead of failing to hash a
// window path or a folder.
func TestPreparedStoreRefusesChunkedCases(t *testing.T) {
	fx := newManifestFixture(t, "")
	zdir := t.TempDir()
	writeZarr(t, filepath.Join(zdir, "imagesTr", "a_0000.zarr"), [3]int{4, 4, 4}, func(i int) float64 { return float64(i) }, false)
	writeZarr(t, filepath.Join(zdir, "labelsTr", "a.zarr"), [3]int{4, 4, 4}, func(i int) float64 { return float64(i % 2) }, true)
	if err := os.WriteFile(filepath.Join(zdir, "dataset.json"), []byte(`{"channel_names":{"0":"EM"},"labels":{"background":0,"a":1},"numTraining":1,"file_ending":".zarr"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  config.Data
		want string
	}{
		{config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml"), Normalization: config.StringList{"none"}}, "case c1 reads " + fx.raw + "#window="},
		{config.Data{Dataset: zdir}, "case a reads " + filepath.Join(zdir, "imagesTr", "a_0000.zarr") + " (a folder: a chunked store"},
	} {
		c.cfg.Fold, c.cfg.Workers, c.cfg.Store = -1, workers(1), filepath.Join(t.TempDir(), "store")
		_, err := Prepare(context.Background(), filled(c.cfg), PrepareOptions{Logger: discard()})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "data.source: gz") {
			t.Errorf("Prepare: %v, want an error with %q naming data.source: gz", err, c.want)
		}
	}
}
