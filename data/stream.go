package data

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// task makes one sample into a batch slot. The patch pipeline implements
// it; tests use fakes.
type task interface {
	// run writes sample smp into img (C×D×H×W) and lbl (D×H×W), drawing
	// all randomness from r, which was seeded from hash(seed, epoch, index).
	run(w *worker, r *rand.Rand, smp Sample, img, lbl []float32) error
	// describe names case c and its files for messages.
	describe(c int) string
}

// streamOptions configures a stream.
type streamOptions struct {
	name    string
	sampler *caseSampler
	task    task
	// salt separates the per-sample random streams of different streams.
	salt uint64
	// startEpoch and startStep position the first batch (resume).
	startEpoch, startStep int
	// epochs is how many epochs to deliver (0: no end).
	epochs int
	// depth is the number of batches that may be dispatched and not yet
	// delivered (workers × prefetch_factor).
	depth int
	// held is how many delivered, unreleased batches the consumer may keep
	// (default 2: one being uploaded, one being filled for the next step).
	held     int
	channels int
	patch    [3]int
	alloc    Allocator
	skip     bool // on_error: skip
	quar     *quarantine
	// auto tunes the pool's active workers from the first batches.
	auto bool
	// sameEveryEpoch seeds samples as if every epoch were epoch 0
	// (validation patches do not change between validations).
	sameEveryEpoch bool
	// unknown is each case's unknown classes (Case.Unknown, by dataset
	// index; nil: none), copied into Batch.Unknown.
	unknown []uint8
}

// BatchStream delivers the batches of one sampler, in sequence order, from the
// shared pool. Batches keep coming across epoch boundaries (the next
// epoch's first batches are prefetched while the consumer finishes the
// current one). Next is for one consumer goroutine.
type BatchStream struct {
	streamOptions
	p    *Pool
	ring *ring

	ctx    context.Context
	cancel context.CancelFunc

	order        chan *Batch   // dispatched batches in sequence order
	inflight     chan struct{} // one token per dispatched, undelivered batch
	dispatchDone chan struct{}
	jobsWG       sync.WaitGroup
	pending      *Batch // taken from order, not yet ready (Next was cancelled)

	failOnce sync.Once
	failed   chan struct{}
	failErr  error

	closeOnce sync.Once
	closed    atomic.Bool

	curInFlight, maxInFlight atomic.Int64

	// Synchronous (0-worker) state.
	sync       bool
	syncW      *worker
	syncEpoch  int
	syncStep   int
	syncSeq    int64
	syncBuf    []Sample
	syncLoaded bool

	seq   int64
	stats streamStats
}

// streamStats is what the consumer side measured.
type streamStats struct {
	mu          sync.Mutex
	delivered   int64
	waitNanos   int64 // time inside Next
	firstBatch  time.Duration
	started     time.Time
	lastReturn  time.Time
	stepNanos   int64 // consumer time between Next calls
	steps       int64
	sampleNanos atomic.Int64 // worker time per sample (for auto)
	sampleCount atomic.Int64
	tuned       bool
	// After tuning: the consumer's wait and wall time over the current
	// window of steps, to add a worker when data runs late.
	winWait, winWall time.Duration
	winSteps         int
}

func newStream(p *Pool, o streamOptions) (*BatchStream, error) {
	if err := o.sampler.Check(); err != nil {
		return nil, fmt.Errorf("%s stream: %w", o.name, err)
	}
	if o.held == 0 {
		o.held = 2
	}
	if o.depth < 1 {
		o.depth = 1
	}
	if o.channels < 1 {
		return nil, fmt.Errorf("%s stream: %d channels", o.name, o.channels)
	}
	for _, n := range o.patch {
		if n < 1 {
			return nil, fmt.Errorf("%s stream: patch %v", o.name, o.patch)
		}
	}
	if o.alloc == nil {
		o.alloc = AlignedAllocator{}
	}
	if o.quar == nil {
		o.quar = newQuarantine(p.log)
	}
	s := &BatchStream{streamOptions: o, p: p, failed: make(chan struct{}), dispatchDone: make(chan struct{})}
	s.sync = len(p.workers) == 0
	count := o.depth + o.held
	if s.sync {
		count = o.held + 1
	}
	r, err := newRing(o.alloc, count, o.sampler.Batch, o.channels, o.patch)
	if err != nil {
		return nil, fmt.Errorf("%s stream: %w", o.name, err)
	}
	s.ring = r
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := p.register(s); err != nil {
		r.close()
		return nil, err
	}
	s.stats.started = time.Now()
	if s.sync {
		s.syncW = p.syncWorker()
		s.syncEpoch, s.syncStep = o.startEpoch, o.startStep
		close(s.dispatchDone)
		return s, nil
	}
	s.order = make(chan *Batch, o.depth)
	s.inflight = make(chan struct{}, o.depth)
	go s.dispatch()
	return s, nil
}

