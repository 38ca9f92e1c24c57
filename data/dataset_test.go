package data

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

func TestDatasetErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(`{"training":[{"image":"./imagesTr/x.nii.gz","label":"./labelsTr/x.nii.gz"}]}`), 0o644)
	_, err := OpenDataset(filled(config.Data{Dataset: dir}))
	if err == nil || !strings.Contains(err.Error(), "x.nii.gz") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := OpenDataset(filled(config.Data{Dataset: t.TempDir()})); err == nil || !strings.Contains(err.Error(), "imagesTr") {
		t.Errorf("empty folder: %v", err)
	}
	if _, err := OpenDataset(filled(config.Data{Dataset: filepath.Join(dir, "nope")})); err == nil || !strings.Contains(err.Error(), "data.dataset: stat "+filepath.Join(dir, "nope")) {
		t.Errorf("missing folder: %v", err)
	}
	_, err = OpenDataset(filled(config.Data{Cases: []config.CaseSpec{{ID: "a", Image: config.StringList{"/nonexistent/a.nii"}}}}))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/a.nii") {
		t.Errorf("explicit list: %v", err)
	}
}

func TestDemoDatasetOrder(t *testing.T) {
	src := testutil.DemoDir(t)
	ds, err := OpenDataset(filled(config.Data{Dataset: src}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 80 || ds.Format != "msd" || ds.Channels != 1 || ds.LabelNames[2] != "Posterior" {
		t.Fatalf("demo: %d cases, format %s, %d channels, labels %v", len(ds.Cases), ds.Format, ds.Channels, ds.LabelNames)
	}
	ids := make([]string, len(ds.Cases))
	for i, c := range ds.Cases {
		ids[i] = c.ID
	}
	if !sort.StringsAreSorted(ids) || ids[0] != "hippocampus_001" {
		t.Errorf("case order %v...", ids[:3])
	}
}

func TestNNUNetLayoutAndMultiChannel(t *testing.T) {
	src := testutil.DemoDir(t)
	if _, err := os.Stat(src); err != nil {
		t.Fatal("no demo data at ", src)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "imagesTr"), 0o755)
	os.MkdirAll(filepath.Join(dir, "labelsTr"), 0o755)
	for _, id := range demoIDs[:3] {
		img := filepath.Join(src, "imagesTr", id+".nii.gz")
		// Two channels: the image and its negative (written as a new file).
		os.Symlink(img, filepath.Join(dir, "imagesTr", id+"_0000.nii.gz"))
		h, d, err := nifti.ReadFloat32(img)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d {
			d[i] = -d[i]
		}
		h.Datatype = nifti.Float32
		h.Bitpix = 32
		h.SclSlope, h.SclInter = 0, 0
		if err := nifti.WriteFloat32(filepath.Join(dir, "imagesTr", id+"_0001.nii.gz"), h, d); err != nil {
			t.Fatal(err)
		}
		os.Symlink(filepath.Join(src, "labelsTr", id+".nii.gz"), filepath.Join(dir, "labelsTr", id+".nii.gz"))
	}
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Format != "nnunet" || ds.Channels != 2 || len(ds.Cases) != 3 || ds.Cases[0].ID != demoIDs[0] {
		t.Fatalf("dataset %+v", ds)
	}
	l := openLoader(t, cfg, Options{Patch: [3]int{8, 8, 8}, Batch: 2})
	v, err := l.LoadCase(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Image[0] {
		if v.Image[1][i] != -v.Image[0][i] && !(v.Image[0][i] == 0 && v.Image[1][i] == 0) {
			t.Fatalf("channel 1 is not channel 0 negated at %d: %v %v", i, v.Image[0][i], v.Image[1][i])
		}
	}
	s, _ := l.Train(StreamOptions{Epochs: 1})
	b, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.C != 2 || len(b.Image) != 2*2*8*8*8 {
		t.Errorf("batch C %d, %d floats", b.C, len(b.Image))
	}
	b.Release()

	// The same two channels as one 4D file in an MSD list.
	dir4 := t.TempDir()
	h, d0, _ := nifti.ReadFloat32(filepath.Join(src, "imagesTr", demoIDs[0]+".nii.gz"))
	d := append(append([]float32(nil), d0...), d0...)
	for i := len(d0); i < len(d); i++ {
		d[i] = -d[i]
	}
	sh := h.Shape()
	h4, _ := nifti.NewHeader([]int{sh[0], sh[1], sh[2], 2}, nifti.Float32)
	if err := nifti.WriteFloat32(filepath.Join(dir4, "c4d.nii.gz"), h4, d); err != nil {
		t.Fatal(err)
	}
	cfg4 := filled(config.Data{Fold: -1, Workers: workers(0), Cases: []config.CaseSpec{{
		Image: config.StringList{filepath.Join(dir4, "c4d.nii.gz")}, Label: filepath.Join(src, "labelsTr", demoIDs[0]+".nii.gz")}}})
	l4 := openLoader(t, cfg4, Options{Patch: [3]int{8, 8, 8}, Batch: 1})
	if l4.Channels() != 2 {
		t.Fatalf("4D case: %d channels", l4.Channels())
	}
	v4, err := l4.LoadCase(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v4.Image[0] {
		if v4.Image[0][i] != v.Image[0][i] || v4.Image[1][i] != v.Image[1][i] {
			t.Fatalf("4D file and two files differ at %d", i)
		}
	}
}

// TestURLCases: a remote Zarr store is a case file (not stat'ed: nothing
// is fetched to open the dataset); a URL no format reads is refused
// naming it.
func TestURLCases(t *testing.T) {
	img, lbl := "https://h.invalid/d/case1.ome.zarr", "https://h.invalid/d/labels/case1.zarr"
	ds, err := OpenDataset(filled(config.Data{Dataset: t.TempDir(), Cases: []config.CaseSpec{{Image: config.StringList{img}, Label: lbl}}}))
	if err != nil {
		t.Fatal(err)
	}
	if c := ds.Cases[0]; c.Images[0] != img || c.Label != lbl || c.ID != "case1" {
		t.Fatalf("case %+v: the URLs should pass unchanged", c)
	}
	if st, err := stampCases(ds); err != nil || st[0].Files[0].Path != img {
		t.Fatalf("stamps of remote files (the CT statistics cache's key): %v, %v", st, err)
	}
	nii := "https://h.invalid/d/case1.nii.gz"
	_, err = OpenDataset(filled(config.Data{Cases: []config.CaseSpec{{Image: config.StringList{nii}}}}))
	if err == nil || !strings.Contains(err.Error(), nii) || !strings.Contains(err.Error(), "no volume format reads this URL") {
		t.Fatalf("a NIfTI URL: err = %v", err)
	}
}
