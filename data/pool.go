package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// errClosed is returned by a closed pool or stream.
var errClosed = errors.New("data: closed")

// Pool is a set of worker goroutines started once and kept for the whole
// run. Every stream (training, validation) and every whole-case read
// shares it: there is no per-epoch start-up and nothing to copy between
// processes. Jobs are taken first come, first served, in the order the
// streams dispatch them, so the oldest batch is always finished first.
type Pool struct {
	jobs    chan job
	workers []*worker
	log     *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond // signals a change of active or closed
	active  int        // workers with id ≥ active park (workers: auto)
	closed  bool       // set first thing in Close: no new streams or jobs
	sendMu  sync.RWMutex
	chClose bool // jobs is closed (guarded by sendMu)
	streams map[*BatchStream]struct{}
	extra   []*worker // per-stream workers of synchronous (0-worker) streams

	wg       sync.WaitGroup
	watchdog time.Duration
	hard     time.Duration
	grace    time.Duration // see abandon.go
	wdStop   chan struct{}
	wdDone   chan struct{}

	busy    atomic.Int32 // samples being made right now
	maxBusy atomic.Int32
}

// poolOptions configures a Pool. The zero value is usable.
type poolOptions struct {
	// Logger receives watchdog and quarantine reports (default
	// slog.Default()).
	Logger *slog.Logger
	// Watchdog reports a sample running longer than this (0: off;
	// data.watchdog_timeout, 120s by default, in a run).
	Watchdog time.Duration
	// HardTimeout fails the sample's stream when one sample runs longer
	// (0: off).
	HardTimeout time.Duration
	// CloseGrace is how long closing waits for samples in progress before
	// abandoning their workers (0: defaultCloseGrace; see abandon.go).
	CloseGrace time.Duration
}

// job is one unit of work: a batch slot of a stream, or a function.
type job struct {
	s    *BatchStream
	b    *Batch
	slot int
	fn   func(*worker)
}

// newPool starts n worker goroutines (n = 0: streams make their samples
// inside Next, on the caller's goroutine).
func newPool(n int, opt poolOptions) *Pool {
	if n < 0 {
		n = 0
	}
	p := &Pool{
		jobs:     make(chan job, n),
		log:      opt.Logger,
		active:   n,
		streams:  map[*BatchStream]struct{}{},
		watchdog: opt.Watchdog,
		hard:     opt.HardTimeout,
		grace:    opt.CloseGrace,
		wdStop:   make(chan struct{}),
		wdDone:   make(chan struct{}),
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.grace <= 0 {
		p.grace = defaultCloseGrace
	}
	p.cond = sync.NewCond(&p.mu)
	for i := 0; i < n; i++ {
		w := newWorker(i, p)
		p.workers = append(p.workers, w)
		p.wg.Add(1)
		go w.loop()
	}
	go p.watch()
	return p
}

// Workers returns the number of worker goroutines.
func (p *Pool) Workers() int { return len(p.workers) }

// Active returns how many workers take jobs (fewer than Workers after
// auto-tuning).
func (p *Pool) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// SetActive parks all but n workers (1 ≤ n ≤ Workers). Output does not
// depend on it: a sample's bytes depend only on its seed.
func (p *Pool) SetActive(n int) {
	p.mu.Lock()
	p.active = max(1, min(n, len(p.workers)))
	p.cond.Broadcast()
	p.mu.Unlock()
}

// MaxBusy returns the most samples ever made at once (≤ Workers).
func (p *Pool) MaxBusy() int { return int(p.maxBusy.Load()) }

// do runs fn on a worker and waits for it (on the caller's goroutine for
// a 0-worker pool). Whole-case reads for validation use it, so they share
// the pool and the cache with training.
func (p *Pool) do(ctx context.Context, fn func(w *worker) error) error {
	if len(p.workers) == 0 {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return errClosed
		}
		w := p.syncWorker()
		defer p.dropWorker(w)
		return fn(w)
	}
	done := make(chan error, 1)
	var ranOn atomic.Pointer[worker]
	j := job{fn: func(w *worker) { ranOn.Store(w); done <- fn(w) }}
	// The read lock keeps Close from closing jobs under a send.
	p.sendMu.RLock()
	if p.chClose {
		p.sendMu.RUnlock()
		return errClosed
	}
	select {
	case p.jobs <- j:
		p.sendMu.RUnlock()
	case <-ctx.Done():
		p.sendMu.RUnlock()
		return ctx.Err()
	}
	// The function runs to completion even if ctx ends: it may be writing
	// into memory the caller owns. Wait for it — but once ctx has ended,
	// only for the close grace: a read that never returns must not keep
	// the run from stopping (abandon.go). The caller is ending then, and
	// its memory is Go memory, safe from a late write.
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(p.grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		p.abandon(ranOn.Load(), "a whole-case read still running "+p.grace.String()+" after it was cancelled")
		return fmt.Errorf("data: a read did not return within %v of being cancelled (abandoned): %w", p.grace, ctx.Err())
	}
}

