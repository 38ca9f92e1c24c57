package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// CT normalisation statistics computed from the dataset, as nnU-Net's
// dataset fingerprint (DatasetFingerprintExtractor): from every labelled
// case, ctSamplesPerCase intensities of the ct channel drawn with
// replacement from its foreground voxels (label > 0) by a generator seeded
// from a fixed seed and the case ID, pooled over the cases; the window is
// the pool's 0.5 and 99.5 percentiles (linear interpolation), the mean and
// std its population mean and std (no clipping first), as
// preprocess.ComputeCTStats computes them. The intensities are the files'
// (scaled, before resampling). Each case's draw depends only on the case,
// and the pool is sorted before any sum, so the result does not depend on
// the number of workers or the order they finish in.
//
// All cases of the dataset are used, not only a fold's training cases (as
// nnU-Net): the statistics, and with them the prepared store, are the
// same for every fold.

// ctSamplesPerCase is the number of foreground voxels drawn per case
// (nnU-Net's collect_foreground_intensities default).
const ctSamplesPerCase = 10000

// ctStatsFile is the name of the file that caches computed statistics,
// in the store folder (see ctStatsPath).
const ctStatsFile = "ct_statistics.json"

// ctStatsSeed is nnU-Net's fixed seed for the foreground draw; the case
// ID is mixed in so that cases draw independent index sequences.
const ctStatsSeed = 1234

// ctStatsVersion changes whenever the computation changes what it
// produces, so cached files made by older code are recomputed.
const ctStatsVersion = 1

// CTStatistics are one channel's foreground intensity statistics over a
// dataset.
type CTStatistics struct {
	// Channel is the image channel they describe.
	Channel int `json:"channel"`
	// Cases counts the cases whose foreground contributed; Samples the
	// pooled intensities.
	Cases   int `json:"cases"`
	Samples int `json:"samples"`
	// Stats are the window (Lower, Upper: the 0.5 and 99.5 percentiles),
	// mean and std.
	Stats preprocess.CTStats `json:"statistics"`
}

// ctStatsPath is where computed ct statistics of cfg's dataset are cached:
// ct_statistics.json in the store folder (config.Data.StoreDir).
func ctStatsPath(cfg config.Data) string {
	return filepath.Join(cfg.StoreDir(), ctStatsFile)
}

// resolveCT fills the ct statistics a validated cfg leaves to compute,
// from the cache file when it is current, else computed over ds by workers
// goroutines and cached. It logs and returns them (nil when nothing was
// needed).
func resolveCT(ctx context.Context, cfg config.Data, ds *Dataset, channels, workers int, log *slog.Logger) (config.Data, *CTStatistics, error) {
	if !cfg.NeedsCTStatistics() {
		return cfg, nil, nil
	}
	if w := cfg.CTWindow; len(w) != 0 && len(w) != 2 {
		return cfg, nil, fmt.Errorf("data.ct_window: want [low, high], got %v", w)
	}
	spec := preprocess.SpecOf(cfg)
	var ctCh []int
	for ch := 0; ch < channels; ch++ {
		if spec.Scheme(ch) == "ct" {
			ctCh = append(ctCh, ch)
		}
	}
	switch {
	case len(ctCh) == 0:
		return cfg, nil, nil
	case len(ctCh) > 1:
		return cfg, nil, fmt.Errorf("data.normalization: channels %v use ct; ct statistics are computed for one channel only: give ct_window, ct_mean and ct_std", ctCh)
	}
	path := ctStatsPath(cfg)
	st, cached, err := loadOrComputeCT(ctx, ds, channels, ctCh[0], workers, path, log)
	if err != nil {
		return cfg, nil, err
	}
	cfg.CTWindow = append([]float64(nil), cfg.CTWindow...)
	if len(cfg.CTWindow) == 0 {
		cfg.CTWindow = []float64{st.Stats.Lower, st.Stats.Upper}
	}
	if cfg.CTStd == 0 {
		cfg.CTStd = st.Stats.Std
		if cfg.CTMean == 0 && !cfg.CTMeanGiven { // a given 0 is a mean
			cfg.CTMean = st.Stats.Mean
		}
	}
	if !(cfg.CTWindow[0] < cfg.CTWindow[1]) || !(cfg.CTStd > 0) {
		return cfg, nil, fmt.Errorf("data.ct_window: the foreground intensities of channel %d are constant (window [%g, %g], std %g from %s): give ct_window, ct_mean and ct_std",
			st.Channel, cfg.CTWindow[0], cfg.CTWindow[1], cfg.CTStd, path)
	}
	log.Info(fmt.Sprintf("data: ct statistics from %d cases: window [%.6g, %.6g], mean %.6g, std %.6g",
		st.Cases, st.Stats.Lower, st.Stats.Upper, st.Stats.Mean, st.Stats.Std),
		"channel", st.Channel, "samples", st.Samples, "file", path, "cached", cached)
	return cfg, &st, nil
}

