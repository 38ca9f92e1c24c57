package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

func TestSplitsWrittenOnceAndReused(t *testing.T) {
	dir := demoDataset(t, 7)
	cfg := filled(config.Data{Dataset: dir, NumFolds: 3, Fold: 0})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := cfg.SplitsPath()
	// Reading folds writes nothing; Setup writes the file.
	tr0, va0, err := FoldCases(ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("FoldCases wrote %s (%v): reading folds must not write", path, err)
	}
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("splits file not written: %v", err)
	}
	if tr, va, _ := FoldCases(ds, cfg); fmt.Sprint(tr, va) != fmt.Sprint(tr0, va0) {
		t.Errorf("folds from the written file %v %v differ from those read before it %v %v", tr, va, tr0, va0)
	}
	var folds []foldSplit
	json.Unmarshal(b, &folds)
	seen := map[string]int{}
	for _, f := range folds {
		for _, id := range f.Val {
			seen[id]++
		}
		if len(f.Train)+len(f.Val) != 7 {
			t.Errorf("fold %v does not cover 7 cases", f)
		}
	}
	if len(seen) != 7 || len(folds) != 3 || len(folds[0].Val) != 3 || len(folds[2].Val) != 2 {
		t.Errorf("folds %v", folds)
	}
	for _, n := range seen {
		if n != 1 {
			t.Errorf("a case validates in %d folds", n)
		}
	}
	// The same folds come out of the generator on every machine: pin them.
	want, _ := makeFolds(func() []string {
		var ids []string
		for _, c := range ds.Cases {
			ids = append(ids, c.ID)
		}
		return ids
	}(), 3)
	if fmt.Sprint(want) != fmt.Sprint(folds) {
		t.Errorf("file %v, generator %v", folds, want)
	}
	// Edit the file by hand: it is reused, not regenerated.
	folds[0], folds[1] = folds[1], folds[0]
	b, _ = json.Marshal(folds)
	os.WriteFile(path, b, 0o644)
	tr1, va1, err := FoldCases(ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(va1) == fmt.Sprint(va0) || fmt.Sprint(tr1) == fmt.Sprint(tr0) {
		t.Error("splits file was not reused")
	}
	cfg.NumFolds = 4
	cfg.Fold = 0
	if _, _, err := FoldCases(ds, cfg); err == nil || !strings.Contains(err.Error(), "3 folds") {
		t.Errorf("fold count mismatch: %v", err)
	}
}

func TestMakeFoldsPinned(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	f, _ := makeFolds(ids, 2)
	// Any change to the split algorithm moves cases between folds on
	// every user's machine; this pins it.
	got := fmt.Sprint(f)
	f2, _ := makeFolds([]string{"e", "d", "c", "b", "a"}, 2)
	if fmt.Sprint(f2) != got {
		t.Errorf("folds depend on input order: %v vs %v", f2, got)
	}
	if len(f[0].Val) != 3 || len(f[1].Val) != 2 {
		t.Errorf("fold sizes %v", f)
	}
	t.Logf("folds of a..e: %v", got)
}

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
