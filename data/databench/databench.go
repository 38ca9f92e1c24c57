// Package databench measures the data pipeline alone, with no model: the
// engine behind `train bench-data`. It opens a config's dataset as
// training does (data.Setup, then data.Open per worker count) and reports
// samples/s, first batch, epoch-boundary gaps, per-stage times, the
// consumer's wait, CPU time, peak RSS and, optionally, a digest of every
// batch byte to check determinism across worker counts and sources.
package databench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/floatbytes"
	"github.com/voxtrain/voxtrain/internal/procstat"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/internal/inflate"
)

// Options configures a benchmark run.
type Options struct {
	// Workers lists the worker counts to sweep (nil: the config's); -1
	// means "auto" (the pool tunes itself during the first steps).
	Workers []int
	// ConsumerMs simulates a training step of this many milliseconds per
	// batch (a sleep: the GPU's time, no CPU), after each batch arrives.
	ConsumerMs float64
	// Digest hashes every batch byte (SHA-256). The hashing runs inside
	// the simulated step when ConsumerMs is set (the step still lasts
	// ConsumerMs), else between batches, where it costs consumer time.
	Digest bool
	// Source overrides data.source ("gz", "cache" or "store").
	Source string
	// Epochs to run (default 2); Iterations overrides batches per epoch.
	Epochs, Iterations int
	// Repeats runs the whole sweep this many times (alternating worker
	// counts), reporting the median (default 1).
	Repeats int
	// Logger receives the pipeline's own reports.
	Logger *slog.Logger
}

// Result is one configuration's measurement.
type Result struct {
	// Workers is the configured count (-1: auto); Active the count in use
	// at the end (what auto settled on).
	Workers int
	Active  int
	Source  string
	Repeat  int
	// Samples delivered; SamplesPerSec over all but the first batch (from
	// its arrival to the last arrival), as the PyTorch reference counts.
	Samples       int
	SamplesPerSec float64
	// SteadyPerSec is the rate over epochs after the first (the memory
	// cache is warm then).
	SteadyPerSec float64
	// Open is Open's duration; FirstBatch the time from before Open to the
	// first batch.
	Open, FirstBatch time.Duration
	// EpochTimes from each epoch's first Next call to its last batch.
	EpochTimes []time.Duration
	// Gaps are the epoch-boundary gaps (last batch of an epoch to the
	// first of the next); Interval the median gap between batches within
	// epochs. Restart cost = gap − interval.
	Gaps     []time.Duration
	Interval time.Duration
	// Wall is the consumer's wall time from the first Next to the last
	// batch; Wait the time it spent inside Next; FirstWait the part of it
	// spent waiting for the first batch (start-up, not starvation).
	Wall, Wait, FirstWait time.Duration
	// Stage holds mean per-sample time in each pipeline stage (summed over
	// workers, so it is CPU-ish time, not latency).
	Stage [len(data.StageNames)]time.Duration
	// PeakRSS is the process's resident-set high-water mark during this
	// configuration (bytes; Linux resets it per configuration).
	PeakRSS int64
	// CPU is the process's user+system CPU time over the run (Open to the
	// last batch): a measure of the work per sample that other load on
	// the machine disturbs far less than wall-clock rates.
	CPU time.Duration
	// Digest is the SHA-256 of every batch byte, in order.
	Digest string
	Cache  data.CacheStats
}

// WaitFraction is the share of wall time the consumer waited for data.
func (r *Result) WaitFraction() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Wait) / float64(r.Wall)
}

// SteadyWaitFraction is WaitFraction after the first batch arrived.
func (r *Result) SteadyWaitFraction() float64 {
	if r.Wall-r.FirstWait <= 0 {
		return 0
	}
	return float64(r.Wait-r.FirstWait) / float64(r.Wall-r.FirstWait)
}

