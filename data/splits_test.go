package data

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// kfoldFixture is testdata/kfold.json, written by make_kfold_fixtures.py
// with scikit-learn's KFold and NumPy's RandomState.
type kfoldFixture struct {
	IDs   map[string][]string `json:"ids"`
	KFold []struct {
		N, K int
		Val  [][]string
	} `json:"kfold"`
	Holdout []struct {
		N        int
		Fraction float64
		Val      []string
	} `json:"holdout"`
}

func readKFoldFixture(t *testing.T) kfoldFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kfold.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f kfoldFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.KFold) == 0 || len(f.Holdout) == 0 {
		t.Fatal("empty fixture")
	}
	return f
}

// complement returns the sorted IDs not in val.
func complement(ids, val []string) []string {
	in := map[string]bool{}
	for _, id := range val {
		in[id] = true
	}
	var out []string
	for _, id := range ids {
		if !in[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// TestMakeFoldsMatchesKFold: nnU-Net's folds (KFold over the sorted IDs,
// shuffled by RandomState(12345)) case for case, whatever the IDs' input
// order (the fixture's is scrambled).
func TestMakeFoldsMatchesKFold(t *testing.T) {
	f := readKFoldFixture(t)
	for _, c := range f.KFold {
		ids := f.IDs[fmt.Sprint(c.N)]
		folds, err := makeFolds(ids, c.K)
		if err != nil {
			t.Fatalf("n %d, k %d: %v", c.N, c.K, err)
		}
		if len(folds) != len(c.Val) {
			t.Fatalf("n %d, k %d: %d folds, KFold %d", c.N, c.K, len(folds), len(c.Val))
		}
		for i, want := range c.Val {
			if !reflect.DeepEqual(folds[i].Val, want) {
				t.Fatalf("n %d, k %d, fold %d: val %v, KFold %v", c.N, c.K, i, folds[i].Val, want)
			}
			// The script checked KFold's train is val's sorted complement.
			if tr := complement(ids, want); !reflect.DeepEqual(folds[i].Train, tr) {
				t.Fatalf("n %d, k %d, fold %d: train %v, want %v", c.N, c.K, i, folds[i].Train, tr)
			}
		}
	}
}

func TestMakeHoldoutMatchesNumPy(t *testing.T) {
	f := readKFoldFixture(t)
	for _, c := range f.Holdout {
		ids := f.IDs[fmt.Sprint(c.N)]
		s, err := makeHoldout(ids, c.Fraction)
		if err != nil {
			t.Fatalf("n %d, fraction %g: %v", c.N, c.Fraction, err)
		}
		if len(s) != 1 || !reflect.DeepEqual(s[0].Val, c.Val) || !reflect.DeepEqual(s[0].Train, complement(ids, c.Val)) {
			t.Fatalf("n %d, fraction %g: %v, want val %v", c.N, c.Fraction, s, c.Val)
		}
	}
	if _, err := makeHoldout([]string{"a", "b", "c"}, 1e-20); err == nil || !strings.Contains(err.Error(), "3 to train and 0 to validate") {
		t.Errorf("a fraction that holds out no case: %v", err)
	}
	if _, err := makeHoldout([]string{"a", "b", "c"}, 0.7); err == nil || !strings.Contains(err.Error(), "0 to train and 3 to validate") {
		t.Errorf("a fraction that holds out every case: %v", err)
	}
}

// TestDemoSplitsAreNnUNets: the bundled demo's splits_final.json is the
// file nnU-Net v2 writes for its 80 cases (made by the fixture script),
// byte for byte, and so is what makeFolds gives them; likewise the full
// demo's 260 cases where that dataset is present.
func TestDemoSplitsAreNnUNets(t *testing.T) {
	check := func(dir, file string) {
		t.Helper()
		ds, err := OpenDataset(filled(config.Data{Dataset: dir}))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		folds, err := makeFolds(caseIDs(ds), 5)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeSplits(folds); !bytes.Equal(got, want) {
			t.Errorf("%s: the folds of %d cases differ from nnU-Net's %s", dir, len(ds.Cases), file)
		}
	}
	demo := testutil.DemoDir(t)
	check(demo, filepath.Join(demo, "splits_final.json"))
	check(testutil.FullDemoDir(t), filepath.Join("testdata", "splits_demo260.json"))
}

// dirState lists a folder's entries with their sizes and times, to show
// that nothing in it was written.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintln(&b, p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSetupWritesSplitsToTheExperimentOnly: generated folds go to the
// folder Setup is given (a training's experiment folder), never into the
// dataset; the returned config names the file, which is reused as it is
// from then on (edited by hand, too); without a folder nothing is written
// and the same folds are generated wherever they are read.
func TestSetupWritesSplitsToTheExperimentOnly(t *testing.T) {
	dir := demoDataset(t, 7)
	exp := filepath.Join(t.TempDir(), "runs", "exp")
	cfg := filled(config.Data{Dataset: dir, NumFolds: 3, Fold: 0})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	tr0, va0, err := FoldCases(ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(va0) != 3 || len(tr0) != 4 {
		t.Errorf("fold 0 of 7 cases in 3 folds: train %v, val %v", tr0, va0)
	}
	mem, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if mem.SplitsFile != "" {
		t.Errorf("without a splits folder Setup named %q", mem.SplitsFile)
	}
	got, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp})
	if err != nil {
		t.Fatal(err)
	}
	if after := dirState(t, dir); after != before {
		t.Errorf("Setup changed the dataset folder:\n%s\nwas\n%s", after, before)
	}
	path := filepath.Join(exp, "splits_final.json")
	if got.SplitsFile != path {
		t.Errorf("Setup's config names splits %q, want %q", got.SplitsFile, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("splits not written: %v", err)
	}
	want, _ := makeFolds(caseIDs(ds), 3)
	if !bytes.Equal(b, encodeSplits(want)) {
		t.Errorf("written splits\n%s\nwant\n%s", b, encodeSplits(want))
	}
	if tr, va, _ := FoldCases(ds, got); fmt.Sprint(tr, va) != fmt.Sprint(tr0, va0) {
		t.Errorf("folds from the written file %v %v differ from the generated %v %v", tr, va, tr0, va0)
	}
	// Edited by hand: reused, not regenerated, by FoldCases and Setup.
	want[0], want[1] = want[1], want[0]
	os.WriteFile(path, encodeSplits(want), 0o644)
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp}); err != nil {
		t.Fatal(err)
	}
	tr1, va1, err := FoldCases(ds, got)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tr1, va1) == fmt.Sprint(tr0, va0) || len(va1) != 2 {
		t.Errorf("the edited splits file was not used: %v %v", tr1, va1)
	}
	cfg.NumFolds = 4
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp}); err == nil || !strings.Contains(err.Error(), "has 3 folds but num_folds is 4") {
		t.Errorf("fold count mismatch: %v", err)
	}
}

