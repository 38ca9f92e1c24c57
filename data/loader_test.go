package data

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/preprocess"
)

// demoDir holds the real MSD Task04 hippocampus cases (small volumes).
const demoDir = "../testdata/demo"

var demoIDs = []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019",
	"hippocampus_024", "hippocampus_033", "hippocampus_037", "hippocampus_040"}

// demoDataset copies n demo cases into a fresh MSD-layout folder (so tests
// may change files, and write splits and stores next to them).
func demoDataset(t *testing.T, n int) string {
	t.Helper()
	src, err := filepath.Abs(demoDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "dataset.json")); err != nil {
		t.Fatalf("demo data not found at %s: %v", src, err)
	}
	dir := t.TempDir()
	var training []map[string]string
	for _, id := range demoIDs[:n] {
		for _, sub := range []string{"imagesTr", "labelsTr"} {
			os.MkdirAll(filepath.Join(dir, sub), 0o755)
			b, err := os.ReadFile(filepath.Join(src, sub, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, sub, id+".nii.gz"), b, 0o644)
		}
		training = append(training, map[string]string{"image": "./imagesTr/" + id + ".nii.gz", "label": "./labelsTr/" + id + ".nii.gz"})
	}
	meta := map[string]any{"name": "demo", "modality": map[string]string{"0": "MRI"},
		"labels": map[string]string{"0": "background", "1": "Anterior", "2": "Posterior"}, "training": training}
	b, _ := json.MarshalIndent(meta, "", " ")
	os.WriteFile(filepath.Join(dir, "dataset.json"), b, 0o644)
	return dir
}

