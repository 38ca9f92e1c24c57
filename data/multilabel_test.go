package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// multiFixture is a raw OME-Zarr volume with two multi-label crops, each
// class its own binary array: mito, mito_membrane (inside mito's
// neighbourhood, overlapping it) and er; crop m2 has no er array.
type multiFixture struct {
	dir   string
	crops []multiCrop
}

type multiCrop struct {
	id      string
	shape   [3]int
	classes map[string]func(z, y, x int) bool
}

// classBits are the fixture's classes and their output channels.
var classBits = map[string]int{"mito": 0, "mito_membrane": 1, "er": 2}

func newMultiFixture(t *testing.T, extra string) *multiFixture {
	t.Helper()
	dir := t.TempDir()
	writeImage(t, filepath.Join(dir, "raw.zarr"), [3]int{32, 40, 48}, [3]float64{}, false,
		func(z, y, x int) float32 { return float32((z*7+y*3+x)%23) + 0.5*float32(z) })
	fx := &multiFixture{dir: dir, crops: []multiCrop{
		{id: "m1", shape: [3]int{12, 16, 16}, classes: map[string]func(z, y, x int) bool{
			"mito":          func(z, y, x int) bool { return x < 8 },
			"mito_membrane": func(z, y, x int) bool { return x >= 6 && x < 10 }, // overlaps mito at x 6, 7
			"er":            func(z, y, x int) bool { return (z+y)%3 == 0 },
		}},
		{id: "m2", shape: [3]int{8, 12, 16}, classes: map[string]func(z, y, x int) bool{
			"mito":          func(z, y, x int) bool { return y < 4 },
			"mito_membrane": func(z, y, x int) bool { return y == 3 || y == 4 },
		}},
	}}
	for _, c := range fx.crops {
		for name, in := range c.classes {
			writeImage(t, filepath.Join(dir, "crops", c.id, name+".zarr"), c.shape, [3]float64{}, true,
				func(z, y, x int) float32 { return map[bool]float32{true: 1}[in(z, y, x)] })
		}
	}
	m := `classes: {mito: 0, mito_membrane: 1, er: 2}
volumes:
  - raw: raw.zarr
    crops:
      - labels: {mito: crops/m1/mito.zarr, mito_membrane: crops/m1/mito_membrane.zarr, er: crops/m1/er.zarr}
        offset: [2, 4, 6]
` + extra + `      - id: m2
        labels: {mito: crops/m2/mito.zarr, mito_membrane: crops/m2/mito_membrane.zarr}
        offset: [20, 20, 20]
`
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return fx
}

// want is crop k's bit-packed label and its voxels per class.
func (fx *multiFixture) want(k int) (lbl []uint8, perClass [3]int64) {
	c := fx.crops[k]
	for z := range c.shape[0] {
		for y := range c.shape[1] {
			for x := range c.shape[2] {
				var b uint8
				for name, in := range c.classes {
					if in(z, y, x) {
						b |= 1 << classBits[name]
						perClass[classBits[name]]++
					}
				}
				lbl = append(lbl, b)
			}
		}
	}
	return lbl, perClass
}