// Close stops the workers after closing every stream still open. It waits
// for samples in progress to finish, up to the close grace; workers stuck
// longer are abandoned (abandon.go).
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true // from here register refuses new streams
	streams := make([]*BatchStream, 0, len(p.streams))
	for s := range p.streams {
		streams = append(streams, s)
	}
	p.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
	p.sendMu.Lock()
	p.chClose = true
	close(p.jobs)
	p.sendMu.Unlock()
	p.mu.Lock()
	p.cond.Broadcast() // parked workers wake, find jobs closed and exit
	p.mu.Unlock()
	if !waitTimeout(&p.wg, p.grace) {
		p.mu.Lock()
		ws := append([]*worker(nil), p.workers...)
		p.mu.Unlock()
		for _, w := range ws {
			if w.job.Load() != nil || w.fnBusy.Load() {
				p.abandon(w, "still running "+p.grace.String()+" after the pool closed")
			}
		}
		// Workers not abandoned are between jobs and exit at once.
		p.wg.Wait()
	}
	close(p.wdStop)
	<-p.wdDone
	return nil
}

func (p *Pool) register(s *BatchStream) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errClosed
	}
	p.streams[s] = struct{}{}
	return nil
}

func (p *Pool) unregister(s *BatchStream) {
	p.mu.Lock()
	delete(p.streams, s)
	p.mu.Unlock()
}

// syncWorker makes a worker for a synchronous stream and lets the
// watchdog see it.
func (p *Pool) syncWorker() *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := newWorker(-1, p)
	p.extra = append(p.extra, w)
	return w
}

func (p *Pool) dropWorker(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.extra {
		if x == w {
			p.extra = append(p.extra[:i], p.extra[i+1:]...)
			return
		}
	}
}

// park blocks worker id while it is beyond the active count (until the
// pool closes).
func (p *Pool) park(id int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id >= p.active && !p.closed {
		p.cond.Wait()
	}
}

// watch is the watchdog: it reports every sample that has run longer than
// the timeout (again at each further multiple of it) with the worker, the
// file and the elapsed time, and fails the stream past the hard timeout.
func (p *Pool) watch() {
	defer close(p.wdDone)
	if p.watchdog <= 0 && p.hard <= 0 {
		<-p.wdStop
		return
	}
	tick := time.Second
	for _, d := range []time.Duration{p.watchdog, p.hard} {
		if d > 0 && d/4 < tick {
			tick = max(d/4, time.Millisecond)
		}
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.wdStop:
			return
		case now := <-t.C:
			p.mu.Lock()
			ws := append(append([]*worker(nil), p.workers...), p.extra...)
			p.mu.Unlock()
			for _, w := range ws {
				p.inspect(w, now)
			}
		}
	}
}

func (p *Pool) inspect(w *worker, now time.Time) {
	w.mu.Lock()
	if !w.cur.active {
		w.mu.Unlock()
		return
	}
	c := &w.cur
	el := now.Sub(c.start)
	var report, trip bool
	if p.watchdog > 0 && el >= time.Duration(c.reported+1)*p.watchdog {
		c.reported++
		report = true
	}
	if p.hard > 0 && el >= p.hard && !c.tripped {
		c.tripped = true
		trip = true
	}
	s, smp := c.s, c.smp
	w.mu.Unlock()
	if !report && !trip {
		return
	}
	what := s.task.describe(smp.Case)
	if report {
		p.log.Warn("data: slow sample", "worker", w.id, "stream", s.name, "epoch", smp.Epoch,
			"index", smp.Index, "case", what, "elapsed", el.Round(time.Millisecond).String())
	}
	if trip {
		s.fail(fmt.Errorf("data: %s stream: sample %d of epoch %d (%s) on worker %d exceeded the hard timeout %v",
			s.name, smp.Index, smp.Epoch, what, w.id, p.hard))
	}
}

