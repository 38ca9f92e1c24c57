package data

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nifti"
)

// writeUnitCase writes a 6×6×6 NIfTI case (image and label) whose
// xyzt_units is units, with voxel size 1 in it.
func writeUnitCase(t *testing.T, dir, id string, units uint8) config.CaseSpec {
	t.Helper()
	n := 6 * 6 * 6
	img, lbl := make([]float32, n), make([]float32, n)
	for i := range img {
		img[i] = float32(i % 7)
		if i%5 == 0 {
			lbl[i] = 1
		}
	}
	spec := config.CaseSpec{ID: id, Image: config.StringList{filepath.Join(dir, id+"_0000.nii.gz")}, Label: filepath.Join(dir, id+".nii.gz")}
	for _, f := range []struct {
		path string
		v    []float32
	}{{spec.Image[0], img}, {spec.Label, lbl}} {
		h, err := nifti.NewHeader([]int{6, 6, 6}, nifti.Float32)
		if err != nil {
			t.Fatal(err)
		}
		h.XYZTUnits = units
		if err := nifti.WriteFloat32(f.path, h, f.v); err != nil {
			t.Fatal(err)
		}
	}
	return spec
}

// TestTargetSpacingRefusesMixedUnits: with data.target_spacing, a dataset
// whose cases state different units (one in millimetres, one in
// micrometres) is refused by Prepare, Setup and Open — each case would be
// resampled to the same numbers in its own unit — with an error naming
// both cases, their files and units; without target_spacing, or with one
// unit (and a case stating none), it prepares and opens.
func TestTargetSpacingRefusesMixedUnits(t *testing.T) {
	dir := t.TempDir()
	mm, um := writeUnitCase(t, dir, "mm", nifti.UnitsMM), writeUnitCase(t, dir, "um", nifti.UnitsMicron)
	mm2, none := writeUnitCase(t, dir, "mm2", nifti.UnitsMM|nifti.UnitsSec), writeUnitCase(t, dir, "none", 0)
	cfg := func(target []float64, store string, cases ...config.CaseSpec) config.Data {
		return filled(config.Data{Cases: cases, Store: filepath.Join(dir, store), Fold: -1, Workers: workers(1), TargetSpacing: target})
	}
	opt := Options{Seed: 1, Iterations: 1, Patch: [3]int{4, 4, 4}, Batch: 1, Logger: discard()}
	target := []float64{2, 2, 2}

	mixed := cfg(target, "mixed", mm, none, um)
	for name, run := range map[string]func() error{
		"prepare": func() error {
			_, err := Prepare(context.Background(), mixed, PrepareOptions{Logger: discard()})
			return err
		},
		"setup": func() error {
			_, err := Setup(context.Background(), mixed, SetupOptions{Logger: discard()})
			return err
		},
		"open": func() error {
			l, err := Open(mixed, opt)
			if err == nil {
				l.Close()
			}
			return err
		},
	} {
		err := run()
		for _, want := range []string{"case um (" + um.Image[0] + ") is in micrometer", "case mm (" + mm.Image[0] + ") in millimeter", "write the cases in one unit", "target_spacing"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s, mm and µm cases with target_spacing: %v, want an error with %q", name, err, want)
			}
		}
	}

	for _, c := range []config.Data{
		cfg(nil, "mixed-no-target", mm, none, um), // nothing compares spacings
		cfg(target, "one-unit", mm, none, mm2),    // one unit; none is taken as it
	} {
		rep, err := Prepare(context.Background(), c, PrepareOptions{Logger: discard()})
		if err != nil {
			t.Fatalf("prepare %s: %v", c.Store, err)
		}
		if rep.Written != 3 {
			t.Errorf("prepare %s: wrote %d cases, want 3", c.Store, rep.Written)
		}
		c.Source = "store"
		l := openLoader(t, c, opt)
		s, err := l.Train(StreamOptions{Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatalf("%s: a training batch: %v", c.Store, err)
		}
		b.Release()
		l.Close()
	}
}

// TestSameUnit: the unit the cases state, "" when none does; a case
// stating none goes with the others; different units, or a unit that is
// not a length beside a stated one, are errors naming the cases.
func TestSameUnit(t *testing.T) {
	ds := &Dataset{Cases: []Case{{ID: "a", Images: []string{"a.nii"}}, {ID: "b", Images: []string{"b.nii"}}, {ID: "c", Images: []string{"c.nii"}}}}
	for _, tc := range []struct {
		units     []string
		want, err string
	}{
		{[]string{"millimeter", "", "millimeter"}, "millimeter", ""},
		{[]string{"", "", ""}, "", ""},
		{[]string{"", "micrometer", ""}, "micrometer", ""},
		{[]string{"millimeter", "", "micrometer"}, "", "case c (c.nii) is in micrometer, case a (a.nii) in millimeter"},
		{[]string{"", "nanometer", "second"}, "", `case c (c.nii): spatial unit "second"`},
	} {
		got, err := SameUnit(ds, tc.units)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %q, %v; want an error with %s", tc.units, got, err, tc.err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.units, got, err, tc.want)
		}
	}
}

// TestSpacingUnit: with data.spacing_unit, training refuses cases in
// another unit (naming the key, a case and both units) and takes cases
// in it, or stating none; ReadCase (prediction) converts target_spacing
// into the input's unit: 2000 µm is 2 mm for a millimetre case.
func TestSpacingUnit(t *testing.T) {
	dir := t.TempDir()
	mm, none := writeUnitCase(t, dir, "mm", nifti.UnitsMM), writeUnitCase(t, dir, "none", 0)
	cfg := filled(config.Data{Cases: []config.CaseSpec{none, mm}, Store: filepath.Join(dir, "store"), Fold: -1, Workers: workers(1),
		TargetSpacing: []float64{2, 2, 2}, SpacingUnit: "um"})
	_, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), "data.spacing_unit is micrometer and case mm ("+mm.Image[0]+") is in millimeter") {
		t.Errorf("millimetre cases, spacing_unit µm: %v", err)
	}
	if _, err := Open(cfg, Options{Seed: 1, Patch: [3]int{4, 4, 4}, Batch: 1, Logger: discard()}); err == nil || !strings.Contains(err.Error(), "data.spacing_unit") {
		t.Errorf("Open, millimetre cases, spacing_unit µm: %v", err)
	}
	cfg.SpacingUnit = "mm"
	if _, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: discard()}); err != nil {
		t.Errorf("millimetre cases, spacing_unit mm: %v", err)
	}

	cfg.TargetSpacing, cfg.SpacingUnit = []float64{2000, 2000, 2000}, "micrometer"
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Cases {
		v, err := ReadCase(cfg, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The case stating no unit is taken to be in the spacing unit:
		// 2000 of its voxels of 1 make one.
		want, wantUnit := [3]int{3, 3, 3}, "millimeter"
		if c.ID == "none" {
			want, wantUnit = [3]int{1, 1, 1}, ""
		}
		if v.Shape != want || v.Unit != wantUnit {
			t.Errorf("ReadCase %s, target 2000 µm: shape %v, unit %q, spacing %v; want %v in %q", c.ID, v.Shape, v.Unit, v.Spacing, want, wantUnit)
		}
	}
}
