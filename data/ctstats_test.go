package data

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/preprocess"
)

// ctShape is the synthetic CT cases' NIfTI shape (x, y, z).
var ctShape = []int{10, 9, 8}

// writeCTCase writes a synthetic CT case: air (about −1000 HU) around a
// box of tissue (class 1, about 40+10·k HU) with a core of class 2
// (about 300 HU); fg false writes an all-background label. int16 stores
// the image as scaled int16, as CT scanners do.
func writeCTCase(t *testing.T, dir, id string, k int, fg, int16 bool) config.CaseSpec {
	t.Helper()
	n := ctShape[0] * ctShape[1] * ctShape[2]
	r := rand.New(rand.NewPCG(uint64(k), 99))
	img := make([]float32, n)
	lbl := make([]float32, n)
	for z := range ctShape[2] {
		for y := range ctShape[1] {
			for x := range ctShape[0] {
				i := (z*ctShape[1]+y)*ctShape[0] + x
				img[i] = float32(-1000 + 20*r.NormFloat64())
				if fg && x >= 2 && x < 8 && y >= 1 && y < 7 && z >= 2 && z < 7 {
					img[i], lbl[i] = float32(40+10*float64(k)+30*r.NormFloat64()), 1
					if x >= 4 && x < 6 && y >= 3 && y < 5 {
						img[i], lbl[i] = float32(300+50*r.NormFloat64()), 2
					}
				}
			}
		}
	}
	hi, err := nifti.NewHeader(ctShape, nifti.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if int16 {
		hi, _ = nifti.NewHeader(ctShape, nifti.Int16)
		hi.SclSlope, hi.SclInter = 0.5, -1024
	}
	hl, _ := nifti.NewHeader(ctShape, nifti.Uint8)
	spec := config.CaseSpec{ID: id, Image: config.StringList{filepath.Join(dir, id+"_ct.nii.gz")}, Label: filepath.Join(dir, id+"_seg.nii.gz")}
	if err := nifti.WriteFloat32(spec.Image[0], hi, img); err != nil {
		t.Fatal(err)
	}
	if err := nifti.WriteFloat32(spec.Label, hl, lbl); err != nil {
		t.Fatal(err)
	}
	return spec
}

// ctDataset writes six cases: four with foreground (one stored as scaled
// int16), one whose label is all background, and one without a label.
func ctDataset(t *testing.T) config.Data {
	dir := t.TempDir()
	var cases []config.CaseSpec
	for k := range 6 {
		cs := writeCTCase(t, dir, "ct_"+string(rune('a'+k)), k, k != 4, k == 2)
		if k == 5 {
			cs.Label = ""
		}
		cases = append(cases, cs)
	}
	return filled(config.Data{Cases: cases, Store: filepath.Join(dir, "store"), Fold: -1,
		Normalization: config.StringList{"ct"}})
}

// directCTStats computes the statistics as documented, from nifti reads:
// per labelled case, ctSamplesPerCase foreground intensities drawn with
// replacement by PCG(1234, FNV-1a(case ID)); pooled; numpy's percentiles
// (linear), mean and population std.
func directCTStats(t *testing.T, cfg config.Data) (lo, hi, mean, std float64, cases int) {
	t.Helper()
	var pool []float64
	for _, cs := range cfg.Cases {
		if cs.Label == "" {
			continue
		}
		_, img, err := nifti.ReadFloat32(cs.Image[0])
		if err != nil {
			t.Fatal(err)
		}
		_, lbl, err := nifti.ReadFloat32(cs.Label)
		if err != nil {
			t.Fatal(err)
		}
		var fg []float32
		for i, l := range lbl {
			if l > 0 {
				fg = append(fg, img[i])
			}
		}
		if len(fg) == 0 {
			continue
		}
		cases++
		h := fnv.New64a()
		h.Write([]byte(cs.ID))
		r := rand.New(rand.NewPCG(1234, h.Sum64()))
		for range ctSamplesPerCase {
			pool = append(pool, float64(fg[r.IntN(len(fg))]))
		}
	}
	slices.Sort(pool)
	for _, x := range pool {
		mean += x
	}
	mean /= float64(len(pool))
	for _, x := range pool {
		std += (x - mean) * (x - mean)
	}
	std = math.Sqrt(std / float64(len(pool)))
	pct := func(q float64) float64 {
		pos := q / 100 * float64(len(pool)-1)
		i := int(pos)
		return pool[i] + (pos-float64(i))*(pool[i+1]-pool[i])
	}
	return pct(0.5), pct(99.5), mean, std, cases
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestCTStatisticsMatchDirectAndWorkers(t *testing.T) {
	cfg := ctDataset(t)
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, mean, std, cases := directCTStats(t, cfg)
	if cases != 4 {
		t.Fatalf("direct computation used %d cases, want 4", cases)
	}
	var ref CTStatistics
	for _, w := range []int{1, 2, 5, 16} {
		st, err := computeCTStatistics(context.Background(), ds, 1, 0, w)
		if err != nil {
			t.Fatal(err)
		}
		if st.Cases != 4 || st.Samples != 4*ctSamplesPerCase || st.Channel != 0 {
			t.Errorf("workers %d: %d cases, %d samples, channel %d", w, st.Cases, st.Samples, st.Channel)
		}
		if !near(st.Stats.Lower, lo) || !near(st.Stats.Upper, hi) || !near(st.Stats.Mean, mean) || !near(st.Stats.Std, std) {
			t.Errorf("workers %d: %+v, direct window [%v, %v] mean %v std %v", w, st.Stats, lo, hi, mean, std)
		}
		if w == 1 {
			ref = st
		} else if st != ref {
			t.Errorf("workers %d: %+v, 1 worker gave %+v", w, st, ref)
		}
	}
	// Plausible for the synthetic data: tissue and core, no air.
	if ref.Stats.Lower < -200 || ref.Stats.Upper > 600 || ref.Stats.Mean < 40 || ref.Stats.Mean > 250 {
		t.Errorf("implausible statistics %+v", ref.Stats)
	}
}

func TestCTStatisticsCachedAndLogged(t *testing.T) {
	cfg := ctDataset(t)
	log, lb := testLogger()
	got, _, err := resolveCTStatistics(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, mean, std, _ := directCTStats(t, cfg)
	if len(got.CTWindow) != 2 || !near(got.CTWindow[0], lo) || !near(got.CTWindow[1], hi) || !near(got.CTMean, mean) || !near(got.CTStd, std) {
		t.Fatalf("resolved window %v mean %v std %v; want [%v %v] %v %v", got.CTWindow, got.CTMean, got.CTStd, lo, hi, mean, std)
	}
	// Nothing else changed (no defaults applied): a run saves this.
	want := cfg
	want.CTWindow, want.CTMean, want.CTStd = got.CTWindow, got.CTMean, got.CTStd
	if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
		t.Errorf("other fields changed:\n%s\n%s", b1, b2)
	}
	if !strings.Contains(lb.String(), "ct statistics from 4 cases: window [") || !strings.Contains(lb.String(), "computing ct statistics") {
		t.Errorf("log:\n%s", lb.String())
	}
	path := ctStatsPath(cfg)
	if path != filepath.Join(cfg.Store, "ct_statistics.json") {
		t.Errorf("cache path %s", path)
	}
	// Second time: read from the file, not recomputed.
	log2, lb2 := testLogger()
	again, _, err := resolveCTStatistics(context.Background(), cfg, log2)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(lb2.String(), "computing") || !strings.Contains(lb2.String(), "cached=true") || again.CTMean != got.CTMean {
		t.Errorf("second resolve recomputed or differs (mean %v, was %v):\n%s", again.CTMean, got.CTMean, lb2.String())
	}
	// Proof that the file is what is read: edit it by hand.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber() // keep the mtimes exact
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	f["statistics"].(map[string]any)["statistics"].(map[string]any)["mean"] = 12345.0
	b, _ = json.Marshal(f)
	os.WriteFile(path, b, 0o644)
	edited, _, err := resolveCTStatistics(context.Background(), cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	if edited.CTMean != 12345 {
		t.Errorf("the cached file was not used: mean %v", edited.CTMean)
	}
	// A changed case makes the cache stale: recomputed from the new data.
	writeCTCase(t, filepath.Dir(cfg.Cases[1].Image[0]), cfg.Cases[1].ID, 17, true, false)
	later := time.Now().Add(time.Minute)
	os.Chtimes(cfg.Cases[1].Image[0], later, later)
	log3, lb3 := testLogger()
	fresh, _, err := resolveCTStatistics(context.Background(), cfg, log3)
	if err != nil {
		t.Fatal(err)
	}
	_, _, mean2, _, _ := directCTStats(t, cfg)
	if !near(fresh.CTMean, mean2) || near(mean2, mean) || !strings.Contains(lb3.String(), "stale") {
		t.Errorf("after a case changed: mean %v, want %v (was %v)\n%s", fresh.CTMean, mean2, mean, lb3.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCTStatisticsGivenValuesWin(t *testing.T) {
	cfg := ctDataset(t)
	lo, hi, mean, std, _ := directCTStats(t, cfg)
	for _, tc := range []struct {
		name                 string
		window               []float64
		mean, std            float64
		wantWindow           []float64
		wantMean, wantStd    float64
		computeWindow, noLog bool
		meanGiven            bool
	}{
		{name: "window given", window: []float64{-100, 200}, wantWindow: []float64{-100, 200}, wantMean: mean, wantStd: std},
		{name: "mean and std given", mean: 7, std: 50, wantWindow: []float64{lo, hi}, wantMean: 7, wantStd: 50},
		{name: "mean given", mean: 9, wantWindow: []float64{lo, hi}, wantMean: 9, wantStd: std},
		{name: "all given", window: []float64{0, 1}, mean: 2, std: 3, wantWindow: []float64{0, 1}, wantMean: 2, wantStd: 3, noLog: true},
		// A file's ct_mean: 0 is a mean, not "compute it".
		{name: "mean 0 given", meanGiven: true, wantWindow: []float64{lo, hi}, wantMean: 0, wantStd: std},
	} {
		c := cfg
		c.CTWindow, c.CTMean, c.CTStd, c.CTMeanGiven = tc.window, tc.mean, tc.std, tc.meanGiven
		log, lb := testLogger()
		got, _, err := resolveCTStatistics(context.Background(), c, log)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got.CTWindow) != 2 || !near(got.CTWindow[0], tc.wantWindow[0]) || !near(got.CTWindow[1], tc.wantWindow[1]) ||
			!near(got.CTMean, tc.wantMean) || !near(got.CTStd, tc.wantStd) {
			t.Errorf("%s: window %v mean %v std %v; want %v %v %v", tc.name, got.CTWindow, got.CTMean, got.CTStd, tc.wantWindow, tc.wantMean, tc.wantStd)
		}
		if tc.noLog != (lb.String() == "") {
			t.Errorf("%s: log %q", tc.name, lb.String())
		}
	}
	// No ct normalisation: nothing computed, nothing written.
	c := cfg
	c.Normalization = config.StringList{"zscore"}
	if got, _, err := resolveCTStatistics(context.Background(), c, discard()); err != nil || got.CTWindow != nil || got.CTStd != 0 {
		t.Errorf("zscore config: %+v, %v", got, err)
	}
}

// TestCTStatisticsInPipeline: prepare and Setup compute the same
// statistics once, cache them, put them in the store's fingerprint, and
// loaders over every source give identical batches; Open and ReadCase
// refuse a config whose statistics are unresolved.
func TestCTStatisticsInPipeline(t *testing.T) {
	cfg := ctDataset(t)
	cfg.Cases = cfg.Cases[:5] // training needs labels
	log, lb := testLogger()
	rep, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: log, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.CT == nil || rep.CT.Cases != 4 || rep.Written != 5 {
		t.Fatalf("prepare: %+v (ct %+v)\n%s", rep, rep.CT, lb.String())
	}
	ix, err := store.ReadIndex(cfg.StoreDir())
	if err != nil {
		t.Fatal(err)
	}
	var fp struct {
		Prep preprocess.Spec `json:"prep"`
	}
	if err := json.Unmarshal(ix.Prep, &fp); err != nil {
		t.Fatal(err)
	}
	if fp.Prep.CTMean != rep.CT.Stats.Mean || fp.Prep.CTStd != rep.CT.Stats.Std || len(fp.Prep.CTWindow) != 2 || fp.Prep.CTWindow[1] != rep.CT.Stats.Upper {
		t.Errorf("store fingerprint %+v lacks the computed statistics %+v", fp.Prep, rep.CT.Stats)
	}
	// Prepare again: statistics from the cache, store current.
	if rep2, err := Prepare(context.Background(), cfg, PrepareOptions{Logger: discard()}); err != nil || rep2.Written != 0 || *rep2.CT != *rep.CT {
		t.Errorf("second prepare: %+v, %v", rep2, err)
	}
	opt := Options{Seed: 3, Iterations: 2, Patch: [3]int{8, 8, 8}, Batch: 2, Augment: nnunetAug(t)}
	if _, err := Open(cfg, opt); err == nil || !strings.Contains(err.Error(), "ct_window") {
		t.Errorf("Open with unresolved ct statistics: %v", err)
	}
	ds, _ := OpenDataset(cfg)
	if _, err := ReadCase(cfg, ds.Cases[0], 0); err == nil || !strings.Contains(err.Error(), "ct_window") {
		t.Errorf("ReadCase with unresolved ct statistics: %v", err)
	}
	unresolved := cfg
	if cfg, err = Setup(context.Background(), cfg, SetupOptions{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	if cfg.CTStd != rep.CT.Stats.Std || unresolved.CTStd != 0 {
		t.Fatalf("Setup gave ct_std %v, want %v", cfg.CTStd, rep.CT.Stats.Std)
	}
	sameBatchesEverywhere(t, cfg, opt, []string{"store", "cache", "gz"}, []int{0, 2}, 2, 4, func(src string, _ int, l *Loader) {
		if l.spec.CTMean != rep.CT.Stats.Mean || l.spec.CTWindow[0] != rep.CT.Stats.Lower {
			t.Errorf("%s: loader spec %+v", src, l.spec)
		}
		v, err := l.LoadCase(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		lo := float32((rep.CT.Stats.Lower - rep.CT.Stats.Mean) / rep.CT.Stats.Std)
		hi := float32((rep.CT.Stats.Upper - rep.CT.Stats.Mean) / rep.CT.Stats.Std)
		for _, x := range v.Image[0] {
			if x < lo-1e-5 || x > hi+1e-5 {
				t.Fatalf("%s: value %v outside the normalised window [%v, %v]", src, x, lo, hi)
			}
		}
	})
	// ReadCase (prediction without a loader) with the resolved config.
	v, err := ReadCase(cfg, ds.Cases[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	p := preprocess.SpecOf(filled(config.Data{Normalization: config.StringList{"ct"}, CTWindow: []float64{rep.CT.Stats.Lower, rep.CT.Stats.Upper},
		CTMean: rep.CT.Stats.Mean, CTStd: rep.CT.Stats.Std}))
	want, _, err := readCase(ds.Cases[0], 0, &p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Image[0], want.Image[0]) {
		t.Error("ReadCase normalised differently from the computed statistics")
	}
}

func TestCTStatisticsErrors(t *testing.T) {
	cfg := ctDataset(t)
	// No case with foreground.
	c := cfg
	c.Cases = []config.CaseSpec{cfg.Cases[4], cfg.Cases[5]}
	if _, _, err := resolveCTStatistics(context.Background(), c, discard()); err == nil || !strings.Contains(err.Error(), "no case") {
		t.Errorf("no foreground: %v", err)
	}
	// Two channels both ct: statistics are per channel, the config holds one set.
	c = cfg
	c.Cases = nil
	for _, cs := range cfg.Cases[:4] {
		cs.Image = config.StringList{cs.Image[0], cs.Image[0]}
		c.Cases = append(c.Cases, cs)
	}
	if _, _, err := resolveCTStatistics(context.Background(), c, discard()); err == nil || !strings.Contains(err.Error(), "data.normalization") {
		t.Errorf("two ct channels: %v", err)
	}
	// One ct channel of two works.
	c.Normalization = config.StringList{"zscore", "ct"}
	got, _, err := resolveCTStatistics(context.Background(), c, discard())
	if err != nil || len(got.CTWindow) != 2 {
		t.Errorf("second channel ct: %+v, %v", got.CTWindow, err)
	}
	// A corrupt cache file is ignored and replaced.
	os.WriteFile(ctStatsPath(cfg), []byte("{not json"), 0o644)
	log, lb := testLogger()
	if _, _, err := resolveCTStatistics(context.Background(), cfg, log); err != nil || !strings.Contains(lb.String(), "unreadable") {
		t.Errorf("corrupt cache: %v\n%s", err, lb.String())
	}
	if b, _ := os.ReadFile(ctStatsPath(cfg)); !json.Valid(b) {
		t.Error("the corrupt cache file was not rewritten")
	}
	// Cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ds, _ := OpenDataset(cfg)
	if _, err := computeCTStatistics(ctx, ds, 1, 0, 2); err == nil {
		t.Error("a cancelled computation succeeded")
	}
}

// resolveCTStatistics is Setup's ct step alone: cfg with the ct
// statistics it leaves to compute (ct_window, ct_std and ct_mean; see
// config.Data.CTStd) filled in from the dataset, reading the cached
// ct_statistics.json or computing and caching it, and the statistics
// themselves (nil when cfg does not leave any to compute). log (nil:
// slog.Default()) receives the statistics.
func resolveCTStatistics(ctx context.Context, cfg config.Data, log *slog.Logger) (config.Data, *CTStatistics, error) {
	if !cfg.NeedsCTStatistics() {
		return cfg, nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	ds, ch, err := openWithChannels(cfg)
	if err != nil {
		return cfg, nil, err
	}
	return resolveCT(ctx, cfg, ds, ch, max(1, cfg.WorkerCount()), log)
}