// ctStatsCache is the JSON of ct_statistics.json: the statistics and
// what they were computed from, to tell whether they are current.
type ctStatsCache struct {
	Version        int          `json:"version"`
	Seed           uint64       `json:"seed"`
	SamplesPerCase int          `json:"samples_per_case"`
	Channels       int          `json:"channels"`
	Cases          []caseStamp  `json:"cases"`
	Statistics     CTStatistics `json:"statistics"`
}

// caseStamp identifies a case's files by path, size and mtime.
type caseStamp struct {
	ID    string      `json:"id"`
	Files []fileStamp `json:"files"`
}

type fileStamp struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
}

func stampCases(ds *Dataset) ([]caseStamp, error) {
	out := make([]caseStamp, len(ds.Cases))
	for i, c := range ds.Cases {
		out[i].ID = c.ID
		for _, f := range c.Files() {
			if volume.IsURL(f) {
				// A remote store has no size or time to stat: it is taken
				// as unchanging (public stores are published, not edited).
				out[i].Files = append(out[i].Files, fileStamp{Path: f})
				continue
			}
			st, err := os.Stat(volume.FilePath(f))
			if err != nil {
				return nil, fmt.Errorf("case %s: %w", c.ID, err)
			}
			out[i].Files = append(out[i].Files, fileStamp{Path: f, Size: st.Size(), ModTime: st.ModTime().UnixNano()})
		}
	}
	return out, nil
}