// Name returns the stream's name ("train", "val", ...).
func (s *BatchStream) Name() string { return s.name }

// Depth returns the prefetch depth in batches.
func (s *BatchStream) Depth() int { return s.depth }

// MaxInFlight returns the most batches ever dispatched and not yet
// delivered; it never exceeds Depth.
func (s *BatchStream) MaxInFlight() int { return int(s.maxInFlight.Load()) }

// BatchesPerEpoch returns the number of batches in one epoch.
func (s *BatchStream) BatchesPerEpoch() int { return s.sampler.Batches() }

// samplerEpoch is the epoch the sampler and the samples' seeds see.
func (s *BatchStream) samplerEpoch(e int) int {
	if s.sameEveryEpoch {
		return 0
	}
	return e
}

// fill prepares batch buffer b for batch step of epoch e.
func (s *BatchStream) fill(b *Batch, e, step int, samples []Sample, seq int64) {
	lo, hi := s.sampler.share(step, len(samples))
	b.N = hi - lo
	b.Epoch, b.Step, b.Seq = e, step, seq
	b.LastInEpoch = step == s.sampler.Batches()-1
	b.Samples = append(b.Samples[:0], samples[lo:hi]...)
	// Set per slot once its case is final (makeSample: a skipped case is
	// replaced).
	b.Unknown = b.Unknown[:b.N]
	clear(b.Unknown)
	vox := s.patch[0] * s.patch[1] * s.patch[2]
	b.Image = b.imgBuf[:b.N*s.channels*vox]
	b.Label = b.lblBuf[:b.N*vox]
	b.err = nil
	select { // drop a stale token of a batch abandoned by a failed run
	case <-b.ready:
	default:
	}
	b.pending.Store(int32(b.N))
}

