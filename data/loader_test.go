package data

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

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
	testutil.SkipUnderRace(t, "the race detector allocates")
	dir := demoDataset(t, 3)
	for _, src := range []string{"cache", "store"} {
		cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2), Source: src})
		aug := nnunetAug(t)
		aug.Elastic.P = 0.3 // exercise every transform
		l := openLoader(t, cfg, Options{Seed: 4, Iterations: 1 << 20, Patch: [3]int{24, 24, 24}, Batch: 2, Augment: aug})
		s, _ := l.Train(StreamOptions{})
		// Warm up first: every case cached, scratch grown.
		if a := allocsPerBatch(t, s, 200, 100); a != 0 {
			t.Errorf("%s: %.2f allocations per batch in steady state, want 0", src, a)
		}
		l.Close()
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

// TestFIFOImageHardTimeout is the hung read of a real file: a case's
// image is a FIFO nobody writes to (as a hung NFS or FUSE read), so its
// worker blocks in open for good. The hard timeout fails the stream with
// an error naming the file, and closing the loader returns at once
// (before, it waited for the blocked worker forever and the run could not
// stop, not even on SIGTERM).
func TestFIFOImageHardTimeout(t *testing.T) {
	dir := demoDataset(t, 4)
	fifo := filepath.Join(dir, "imagesTr", demoIDs[2]+".nii.gz")
	log, lb := testLogger()
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(2), Source: "gz", HardTimeout: 300 * time.Millisecond})
	l := openLoader(t, cfg, Options{Seed: 1, Iterations: 8, Patch: [3]int{16, 16, 16}, Batch: 2, Logger: log})
	// The file becomes a FIFO after the dataset was opened (which refuses
	// a FIFO outright), as a mount hangs under a running training.
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	t.Cleanup(func() {
		// Unblock the abandoned worker's open so its goroutine ends: a
		// writer that opens and closes gives the reader EOF.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	s, err := l.Train(StreamOptions{Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		var b *Batch
		if b, err = s.Next(context.Background()); err == nil {
			b.Release()
		}
	}
	if err == io.EOF || !strings.Contains(err.Error(), "hard timeout") || !strings.Contains(err.Error(), fifo) {
		t.Fatalf("Next: %v, want a hard-timeout error naming %s", err, fifo)
	}
	closesWithin(t, "Loader.Close", 5*time.Second, func() { l.Close() })
	if !strings.Contains(lb.String(), "abandoning a stuck worker") {
		t.Errorf("the stuck worker was not reported as abandoned:\n%s", lb.String())
	}
}