// loadOrComputeCT returns channel ch's statistics from the cache file at
// path when it was made from the same files with the same method, else
// computes them and rewrites the file (a failed write is logged: the
// statistics are still returned). cached reports which.
func loadOrComputeCT(ctx context.Context, ds *Dataset, channels, ch, workers int, path string, log *slog.Logger) (st CTStatistics, cached bool, err error) {
	stamps, err := stampCases(ds)
	if err != nil {
		return CTStatistics{}, false, fmt.Errorf("ct statistics: %w", err)
	}
	want := ctStatsCache{Version: ctStatsVersion, Seed: ctStatsSeed, SamplesPerCase: ctSamplesPerCase, Channels: channels, Cases: stamps}
	if b, err := os.ReadFile(path); err == nil {
		var have ctStatsCache
		switch err := json.Unmarshal(b, &have); {
		case err != nil:
			log.Warn("data: ignoring an unreadable ct statistics file", "file", path, "err", err)
		case have.Statistics.Channel == ch && sameCTInputs(have, want):
			return have.Statistics, true, nil
		default:
			log.Info("data: ct statistics file is stale (dataset or method changed): recomputing", "file", path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Warn("data: cannot read the ct statistics file", "file", path, "err", err)
	}
	log.Info("data: computing ct statistics from the dataset's foreground", "cases", len(ds.Cases), "channel", ch)
	st, err = computeCTStatistics(ctx, ds, channels, ch, workers)
	if err != nil {
		return CTStatistics{}, false, err
	}
	want.Statistics = st
	b, _ := json.MarshalIndent(want, "", " ")
	// In the store folder, shared as the store is: the umask's modes.
	err = os.MkdirAll(filepath.Dir(path), 0o777)
	if err == nil {
		err = atomicfile.WriteFileUmask(path, append(b, '\n'), 0o666)
	}
	if err != nil {
		log.Warn("data: cannot cache the ct statistics (they are recomputed next time)", "file", path, "err", fmt.Errorf("write %s: %w", path, err))
	}
	return st, false, nil
}

func sameCTInputs(a, b ctStatsCache) bool {
	return a.Version == b.Version && a.Seed == b.Seed && a.SamplesPerCase == b.SamplesPerCase &&
		a.Channels == b.Channels && reflect.DeepEqual(a.Cases, b.Cases)
}

// computeCTStatistics computes channel ch's foreground intensity
// statistics over the labelled cases of ds (of channels channels) as
// nnU-Net's dataset fingerprint does (see ctSamplesPerCase), decoding
// cases on workers goroutines; the result does not depend on workers.
func computeCTStatistics(ctx context.Context, ds *Dataset, channels, ch, workers int) (CTStatistics, error) {
	if ch < 0 || ch >= channels {
		return CTStatistics{}, fmt.Errorf("ct statistics: channel %d of %d", ch, channels)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	samples := make([][]float32, len(ds.Cases))
	errs := make([]error, len(ds.Cases))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				v    Volume
				bufs readBufs
				fg   []float32
			)
			for c := range jobs {
				if cctx.Err() != nil {
					continue
				}
				var err error
				samples[c], fg, err = caseForeground(ds.Cases[c], channels, ch, &v, &bufs, fg)
				if err != nil {
					errs[c] = err
					cancel()
				}
			}
		}()
	}
feed:
	for c, cs := range ds.Cases {
		if cs.Label == "" {
			continue
		}
		select {
		case jobs <- c:
		case <-cctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs { // the first failing case in dataset order
		if err != nil {
			return CTStatistics{}, fmt.Errorf("ct statistics: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return CTStatistics{}, fmt.Errorf("ct statistics: %w", err)
	}
	st := CTStatistics{Channel: ch}
	var pool []float32
	for _, s := range samples {
		if len(s) > 0 {
			st.Cases++
			pool = append(pool, s...)
		}
	}
	if len(pool) == 0 {
		where := ds.Root
		if where == "" {
			where = "the case list"
		}
		return CTStatistics{}, fmt.Errorf("ct statistics: no case of %s has foreground voxels (label > 0) to compute them from: give ct_window, ct_mean and ct_std", where)
	}
	st.Samples = len(pool)
	var err error
	if st.Stats, err = preprocess.ComputeCTStats(pool); err != nil {
		return CTStatistics{}, fmt.Errorf("ct statistics: %w", err)
	}
	return st, nil
}

// caseForeground decodes case c (no normalisation, no resampling) and
// draws ctSamplesPerCase intensities of channel ch from its foreground
// with replacement (nil when it has none). fg is scratch, returned for
// reuse.
func caseForeground(c Case, channels, ch int, v *Volume, bufs *readBufs, fg []float32) ([]float32, []float32, error) {
	if err := decodeCase(c, channels, v, bufs, 0); err != nil {
		return nil, fg, err
	}
	img := v.Image[ch]
	fg = fg[:0]
	for i, l := range v.Label {
		if l > 0 {
			x := img[i]
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fg, fmt.Errorf("%s: case %s has a non-finite intensity (%g) in its foreground", c.Images[min(ch, len(c.Images)-1)], c.ID, x)
			}
			fg = append(fg, x)
		}
	}
	if len(fg) == 0 {
		return nil, fg, nil
	}
	h := fnv.New64a()
	h.Write([]byte(c.ID))
	r := rand.New(rand.NewPCG(ctStatsSeed, h.Sum64()))
	out := make([]float32, ctSamplesPerCase)
	for k := range out {
		out[k] = fg[r.IntN(len(fg))]
	}
	return out, fg, nil
}