// TestManifestMultiLabel: with model.targets multi_label a crop's
// per-class arrays read as one bit-packed label (overlapping classes both
// set, a class the crop lacks unset) through every reader; the class
// weights count a voxel in every class it belongs to; names are the
// classes by channel; Verify accepts it and the batches are the same for
// 1 and 3 workers and either source.
func TestManifestMultiLabel(t *testing.T) {
	fx := newMultiFixture(t, "")
	cfg := filled(config.Data{Manifest: filepath.Join(fx.dir, "manifest.yaml"), Fold: -1, Workers: workers(2), Normalization: config.StringList{"none"}, MultiLabel: true})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds.MultiLabelNames, ","); got != "mito,mito_membrane,er" || ds.LabelNames != nil {
		t.Fatalf("names %q (label names %v), want the classes by channel", got, ds.LabelNames)
	}
	if ds.Cases[0].ID != "m1" {
		t.Errorf("crop 0's ID %q, want its folder's name m1", ds.Cases[0].ID)
	}
	// cellmap's weights, classes counted per voxel and class.
	var counts [2][3]int64
	var total [3]float64
	var sum float64
	for k := range fx.crops {
		_, counts[k] = fx.want(k)
		for c, n := range counts[k] {
			total[c] += float64(n)
			sum += float64(n)
		}
	}
	for k := range fx.crops {
		w := 0.0
		for c, n := range counts[k] {
			w += float64(n) * (1 - total[c]/sum)
		}
		if got := ds.Cases[k].Weight; got < w*(1-1e-12) || got > w*(1+1e-12) {
			t.Errorf("crop %d: weight %g, want %g", k, got, w)
		}
	}
	for k := range fx.crops {
		want, _ := fx.want(k)
		overlap := 0
		check := func(what string, got []uint8) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s crop %d: %d voxels, want %d", what, k, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s crop %d: voxel %d is %08b, want %08b", what, k, i, got[i], want[i])
				}
			}
		}
		for _, b := range want {
			if b&3 == 3 {
				overlap++
			}
		}
		if overlap == 0 {
			t.Fatalf("crop %d has no voxel in two classes", k)
		}
		v, err := ReadCase(cfg, ds.Cases[k], 1)
		if err != nil {
			t.Fatal(err)
		}
		check("ReadCase", v.Label)
		for _, src := range []string{"gz", "cache"} {
			c := cfg
			c.Source = src
			l, err := Open(c, Options{Seed: 1, Iterations: 1, Patch: [3]int{8, 8, 8}, Batch: 1, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			v, err := l.LoadCase(context.Background(), k)
			l.Close()
			if err != nil {
				t.Fatalf("%s source: %v", src, err)
			}
			check(src+" source", v.Label)
		}
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{8, 8, 8}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 2, Patch: [3]int{8, 8, 8}, Logger: discard()}); err == nil || !strings.Contains(err.Error(), "model.num_classes: 2, but") {
		t.Errorf("2 classes for 3: err = %v", err)
	}
	opt := Options{Seed: 5, Iterations: 2, Patch: [3]int{8, 8, 8}, Batch: 2, Augment: nnunetAug(t)}
	sameBatchesEverywhere(t, cfg, opt, []string{"gz", "cache"}, []int{1, 3}, 2, 4, nil)
}