// TestSplitsInTheDatasetOrStoreAreUsed: an existing splits_final.json in the
// store folder, else the dataset folder (nnU-Net's preprocessed folder
// carries one) is used and nothing is generated; a hold-out split ignores
// those k-fold files.
func TestSplitsInTheDatasetOrStoreAreUsed(t *testing.T) {
	dir := demoDataset(t, 7)
	store := t.TempDir()
	exp := t.TempDir()
	cfg := filled(config.Data{Dataset: dir, Store: store, NumFolds: 2, Fold: 1})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := caseIDs(ds)
	sort.Strings(ids)
	own := []foldSplit{{Train: ids[:3], Val: ids[3:]}, {Train: ids[3:], Val: ids[:3]}}
	os.WriteFile(filepath.Join(dir, "splits_final.json"), encodeSplits(own), 0o644)
	got, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "splits_final.json"); got.SplitsFile != want {
		t.Errorf("splits file %q, want the dataset's %q", got.SplitsFile, want)
	}
	if _, va, _ := FoldCases(ds, cfg); len(va) != 3 || ds.Cases[va[0]].ID != ids[0] {
		t.Errorf("fold 1 validates on %v, want the dataset file's first 3 cases", va)
	}
	if names := testutil.DirNames(t, exp); len(names) != 0 {
		t.Errorf("the experiment folder holds %v: splits generated beside the dataset's", names)
	}
	// The store's file comes first.
	os.WriteFile(filepath.Join(store, "splits_final.json"), encodeSplits([]foldSplit{own[1], own[0]}), 0o644)
	if _, va, _ := FoldCases(ds, cfg); len(va) != 4 {
		t.Errorf("fold 1 validates on %v, want the store file's 4 cases", va)
	}
	// A hold-out split is generated and written under its own name.
	cfg.HoldoutFraction, cfg.Fold = 0.25, 0
	got, err = Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(exp, "splits_holdout_0.25.json"); got.SplitsFile != want {
		t.Errorf("hold-out splits file %q, want %q", got.SplitsFile, want)
	}
	tr, va, err := FoldCases(ds, got)
	if err != nil || len(tr) != 5 || len(va) != 2 { // int(7 × 0.75) = 5 train
		t.Errorf("hold-out 0.25 of 7 cases: train %v val %v, %v", tr, va, err)
	}
	cfg.Fold = 1
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp}); err == nil || !strings.Contains(err.Error(), "data.fold") {
		t.Errorf("fold 1 of a hold-out split: %v", err)
	}
	// A k-fold file given as a hold-out's splits_file is refused.
	cfg.Fold, cfg.SplitsFile = 0, filepath.Join(store, "splits_final.json")
	if _, _, err := FoldCases(ds, cfg); err == nil || !strings.Contains(err.Error(), "has 2 splits but holdout_fraction 0.25 wants one") {
		t.Errorf("k folds for a hold-out: %v", err)
	}
}