func nnunetAug(t *testing.T) config.Augment {
	c, err := config.AugmentPreset(config.PresetNNUNet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openLoader sets up cfg's dataset (splits, ct statistics, store) and
// opens a loader, as a run does.
func openLoader(t *testing.T, cfg config.Data, opt Options) *Loader {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger, _ = testLogger()
	}
	cfg, err := Setup(context.Background(), cfg, SetupOptions{Logger: opt.Logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// digestStream hashes every byte of n batches.
func digestStream(t *testing.T, s *BatchStream, n int) string {
	t.Helper()
	h := sha256.New()
	for i := 0; i < n; i++ {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		binary.Write(h, binary.LittleEndian, b.Image)
		binary.Write(h, binary.LittleEndian, b.Label)
		b.Release()
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func workers(n int) config.Workers { return config.Workers{N: n, Set: true} }

// sameBatchesEverywhere opens a loader for every source × worker count,
// reads batches training batches over epochs epochs (and then expects the
// end), calls check (when not nil) with the open loader, and fails unless
// every digest equals the first one, which it returns.
func sameBatchesEverywhere(t *testing.T, base config.Data, opt Options, sources []string, workerCounts []int, epochs, batches int, check func(src string, w int, l *Loader)) string {
	t.Helper()
	var ref, refName string
	for _, src := range sources {
		for _, w := range workerCounts {
			cfg := base
			cfg.Source, cfg.Workers = src, workers(w)
			l := openLoader(t, cfg, opt)
			if l.Source != src {
				t.Fatalf("source %s, want %s", l.Source, src)
			}
			s, err := l.Train(StreamOptions{Epochs: epochs})
			if err != nil {
				t.Fatal(err)
			}
			d := digestStream(t, s, batches)
			if _, err := s.Next(context.Background()); err != io.EOF {
				t.Errorf("%s, %d workers: after %d epochs × %d batches: %v, want EOF", src, w, epochs, batches/epochs, err)
			}
			if check != nil {
				check(src, w, l)
			}
			l.Close()
			name := fmt.Sprintf("%s/%d workers", src, w)
			if ref == "" {
				ref, refName = d, name
			} else if d != ref {
				t.Errorf("%s: digest %s, %s gave %s", name, d[:12], refName, ref[:12])
			}
		}
	}
	return ref
}

func TestLoaderByteIdenticalAcrossWorkersAndSources(t *testing.T) {
	dir := demoDataset(t, 6)
	base := filled(config.Data{Dataset: dir, Fold: 0, NumFolds: 3})
	opt := Options{Seed: 11, Iterations: 3, Patch: [3]int{40, 40, 40}, Batch: 3, Augment: nnunetAug(t)} // larger than some volumes: padding
	// Prepare the store first so "store" does not build it inside the loop.
	if _, err := Prepare(context.Background(), base, PrepareOptions{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	ws := []int{1, 2, 8}
	if testing.Short() {
		ws = ws[:2]
	}
	sameBatchesEverywhere(t, base, opt, []string{"cache", "gz", "store"}, ws, 2, 6, nil)
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestBatchContents(t *testing.T) {
	dir := demoDataset(t, 4)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2)})
	opt := Options{Seed: 3, Iterations: 4, Patch: [3]int{16, 24, 16}, Batch: 3} // no augmentation: plain crops
	l := openLoader(t, cfg, opt)
	s, err := l.Train(StreamOptions{Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vox := 16 * 24 * 16
	fgSlots, fgHits := 0, 0
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Image) != 3*vox || len(b.Label) != 3*vox || b.C != 1 || b.Patch != [3]int{16, 24, 16} {
			t.Fatalf("batch geometry: %d image, %d label floats, C %d, patch %v", len(b.Image), len(b.Label), b.C, b.Patch)
		}
		for i := 0; i < b.N; i++ {
			img, lbl := b.ImageSlot(i), b.LabelSlot(i)
			// The slot is a plain crop of the z-scored case: find it.
			v, err := l.LoadCase(context.Background(), b.Samples[i].Case)
			if err != nil {
				t.Fatal(err)
			}
			if !isCropOf(img, lbl, v, [3]int{16, 24, 16}) {
				t.Errorf("batch %d slot %d (case %d) is not a crop of its case", b.Step, i, b.Samples[i].Case)
			}
			if b.Samples[i].ForceFG {
				fgSlots++
				for _, x := range lbl {
					if x > 0 {
						fgHits++
						break
					}
				}
			}
		}
		b.Release()
	}
	// round(3 × 0.33) = 1 forced slot per batch, 4 batches.
	if fgSlots != 4 || fgHits != 4 {
		t.Errorf("%d foreground-forced slots, %d with foreground; want 4 and 4", fgSlots, fgHits)
	}
}

// isCropOf reports whether img/lbl equal some crop of v (all inside).
func isCropOf(img, lbl []float32, v *Volume, p [3]int) bool {
	s := v.Shape
	for z := 0; z+p[0] <= s[0]; z++ {
		for y := 0; y+p[1] <= s[1]; y++ {
			for x := 0; x+p[2] <= s[2]; x++ {
				if v.Image[0][(z*s[1]+y)*s[2]+x] != img[0] {
					continue
				}
				ok := true
				for i := 0; i < p[0] && ok; i++ {
					for j := 0; j < p[1] && ok; j++ {
						for k := 0; k < p[2]; k++ {
							src := ((z+i)*s[1]+y+j)*s[2] + x + k
							dst := (i*p[1]+j)*p[2] + k
							if v.Image[0][src] != img[dst] || float32(v.Label[src]) != lbl[dst] {
								ok = false
								break
							}
						}
					}
				}
				if ok {
					return true
				}
			}
		}
	}
	return false
}

func TestStorePatchReadsEqualFullDecodeCrops(t *testing.T) {
	dir := demoDataset(t, 3)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, StoreChunk: 16})
	if _, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	ds, _ := OpenDataset(cfg)
	st, err := store.Open(cfg.StoreDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := preprocess.SpecOf(cfg)
	r := rand.New(rand.NewPCG(5, 5))
	var sc store.Scratch
	for _, c := range ds.Cases {
		v, _, err := readCase(c, 1, &p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc2, err := st.Case(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeMeta(sc2.Extra, sc2.Shape)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(m.fg) != fmt.Sprint(v.FG) || m.spacing != v.Spacing || m.affine != v.Affine {
			t.Errorf("case %s: stored metadata differs from a fresh decode", c.ID)
		}
		for it := 0; it < 25; it++ {
			var lo, hi [3]int
			for a := range 3 {
				sz := 1 + r.IntN(v.Shape[a])
				lo[a] = r.IntN(v.Shape[a] - sz + 1)
				hi[a] = lo[a] + sz
			}
			n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
			img := [][]float32{make([]float32, n)}
			lbl := make([]uint8, n)
			if err := sc2.ReadRegion(lo, hi, img, lbl, &sc); err != nil {
				t.Fatal(err)
			}
			k := 0
			for z := lo[0]; z < hi[0]; z++ {
				for y := lo[1]; y < hi[1]; y++ {
					for x := lo[2]; x < hi[2]; x++ {
						i := (z*v.Shape[1]+y)*v.Shape[2] + x
						if img[0][k] != v.Image[0][i] || lbl[k] != v.Label[i] {
							t.Fatalf("case %s region [%v,%v): voxel (%d,%d,%d) store %v/%d, decode %v/%d",
								c.ID, lo, hi, z, y, x, img[0][k], lbl[k], v.Image[0][i], v.Label[i])
						}
						k++
					}
				}
			}
		}
	}
}

func TestStoreRebuiltWhenSourceChanges(t *testing.T) {
	dir := demoDataset(t, 3)
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Source: "store", Workers: workers(1)})
	rep, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 3 || rep.Current != 0 {
		t.Fatalf("first prepare wrote %d, kept %d", rep.Written, rep.Current)
	}
	ixPath := filepath.Join(cfg.StoreDir(), "index.json")
	st0, _ := os.Stat(ixPath)
	rep, _ = Prepare(context.Background(), cfg, PrepareOptions{Logger: log})
	if rep.Written != 0 || rep.Current != 3 {
		t.Fatalf("second prepare wrote %d, kept %d; want 0, 3", rep.Written, rep.Current)
	}
	if st1, _ := os.Stat(ixPath); !st1.ModTime().Equal(st0.ModTime()) {
		t.Error("an up-to-date store's index was rewritten")
	}
	// Touch a file without changing it: still current.
	img1 := filepath.Join(dir, "imagesTr", demoIDs[1]+".nii.gz")
	later := time.Now().Add(time.Minute)
	os.Chtimes(img1, later, later)
	if rep, _ = Prepare(context.Background(), cfg, PrepareOptions{Logger: log}); rep.Written != 0 {
		t.Errorf("a touched, unchanged file rebuilt %d cases", rep.Written)
	}
	// Replace case 1's image with a modified volume: Open (which only
	// reads) refuses the stale store, or with source auto decodes into the
	// cache instead; Setup rebuilds that case (only) and the loader then
	// serves the new voxels.
	h, data, err := nifti.ReadFloat32(img1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = float32(i % 7)
	}
	if err := nifti.WriteFloat32(img1, h, data); err != nil {
		t.Fatal(err)
	}
	opt := Options{Patch: [3]int{8, 8, 8}, Batch: 1, Logger: log}
	if _, err := Open(cfg, opt); err == nil || !strings.Contains(err.Error(), "not current") || !strings.Contains(err.Error(), "train prepare") {
		t.Fatalf("Open of a stale store: %v, want an error naming the stale case and train prepare", err)
	}
	auto := cfg
	auto.Source = "auto"
	if l, err := Open(auto, opt); err != nil || l.Source != "cache" || !strings.Contains(lb.String(), "not reading the prepared store") {
		t.Errorf("source auto over a stale store: %v, log:\n%s", err, lb.String())
	} else {
		l.Close()
	}
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "rebuilt=1") {
		t.Errorf("Setup did not report rebuilding one case:\n%s", lb.String())
	}
	l := openLoader(t, cfg, opt)
	if l.Source != "store" {
		t.Fatalf("source %s", l.Source)
	}
	v, err := l.LoadCase(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	p := preprocess.SpecOf(cfg)
	want, _, err := readCase(l.ds.Cases[1], 1, &p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Image[0] {
		if v.Image[0][i] != want.Image[0][i] {
			t.Fatalf("store serves old voxels at %d: %v, want %v", i, v.Image[0][i], want.Image[0][i])
		}
	}
	// A different preprocessing config rebuilds everything.
	cfg2 := cfg
	cfg2.Normalization = config.StringList{"none"}
	if rep, _ = Prepare(context.Background(), cfg2, PrepareOptions{Logger: log}); rep.Written != 3 {
		t.Errorf("changed normalisation rebuilt %d cases, want 3", rep.Written)
	}
}

func corruptFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the gzip header, break the deflate stream after it.
	for i := 40; i < len(b) && i < 400; i++ {
		b[i] ^= 0xa5
	}
	os.WriteFile(path, b, 0o644)
}

func TestCorruptFileFailAndSkip(t *testing.T) {
	dir := demoDataset(t, 4)
	bad := filepath.Join(dir, "imagesTr", demoIDs[2]+".nii.gz")
	corruptFile(t, bad)
	opt := Options{Seed: 1, Iterations: 6, Patch: [3]int{16, 16, 16}, Batch: 2, Augment: nnunetAug(t)}

	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2), Source: "gz"})
	l := openLoader(t, cfg, opt)
	s, _ := l.Train(StreamOptions{Epochs: 1})
	var err error
	for err == nil {
		var b *Batch
		if b, err = s.Next(context.Background()); err == nil {
			b.Release()
		}
	}
	if err == io.EOF || !strings.Contains(err.Error(), bad) {
		t.Fatalf("fail mode: %v, want an error naming %s", err, bad)
	}
	l.Close()

	var ref string
	for _, w := range []int{1, 3} {
		log, lb := testLogger()
		cfg.OnError, cfg.Workers = "skip", workers(w)
		opt.Logger = log
		l = openLoader(t, cfg, opt)
		s, _ = l.Train(StreamOptions{Epochs: 2})
		d := digestStream(t, s, 12)
		if _, err := s.Next(context.Background()); err != io.EOF {
			t.Errorf("skip mode did not finish both epochs: %v", err)
		}
		if n := strings.Count(lb.String(), "case quarantined"); n != 1 {
			t.Errorf("workers %d: quarantined %d times, want once:\n%s", w, n, lb.String())
		}
		if q := l.Quarantined(); len(q) != 1 || q[demoIDs[2]] == nil {
			t.Errorf("quarantine %v", q)
		}
		l.Close()
		if ref == "" {
			ref = d
		} else if d != ref {
			t.Errorf("skip mode: workers %d batches differ from workers 1", w)
		}
	}
}

func TestValidationStreamAndLoadCase(t *testing.T) {
	dir := demoDataset(t, 6)
	cfg := filled(config.Data{Dataset: dir, Fold: 1, NumFolds: 3, Workers: workers(2)})
	l := openLoader(t, cfg, Options{Seed: 9, Iterations: 2, Patch: [3]int{16, 16, 16}, Batch: 2, Augment: nnunetAug(t)})
	if len(l.ValCases()) != 2 || len(l.TrainCases()) != 4 {
		t.Fatalf("fold 1 of 3 over 6 cases: %d train, %d val", len(l.TrainCases()), len(l.ValCases()))
	}
	train, _ := l.Train(StreamOptions{})
	val, err := l.Validation(StreamOptions{Epochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Interleave: training batches and a validation pass share the pool.
	for i := 0; i < 3; i++ {
		b, err := train.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	d1 := digestStream(t, val, 1)
	d2 := digestStream(t, val, 1)
	if d1 != d2 {
		t.Error("two validation passes drew different patches")
	}
	for _, c := range l.ValCases() {
		v, err := l.LoadCase(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if v.FG == nil || len(v.Image) != 1 || len(v.Image[0]) != v.Shape[0]*v.Shape[1]*v.Shape[2] {
			t.Errorf("LoadCase(%d): shape %v, %d channels", c, v.Shape, len(v.Image))
		}
		inTrain := false
		for _, tc := range l.TrainCases() {
			inTrain = inTrain || tc == c
		}
		if inTrain {
			t.Errorf("validation case %d is also a training case", c)
		}
	}
	train.Close() // stop its prefetching before reading the counters
	st := l.CacheStats()
	if st.Misses != int64(st.Entries) || st.Entries > 6 || st.Hits == 0 {
		t.Errorf("cache after training and validation: %+v (want each case decoded once)", st)
	}
}

// TestPipelineSteadyStateAllocs: the real pipeline (memory cache,
// nnU-Net augmentation) allocates nothing per batch once warm.
func TestPipelineSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	dir := demoDataset(t, 3)
	for _, src := range []string{"cache", "store"} {
		cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2), Source: src})
		aug := nnunetAug(t)
		aug.Elastic.P = 0.3 // exercise every transform
		l := openLoader(t, cfg, Options{Seed: 4, Iterations: 1 << 20, Patch: [3]int{24, 24, 24}, Batch: 2, Augment: aug})
		s, _ := l.Train(StreamOptions{})
		ctx := context.Background()
		for i := 0; i < 200; i++ { // warm up: every case cached, scratch grown
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
		a := testing.AllocsPerRun(100, func() {
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
		})
		if a != 0 {
			t.Errorf("%s: %.2f allocations per batch in steady state, want 0", src, a)
		}
		l.Close()
	}
}

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

func TestNNUNetLayoutAndMultiChannel(t *testing.T) {
	src, _ := filepath.Abs(demoDir)
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

func TestVolumeCache(t *testing.T) {
	loads := map[int]int{}
	var mu = make(chan struct{}, 1)
	mk := func(c int) (*Volume, error) {
		mu <- struct{}{}
		loads[c]++
		<-mu
		if c == 99 {
			return nil, fmt.Errorf("read case 99: broken")
		}
		time.Sleep(2 * time.Millisecond)
		return &Volume{Shape: [3]int{1, 1, 25}, Image: [][]float32{make([]float32, 25)}}, nil // 100 bytes
	}
	c := newVolumeCache(250, mk) // room for two
	get := func(k int) {
		if _, err := c.get(k); err != nil {
			t.Fatal(err)
		}
	}
	get(1)
	get(2)
	get(1) // hit, 1 becomes most recent
	get(3) // evicts 2
	st := c.stats()
	if st.Hits != 1 || st.Misses != 3 || st.Evictions != 1 || st.Entries != 2 || st.Bytes != 200 {
		t.Errorf("stats %+v", st)
	}
	get(1) // still there
	get(2) // miss again
	if loads[2] != 2 || loads[1] != 1 {
		t.Errorf("loads %v", loads)
	}
	if _, err := c.get(99); err == nil {
		t.Error("load error lost")
	}
	// Concurrent misses on one case decode it once.
	c2 := newVolumeCache(1000, mk)
	done := make(chan struct{})
	for i := 0; i < 8; i++ {
		go func() { c2.get(7); done <- struct{}{} }()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	if loads[7] != 1 {
		t.Errorf("case 7 decoded %d times by 8 concurrent gets", loads[7])
	}
	// A volume over the whole budget is served, not kept.
	c3 := newVolumeCache(50, mk)
	get3, _ := c3.get(5)
	if get3 == nil || c3.stats().Uncacheable != 1 || c3.stats().Entries != 0 {
		t.Errorf("oversized volume: %+v", c3.stats())
	}
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
	_, err = OpenDataset(filled(config.Data{Cases: []config.CaseSpec{{ID: "a", Image: config.StringList{"/nonexistent/a.nii"}}}}))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/a.nii") {
		t.Errorf("explicit list: %v", err)
	}
}

func TestDemoDatasetOrder(t *testing.T) {
	src, _ := filepath.Abs(demoDir)
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

func TestCTNormalisationSameOnEverySource(t *testing.T) {
	dir := demoDataset(t, 2)
	base := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1),
		Normalization: config.StringList{"ct"}, CTWindow: []float64{100, 600}, CTMean: 300, CTStd: 80})
	opt := Options{Seed: 2, Iterations: 2, Patch: [3]int{20, 20, 20}, Batch: 2, Augment: nnunetAug(t)}
	sameBatchesEverywhere(t, base, opt, []string{"cache", "gz", "store"}, []int{1}, 1, 2, func(src string, _ int, l *Loader) {
		v, err := l.LoadCase(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := float32((100.0-300)/80), float32((600.0-300)/80)
		for _, x := range v.Image[0] {
			if x < lo-1e-6 || x > hi+1e-6 {
				t.Fatalf("%s: value %v outside the window [%v, %v]", src, x, lo, hi)
			}
		}
	})
}

// TestReadCaseMatchesLoader: the loader-free read used by predict gives the
// same preprocessed voxels as the loader's LoadCase.
func TestReadCaseMatchesLoader(t *testing.T) {
	dir := demoDataset(t, 2)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1), Source: "gz"})
	l := openLoader(t, cfg, Options{Seed: 1, Iterations: 1, Patch: [3]int{16, 16, 16}, Batch: 1, Augment: nnunetAug(t)})
	want, err := l.LoadCase(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCase(cfg, l.Dataset().Cases[1], 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Shape != want.Shape || len(got.Image) != len(want.Image) || len(got.Label) != len(want.Label) {
		t.Fatalf("shape %v/%v", got.Shape, want.Shape)
	}
	for c := range got.Image {
		for i := range got.Image[c] {
			if got.Image[c][i] != want.Image[c][i] {
				t.Fatalf("channel %d voxel %d: %v vs %v", c, i, got.Image[c][i], want.Image[c][i])
			}
		}
	}
	for i := range got.Label {
		if got.Label[i] != want.Label[i] {
			t.Fatalf("label voxel %d", i)
		}
	}
}

// filled returns c with every zero field taken from config.Default().Data,
// so a test names only the fields it is about (an explicit zero that
// differs from the default cannot be written this way: set it after).
func filled(c config.Data) config.Data {
	d := config.Default().Data
	cv, dv := reflect.ValueOf(&c).Elem(), reflect.ValueOf(d)
	for i := 0; i < cv.NumField(); i++ {
		if cv.Field(i).IsZero() {
			cv.Field(i).Set(dv.Field(i))
		}
	}
	return c
}