// TestManifestUnknownClasses: with unlisted_classes: unknown the class a
// crop does not list (m2 has no er) is unknown in its case, and every
// batch slot drawn from it carries that mask (the same for 1 and 3
// workers); the class weights are those of the default (absent), which
// already count er only in m1, the crop that lists it. The default
// leaves every class known.
func TestManifestUnknownClasses(t *testing.T) {
	fx := newMultiFixture(t, "")
	path := filepath.Join(fx.dir, "manifest.yaml")
	cfg := filled(config.Data{Manifest: path, Fold: -1, Workers: workers(2), Normalization: config.StringList{"none"}, MultiLabel: true})
	absent, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if absent.HasUnknown() || absent.Cases[0].Unknown != 0 || absent.Cases[1].Unknown != 0 {
		t.Fatalf("default (absent): unknown classes %b, %b", absent.Cases[0].Unknown, absent.Cases[1].Unknown)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append([]byte("unlisted_classes: unknown\n"), orig...), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !ds.HasUnknown() || ds.Cases[0].Unknown != 0 || ds.Cases[1].Unknown != 1<<classBits["er"] {
		t.Fatalf("unknown classes %03b (m1), %03b (m2), want 000 and 100 (er)", ds.Cases[0].Unknown, ds.Cases[1].Unknown)
	}
	for k := range ds.Cases {
		if ds.Cases[k].Weight != absent.Cases[k].Weight || ds.Cases[k].Weight <= 0 {
			t.Errorf("crop %d: weight %g with unknown classes, %g with absent ones", k, ds.Cases[k].Weight, absent.Cases[k].Weight)
		}
	}
	var ref [][]uint8
	for _, w := range []int{1, 3} {
		c := cfg
		c.Workers = workers(w)
		l, err := Open(c, Options{Seed: 3, Iterations: 4, Patch: [3]int{8, 8, 8}, Batch: 2, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Train(StreamOptions{Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]uint8
		masked := 0
		for i := 0; i < s.BatchesPerEpoch(); i++ {
			b, err := s.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for k, sm := range b.Samples {
				if b.Unknown[k] != ds.Cases[sm.Case].Unknown {
					t.Errorf("workers %d batch %d slot %d (case %d): unknown %03b, want %03b", w, i, k, sm.Case, b.Unknown[k], ds.Cases[sm.Case].Unknown)
				}
				if b.Unknown[k] != 0 {
					masked++
				}
			}
			got = append(got, append([]uint8(nil), b.Unknown...))
			b.Release()
		}
		l.Close()
		if masked == 0 {
			t.Fatalf("workers %d: no patch was drawn from m2", w)
		}
		if ref == nil {
			ref = got
		} else if fmt.Sprint(got) != fmt.Sprint(ref) {
			t.Errorf("workers %d: masks %v, workers 1 %v", w, got, ref)
		}
	}
}

// TestManifestMultiLabelErrors: what a multi-label manifest gets wrong
// is named with the manifest, the crop and the file.
func TestManifestMultiLabelErrors(t *testing.T) {
	fx := newMultiFixture(t, "")
	writeImage(t, filepath.Join(fx.dir, "small.zarr"), [3]int{12, 16, 15}, [3]float64{}, true, func(z, y, x int) float32 { return 1 })
	path := filepath.Join(fx.dir, "manifest.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to string
		multi    bool
		want     []string
	}{
		{"er: crops/m1/er.zarr", "er: small.zarr", true, []string{"volumes[0].crops[0]", "small.zarr", "shape [12 16 15] differs", "mito.zarr"}},
		{"er: crops/m1/er.zarr", "golgi: crops/m1/er.zarr", true, []string{"labels: golgi is not one of classes"}},
		{"{mito: 0, mito_membrane: 1, er: 2}", "{mito: 0, mito_membrane: 1, er: 8}", true, []string{"classes: er is 8"}},
		{"{mito: 0, mito_membrane: 1, er: 2}", "{a: 0, b: 1, c: 2, d: 3, e: 4, f: 5, g: 6, h: 7, mito: 8, mito_membrane: 9, er: 10}", true, []string{"at most 7"}},
		{"labels: {mito: crops/m1/mito.zarr,", "label: crops/m1/mito.zarr\n        labels: {", true, []string{"label: model.targets multi_label reads one binary array per class"}},
		{"", "", false, []string{"labels: one binary array per class", "set model.targets: multi_label and loss.name: dice_bce"}},
		{"classes: {", "unlisted_classes: maybe\nclasses: {", true, []string{`unlisted_classes: "maybe", want absent`}},
		{"classes: {", "unlisted_classes: unknown\nclasses: {", false, []string{"unlisted_classes: unknown applies to per-class labels"}},
	} {
		m := strings.Replace(string(orig), tc.from, tc.to, 1)
		if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDataset(filled(config.Data{Manifest: path, Fold: -1, MultiLabel: tc.multi}))
		if err == nil {
			t.Errorf("%s → %s: opened", tc.from, tc.to)
			continue
		}
		for _, w := range append(tc.want, path) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s → %s: the error lacks %q: %v", tc.from, tc.to, w, err)
			}
		}
	}
}

// TestNNUNetRegions: a dataset.json with nnU-Net regions opens under
// model.targets multi_label with each case's label read through the
// regions' table (region r's bit where the label value is in it), the
// regions as names and regions_class_order kept; plain classes under
// multi_label are refused.
func TestNNUNetRegions(t *testing.T) {
	dir := nnunetRaw(t, 2, ".nii.gz", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"hippocampus":[1,2],"posterior":2},"regions_class_order":[1,2],"file_ending":".nii.gz"}`)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, MultiLabel: true, Normalization: config.StringList{"none"}})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ds.MultiLabelNames, ","); got != "hippocampus,posterior" || len(ds.RegionsClassOrder) != 2 || ds.RegionsClassOrder[1] != 2 {
		t.Fatalf("names %q, order %v", got, ds.RegionsClassOrder)
	}
	// evaluation's regions, one per channel: nnU-Net's summary.json keys
	if len(ds.Regions) != 2 || ds.Regions[0].Key() != "(1, 2)" || ds.Regions[1].Key() != "2" || ds.Regions[1].Name != "posterior" {
		t.Fatalf("regions %+v, want (1, 2) hippocampus and 2 posterior", ds.Regions)
	}
	for _, c := range ds.Cases {
		base, _, ok, err := volume.SplitLUT(c.Label)
		if err != nil || !ok {
			t.Fatalf("case %s's label %q is not looked up", c.ID, c.Label)
		}
		raw, err := volume.Open(base)
		if err != nil {
			t.Fatal(err)
		}
		box := volume.Whole(raw.Header().Shape)
		plain := make([]uint8, box.Voxels())
		err = raw.ReadLabels(box, plain)
		raw.Close()
		if err != nil {
			t.Fatal(err)
		}
		v, err := ReadCase(cfg, c, 1)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[uint8]bool{}
		for i, l := range plain {
			want := map[uint8]uint8{0: 0, 1: 1, 2: 3}[l]
			if v.Label[i] != want {
				t.Fatalf("case %s voxel %d: label %d reads %d, want %d", c.ID, i, l, v.Label[i], want)
			}
			seen[l] = true
		}
		if len(seen) != 3 {
			t.Fatalf("case %s holds labels %v, want 0, 1 and 2", c.ID, seen)
		}
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 2, Patch: [3]int{8, 8, 8}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	plain := nnunetRaw(t, 2, ".nii.gz", `{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2},"file_ending":".nii.gz"}`)
	if _, err := OpenDataset(filled(config.Data{Dataset: plain, MultiLabel: true})); err == nil || !strings.Contains(err.Error(), "model.targets: multi_label, but "+plain+" has plain classes") {
		t.Errorf("plain classes under multi_label: err = %v", err)
	}
}

// TestNNUNetListsOfOneEntry: labels given as lists of one entry only are
// plain classes, as nnU-Net's LabelManager has it (regions need a list of
// more than one entry): the dataset opens under softmax with the lists'
// names and unmapped labels, regions_class_order unread, and is refused
// under multi_label.
func TestNNUNetListsOfOneEntry(t *testing.T) {
	meta := `{"channel_names":{"0":"MRI"},"labels":{"background":[0],"Anterior":[1],"Posterior":[2]},"regions_class_order":[1,2],"file_ending":".nii.gz"}`
	dir := nnunetRaw(t, 2, ".nii.gz", meta)
	ds, err := OpenDataset(filled(config.Data{Dataset: dir, Fold: -1}))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Regions != nil || ds.RegionsClassOrder != nil || ds.RegionBits != nil || ds.MultiLabelNames != nil {
		t.Errorf("lists of one entry read as regions: %+v, order %v", ds.Regions, ds.RegionsClassOrder)
	}
	if ds.LabelNames[1] != "Anterior" || ds.LabelNames[2] != "Posterior" {
		t.Errorf("label names %v, want 1 Anterior, 2 Posterior", ds.LabelNames)
	}
	for _, c := range ds.Cases {
		if _, _, ok, _ := volume.SplitLUT(c.Label); ok {
			t.Errorf("case %s's label %q is looked up through a region table", c.ID, c.Label)
		}
	}
	if order, err := RegionsClassOrder(dir); order != nil || err != nil {
		t.Errorf("RegionsClassOrder: %v, %v; want none", order, err)
	}
	if _, err := OpenDataset(filled(config.Data{Dataset: dir, MultiLabel: true})); err == nil || !strings.Contains(err.Error(), "has plain classes") {
		t.Errorf("lists of one entry under multi_label: err = %v", err)
	}
}

// A label value two dataset.json keys name takes the first key in sorted
// order, every run (a map's order would pick either).
func TestLabelNamedTwiceTakesOneName(t *testing.T) {
	meta := `{"channel_names":{"0":"MRI"},"labels":{"background":0,"zz":2,"Anterior":1,"bg":0,"Posterior":[2]},"file_ending":".nii.gz"}`
	dir := nnunetRaw(t, 2, ".nii.gz", meta)
	for range 20 {
		ds, err := OpenDataset(filled(config.Data{Dataset: dir, Fold: -1}))
		if err != nil {
			t.Fatal(err)
		}
		if ds.LabelNames[0] != "background" || ds.LabelNames[1] != "Anterior" || ds.LabelNames[2] != "Posterior" {
			t.Fatalf("label names %v, want 0 background, 1 Anterior, 2 Posterior", ds.LabelNames)
		}
	}
}