// TestSetupWithReadOnlyDataset: a dataset folder no one may write in (a
// read-only mount) sets up, the folds written to the experiment folder.
func TestSetupWithReadOnlyDataset(t *testing.T) {
	dir := demoDataset(t, 5)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skip("permissions are not enforced here (running as root?)")
	}
	exp := t.TempDir()
	cfg := filled(config.Data{Dataset: dir, NumFolds: 5, Fold: 2})
	got, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp})
	if err != nil {
		t.Fatalf("read-only dataset: %v", err)
	}
	if got.SplitsFile != filepath.Join(exp, "splits_final.json") {
		t.Errorf("splits file %q", got.SplitsFile)
	}
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard()}); err != nil {
		t.Errorf("read-only dataset, splits in memory: %v", err)
	}
}

// TestSplitsFileErrors: a splits file that does not fit the dataset is an
// error naming the file and the problem.
func TestSplitsFileErrors(t *testing.T) {
	dir := demoDataset(t, 4)
	cfg := filled(config.Data{Dataset: dir, NumFolds: 2, Fold: 0, SplitsFile: filepath.Join(t.TempDir(), "s.json")})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := caseIDs(ds)
	for _, c := range []struct {
		body, want string
	}{
		{"{", "parse splits"},
		{string(encodeSplits([]foldSplit{{Train: ids[2:], Val: ids[:2]}, {Train: ids[:2], Val: []string{ids[2], "nobody"}}})), `names case "nobody"`},
		{string(encodeSplits([]foldSplit{{Train: ids[2:], Val: ids[:2]}, {Train: ids[:2], Val: ids[2:3]}})), "in no fold's val list"},
	} {
		os.WriteFile(cfg.SplitsFile, []byte(c.body), 0o644)
		_, _, err := FoldCases(ds, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), cfg.SplitsFile) {
			t.Errorf("%s: %v, want an error naming the file and %q", c.body, err, c.want)
		}
	}
}