// Stage indices for per-stage timing.
const (
	stageRead    = iota // read + decompress (or cache / store fetch)
	stagePlan           // crop placement and augmentation draws
	stageAugment        // sampling the patch, with augmentation, into the slot
	stageCopy           // extra copies into the slot (0 when written in place)
	numStages
)

// StageNames name the stages in reports.
var StageNames = [numStages]string{"read+decompress", "crop plan", "crop+augment", "batch copy"}

// StageTimes sums the time workers spent in each stage and the number of
// samples made.
type StageTimes struct {
	Total   [numStages]time.Duration
	Samples int64
}

// StageTimes returns the per-stage totals over all workers so far.
func (p *Pool) StageTimes() StageTimes {
	var st StageTimes
	p.mu.Lock()
	ws := append(append([]*worker(nil), p.workers...), p.extra...)
	p.mu.Unlock()
	for _, w := range ws {
		for i := range st.Total {
			st.Total[i] += time.Duration(w.stage[i].Load())
		}
		st.Samples += w.samples.Load()
	}
	return st
}

// ResetStageTimes zeroes the per-stage totals.
func (p *Pool) ResetStageTimes() {
	p.mu.Lock()
	ws := append(append([]*worker(nil), p.workers...), p.extra...)
	p.mu.Unlock()
	for _, w := range ws {
		for i := range w.stage {
			w.stage[i].Store(0)
		}
		w.samples.Store(0)
	}
}

// worker is one pool goroutine (or the consumer's stand-in in a 0-worker
// pool) with everything it reuses from sample to sample.
type worker struct {
	id int
	p  *Pool
	// rng is reseeded for every sample from hash(seed, epoch, index).
	rng *sampleRNG
	// pipe holds the patch pipeline's scratch, made on first use.
	pipe *pipeScratch

	stage   [numStages]atomic.Int64 // nanoseconds
	samples atomic.Int64

	// job is the stream whose sample the worker runs, fnBusy whether it
	// runs a function job (Pool.do): what abandoning looks at.
	job      atomic.Pointer[BatchStream]
	jobState atomic.Int32 // jobRunning, jobFinished, jobDetached
	fnBusy   atomic.Bool
	// abandoned is set when the pool gave up on the worker (abandon.go);
	// exitOnce makes its WaitGroup Done happen once, whether at
	// abandonment or when it exits.
	abandoned atomic.Bool
	exitOnce  sync.Once

	mu  sync.Mutex
	cur current // what the worker is doing, for the watchdog
}

type current struct {
	active   bool
	s        *BatchStream
	smp      Sample
	start    time.Time
	reported int
	tripped  bool
}

func newWorker(id int, p *Pool) *worker {
	return &worker{id: id, p: p, rng: newSampleRNG()}
}

func (w *worker) loop() {
	defer w.exit()
	for {
		w.p.park(w.id)
		j, ok := <-w.p.jobs
		if !ok {
			return
		}
		if j.fn != nil {
			w.fnBusy.Store(true)
			j.fn(w)
			w.fnBusy.Store(false)
		} else {
			w.jobState.Store(jobRunning)
			w.job.Store(j.s)
			j.s.work(w, j.b, j.slot)
			w.job.Store(nil)
		}
		if w.abandoned.Load() {
			return // a new worker has taken this one's place
		}
	}
}

// exit tells the pool the worker is done (once).
func (w *worker) exit() { w.exitOnce.Do(w.p.wg.Done) }

// begin and end bracket one sample for the watchdog.
func (w *worker) begin(s *BatchStream, smp Sample) {
	n := w.p.busy.Add(1)
	for {
		m := w.p.maxBusy.Load()
		if n <= m || w.p.maxBusy.CompareAndSwap(m, n) {
			break
		}
	}
	w.mu.Lock()
	w.cur = current{active: true, s: s, smp: smp, start: time.Now()}
	w.mu.Unlock()
}

func (w *worker) end() {
	w.mu.Lock()
	w.cur.active = false
	w.cur.s = nil
	w.mu.Unlock()
	w.p.busy.Add(-1)
}

// addStage records time spent in a stage.
func (w *worker) addStage(i int, d time.Duration) { w.stage[i].Add(int64(d)) }