// Run benchmarks the pipeline of cfg (its data, augment and train
// sections and seed) for every worker count. The dataset is set up first
// (data.Setup: splits, ct statistics, the prepared store when the source
// reads it), outside the measurement.
func Run(ctx context.Context, cfg *config.Config, o Options) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Epochs <= 0 {
		o.Epochs = 2
	}
	if o.Repeats <= 0 {
		o.Repeats = 1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ws := o.Workers
	if len(ws) == 0 {
		ws = []int{cfg.Data.WorkerCount()}
	}
	dc := cfg.Data
	if o.Source != "" {
		dc.Source = o.Source
	}
	dc, err := data.Setup(ctx, dc, data.SetupOptions{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	var out []Result
	for rep := 0; rep < o.Repeats; rep++ {
		for _, w := range ws {
			r, err := runOne(ctx, cfg, dc, o, w)
			if err != nil {
				return out, fmt.Errorf("workers %d: %w", w, err)
			}
			r.Repeat = rep
			out = append(out, *r)
		}
	}
	return out, nil
}

// runOne measures one worker count over dc, cfg's data section after
// Setup.
func runOne(ctx context.Context, cfg *config.Config, dc config.Data, o Options, workers int) (*Result, error) {
	dc.Workers = config.Workers{N: workers, Set: true}
	if workers < 0 {
		dc.Workers = config.Workers{Auto: true, Set: true}
	}
	runtime.GC()
	debug.FreeOSMemory()
	procstat.ResetPeakRSS()

	cpu0 := procstat.CPUTime()
	t0 := time.Now()
	l, err := data.Open(dc, data.Options{Seed: cfg.Seed, Iterations: cfg.Train.IterationsPerEpoch,
		Patch: cfg.Train.PatchSize, Batch: cfg.Train.BatchSize, Augment: cfg.Augment, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	res := &Result{Workers: workers, Source: l.Source, Open: time.Since(t0)}
	s, err := l.Train(data.StreamOptions{Epochs: o.Epochs, Iterations: o.Iterations})
	if err != nil {
		return nil, err
	}
	var h hash.Hash
	if o.Digest {
		h = sha256.New()
	}
	step := time.Duration(o.ConsumerMs * float64(time.Millisecond))
	var arrivals []time.Time
	var epochOf []int
	var epochStart []time.Time
	curEpoch := -1
	first := true
	var wallStart time.Time
	for {
		tw := time.Now()
		if first {
			wallStart = tw
		}
		b, err := s.Next(ctx)
		ta := time.Now()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		res.Wait += ta.Sub(tw)
		if first {
			res.FirstBatch = ta.Sub(t0)
			res.FirstWait = ta.Sub(tw)
			first = false
		}
		if b.Epoch != curEpoch {
			epochStart = append(epochStart, tw)
			curEpoch = b.Epoch
		}
		arrivals = append(arrivals, ta)
		epochOf = append(epochOf, b.Epoch)
		res.Samples += b.N
		if h != nil {
			h.Write(floatbytes.Bytes(b.Image))
			h.Write(floatbytes.Bytes(b.Label))
		}
		if step > 0 {
			if rest := step - time.Since(ta); rest > 0 {
				time.Sleep(rest)
			}
		}
		b.Release()
	}
	res.Wall = arrivals[len(arrivals)-1].Sub(wallStart)
	res.CPU = procstat.CPUTime() - cpu0
	if h != nil {
		res.Digest = hex.EncodeToString(h.Sum(nil))
	}
	n := len(arrivals)
	bs := cfg.Train.BatchSize
	if n > 1 {
		res.SamplesPerSec = float64(res.Samples-bs) / arrivals[n-1].Sub(arrivals[0]).Seconds()
	}
	var within []time.Duration
	firstOfEpoch1 := -1
	for i := 1; i < n; i++ {
		d := arrivals[i].Sub(arrivals[i-1])
		if epochOf[i] != epochOf[i-1] {
			res.Gaps = append(res.Gaps, d)
			if firstOfEpoch1 < 0 {
				firstOfEpoch1 = i
			}
		} else {
			within = append(within, d)
		}
	}
	if firstOfEpoch1 > 0 && n-firstOfEpoch1 > 1 {
		// From the end of epoch 0 to the end: every later batch.
		res.SteadyPerSec = float64((n-firstOfEpoch1)*bs) / arrivals[n-1].Sub(arrivals[firstOfEpoch1-1]).Seconds()
	}
	if len(within) > 0 {
		slices.Sort(within)
		res.Interval = within[len(within)/2]
	}
	for e := range epochStart {
		last := arrivals[n-1]
		for i := n - 1; i >= 0; i-- {
			if epochOf[i] == epochOf[0]+e {
				last = arrivals[i]
				break
			}
		}
		res.EpochTimes = append(res.EpochTimes, last.Sub(epochStart[e]))
	}
	st := l.Pool().StageTimes() // before Close: a 0-worker stream's worker goes with it
	s.Close()
	if st.Samples > 0 {
		for i := range res.Stage {
			res.Stage[i] = st.Total[i] / time.Duration(st.Samples)
		}
	}
	res.Cache = l.CacheStats()
	res.Active = l.Pool().Active()
	res.PeakRSS = procstat.PeakRSS()
	return res, nil
}

// InflateBound measures the inflate-bound limit of a `.nii.gz` pipeline on
// this machine: the median time to inflate one case's image and label
// files (internal/inflate, the gzip decoder the NIfTI reader uses, into
// io.Discard, files in the page cache), and cores × 1000 / that.
func InflateBound(cfg *config.Config) (msPerCase float64, limit float64, err error) {
	ds, err := data.OpenDataset(cfg.Data)
	if err != nil {
		return 0, 0, err
	}
	var times []float64
	zr := new(inflate.Reader)
	for _, c := range ds.Cases {
		var raws [][]byte
		var names []string
		for _, p := range c.Files() {
			if !strings.HasSuffix(p, ".gz") {
				continue
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return 0, 0, err
			}
			raws, names = append(raws, raw), append(names, p)
		}
		best := 0.0
		for rep := 0; rep < 2; rep++ {
			t0 := time.Now()
			for i, raw := range raws {
				p := names[i]
				if err := zr.Reset(raw); err != nil {
					return 0, 0, fmt.Errorf("inflate %s: %w", p, err)
				}
				if _, err := zr.WriteTo(io.Discard); err != nil {
					return 0, 0, fmt.Errorf("inflate %s: %w", p, err)
				}
			}
			ms := float64(time.Since(t0)) / 1e6
			if rep == 0 || ms < best {
				best = ms
			}
		}
		times = append(times, best)
	}
	if len(times) == 0 {
		return 0, 0, fmt.Errorf("no cases")
	}
	slices.Sort(times)
	msPerCase = times[len(times)/2]
	return msPerCase, float64(runtime.NumCPU()) * 1000 / msPerCase, nil
}
