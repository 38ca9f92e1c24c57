package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// TestPredictOtherFormats: a folder of NRRD, MetaImage and TIFF cases (an
// nnU-Net dataset's imagesTs with file_ending .nrrd, .mha or .tif) is
// predicted into label maps in each case's own format and on its grid
// (CASE.nrrd, CASE.mha, CASE.tif with nnU-Net's CASE.json), as nnU-Net
// writes the dataset's file_ending, which train evaluate then pairs with
// references of that ending.
func TestPredictOtherFormats(t *testing.T) {
	ck := tinyCheckpoint(t, filepath.Join(t.TempDir(), "runs"), 0, 1, nil)
	in := t.TempDir()
	fixtures := map[string]string{
		"a_0000.nrrd": "../../nrrd/testdata/labels_uint8.nrrd",
		"b_0000.mha":  "../../metaimage/testdata/labels_uint8.mha",
		"c_0000.tif":  "../../tiff/testdata/labels_uint8.tif",
	}
	for name, src := range fixtures {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "preds")
	if o, e, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", out, "--disable-tta", "--threads", "1"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, e)
	}
	for name, src := range fixtures {
		id, ext := name[:1], filepath.Ext(name)
		f, err := volume.Open(filepath.Join(out, id+ext))
		if err != nil {
			t.Fatalf("case %s: %v", id, err)
		}
		g, err := volume.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		fs, gs := f.Header().Spacing, g.Header().Spacing
		if f.Header().Shape != g.Header().Shape || math.Abs(fs[0]-gs[0]) > 1e-6*gs[0] || math.Abs(fs[1]-gs[1]) > 1e-6*gs[1] || math.Abs(fs[2]-gs[2]) > 1e-6*gs[2] {
			t.Errorf("case %s: prediction shape %v spacing %v, the input's %v %v", id, f.Header().Shape, f.Header().Spacing, g.Header().Shape, g.Header().Spacing)
		}
		f.Close()
		g.Close()
	}
	if _, err := os.Stat(filepath.Join(out, "c.json")); err != nil {
		t.Errorf("no nnU-Net spacing file beside c.tif: %v", err)
	}
	// References in the cases' format (the fixture's labels as the case's
	// label file, a.nrrd): evaluate pairs a.nrrd with it.
	ref := t.TempDir()
	b, _ := os.ReadFile(fixtures["a_0000.nrrd"])
	os.WriteFile(filepath.Join(ref, "a.nrrd"), b, 0o644)
	preds := t.TempDir()
	pb, _ := os.ReadFile(filepath.Join(out, "a.nrrd"))
	os.WriteFile(filepath.Join(preds, "a.nrrd"), pb, 0o644)
	if o, e, err := runCmd(t, "evaluate", preds, ref, "--labels", "1,2", "-o", filepath.Join(t.TempDir(), "summary.json")); err != nil {
		t.Errorf("evaluate .nrrd predictions against .nrrd references: %v\n%s\n%s", err, o, e)
	}
}