func (s *BatchStream) trackInFlight(d int64) {
	n := s.curInFlight.Add(d)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

// dispatch hands out batches: one ring buffer and one in-flight token per
// batch, then one job per slot, all in sequence order. It runs ahead of
// the consumer by at most depth batches, across epoch boundaries.
func (s *BatchStream) dispatch() {
	defer close(s.dispatchDone)
	defer close(s.order)
	var samples []Sample
	done := s.ctx.Done()
	for e := s.startEpoch; s.epochs == 0 || e < s.startEpoch+s.epochs; e++ {
		samples = s.sampler.Epoch(s.samplerEpoch(e), samples)
		nb := s.sampler.Batches()
		step := 0
		if e == s.startEpoch {
			step = s.startStep
		}
		for ; step < nb; step++ {
			var b *Batch
			select {
			case b = <-s.ring.free:
			case <-done:
				return
			}
			select {
			case s.inflight <- struct{}{}:
			case <-done:
				s.ring.free <- b
				return
			}
			s.trackInFlight(1)
			s.fill(b, e, step, samples, s.seq)
			s.seq++
			s.order <- b // never blocks: order holds at most depth batches
			for i := 0; i < b.N; i++ {
				s.jobsWG.Add(1)
				select {
				case s.p.jobs <- job{s: s, b: b, slot: i}:
				case <-done:
					s.jobsWG.Done()
					return
				}
			}
		}
	}
}

// work makes one slot of b on worker w and signals b when it was the last.
func (s *BatchStream) work(w *worker, b *Batch, slot int) {
	if s.ctx.Err() == nil {
		if err := s.makeSample(w, b, slot); err != nil {
			b.setErr(err)
		}
	}
	if b.pending.Add(-1) == 0 {
		b.ready <- struct{}{}
	}
	w.finishJob(s)
}

// maxReplacements bounds the draws for one sample in skip mode.
const maxReplacements = 100

// makeSample runs the task for one slot; in skip mode a failing case is
// quarantined and replaced by caseSampler.Replacement until one succeeds.
func (s *BatchStream) makeSample(w *worker, b *Batch, slot int) error {
	smp := &b.Samples[slot]
	img, lbl := b.ImageSlot(slot), b.LabelSlot(slot)
	for attempt := 1; ; attempt++ {
		if s.skip && s.quar.has(smp.Case) {
			// A quarantined case fails every time, so skipping it without
			// trying gives the same result as trying it: the replacement
			// sequence is deterministic whatever the timing.
		} else {
			t0 := time.Now()
			w.begin(s, *smp)
			err := s.safeRun(w, *smp, img, lbl)
			w.end()
			if s.auto {
				s.stats.sampleNanos.Add(int64(time.Since(t0)))
				s.stats.sampleCount.Add(1)
			}
			if err == nil {
				w.samples.Add(1)
				if s.unknown != nil {
					b.Unknown[slot] = s.unknown[smp.Case]
				}
				return nil
			}
			if !s.skip {
				return err
			}
			s.quar.add(smp.Case, s.task.describe(smp.Case), err)
		}
		if s.quar.count() >= len(s.sampler.Cases) && s.quar.coversAll(s.sampler.Cases) {
			return fmt.Errorf("data: %s stream: every case is quarantined", s.name)
		}
		if attempt >= maxReplacements {
			return fmt.Errorf("data: %s stream: sample %d of epoch %d: %d replacement cases failed", s.name, smp.Index, smp.Epoch, attempt)
		}
		smp.Case = s.sampler.Replacement(smp.Epoch, smp.Index, attempt)
	}
}

// safeRun turns a panic in the task (augmentation on odd input) into an
// error naming the case.
func (s *BatchStream) safeRun(w *worker, smp Sample, img, lbl []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("data: panic while making sample %d of epoch %d from %s: %v",
				smp.Index, smp.Epoch, s.task.describe(smp.Case), r)
			s.p.log.Debug("data: panic in a sample", "error", err.Error(), "stack", string(debug.Stack()))
		}
	}()
	r := w.rng.reset(s.sampler.Seed, smp.Epoch, smp.Index, s.salt)
	return s.task.run(w, r, smp, img, lbl)
}

// fail stops the stream with err; Next returns it from then on.
func (s *BatchStream) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
		s.cancel()
	})
}

func (s *BatchStream) failure() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
		return nil
	}
}

// Close stops the stream, waits for its samples in progress and frees its
// buffers. Batches the consumer still holds become invalid. A sample that
// is stuck (a read that never returns) is waited for only up to the
// pool's close grace, at once if it is past the hard timeout: its worker
// is then abandoned and replaced, and the stream's buffers stay allocated
// for it (abandon.go). Close always returns.
func (s *BatchStream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		<-s.dispatchDone
		ended := s.p.abandonStream(s, s.p.grace)
		if s.syncW != nil {
			s.p.dropWorker(s.syncW)
		}
		s.p.unregister(s)
		if ended {
			s.ring.close()
		}
	})
	return nil
}

// StreamStats reports the consumer-side view of a stream.
type StreamStats struct {
	// Delivered is the number of batches returned by Next.
	Delivered int64
	// Wait is the total time spent inside Next (the consumer's data wait).
	Wait time.Duration
	// FirstBatch is the time from the stream's start to the first batch.
	FirstBatch time.Duration
	// MaxInFlight is the most batches dispatched and not yet delivered.
	MaxInFlight int
}

// Stats returns the stream's counters so far.
func (s *BatchStream) Stats() StreamStats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return StreamStats{Delivered: s.stats.delivered, Wait: time.Duration(s.stats.waitNanos),
		FirstBatch: s.stats.firstBatch, MaxInFlight: s.MaxInFlight()}
}
