package data

import (
	"sync"
	"time"
)

// A sample whose read never returns — a FIFO given as an image, a hung
// NFS or FUSE mount — holds its worker goroutine for good: Go cannot stop
// a goroutine blocked in a system call. Waiting for it would make Close,
// and with it the end of the run and every signal handler that closes the
// data, hang too. So Close waits for samples in progress only so long
// (closeGrace, or not at all for a sample past the hard timeout), then
// abandons the workers still busy with the stream: a fresh worker takes
// each one's place in the pool, the stuck one exits if it ever returns,
// and the stream's batch buffers are left allocated (never freed or
// reused) because a returning worker still writes into its slot.

// defaultCloseGrace is how long Close waits for samples in progress
// before abandoning them: far longer than any sample takes, shorter than a
// scheduler's grace after SIGTERM (SLURM's KillWait is 30 s).
const defaultCloseGrace = 10 * time.Second

// A worker's stream job is running until the job or an abandonment
// settles it (worker.jobState), whichever comes first.
const (
	jobRunning  int32 = iota
	jobFinished       // the job ended and counted itself done
	jobDetached       // the job was abandoned and counted done for it
)

// finishJob counts w's job of s done unless it was abandoned (and counted)
// already.
func (w *worker) finishJob(s *BatchStream) {
	if w.jobState.CompareAndSwap(jobRunning, jobFinished) {
		s.jobsWG.Done()
	}
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait() // outlives a timeout until the stuck work ends
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// abandon gives up on worker w, stuck in what it runs: it no longer
// counts for Close, a new worker with its id takes its place in the pool
// (unless the pool is closing), and w exits if its work ever returns.
// A synchronous stream's stand-in (id < 0) runs on the consumer's own
// goroutine and is not replaced. It reports whether w was abandoned now.
func (p *Pool) abandon(w *worker, why string) bool {
	if w == nil || w.id < 0 || !w.abandoned.CompareAndSwap(false, true) {
		return false
	}
	p.mu.Lock()
	for i, x := range p.workers {
		if x == w {
			if p.closed {
				p.workers = append(p.workers[:i:i], p.workers[i+1:]...)
			} else {
				nw := newWorker(w.id, p)
				p.workers[i] = nw
				p.wg.Add(1) // before w's Done below: the count never passes through zero
				go nw.loop()
			}
			break
		}
	}
	p.mu.Unlock()
	w.mu.Lock()
	what, el := "", time.Duration(0)
	if w.cur.active {
		what, el = w.cur.s.task.describe(w.cur.smp.Case), time.Since(w.cur.start).Round(time.Millisecond)
	}
	w.mu.Unlock()
	// The stuck job no longer counts for its stream's Close: done on its
	// behalf here, or by the job itself if it just finished (jobState
	// decides which, once).
	if s := w.job.Load(); s != nil && w.jobState.CompareAndSwap(jobRunning, jobDetached) {
		s.jobsWG.Done()
	}
	p.log.Error("data: abandoning a stuck worker: its read never returned; a new worker takes its place",
		"worker", w.id, "reason", why, "case", what, "elapsed", el.String())
	w.exit()
	return true
}

// abandonStream abandons every worker busy with a sample of s: each one
// as soon as its sample is past the hard timeout, and the rest once grace
// has passed; it reports whether none was abandoned (so s's buffers may
// be freed). With a hard timeout, no sample holds Close longer than its
// own hard timeout, even if it started just before Close did.
func (p *Pool) abandonStream(s *BatchStream, grace time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.jobsWG.Wait() // outlives the return until the stuck work ends
		close(done)
	}()
	gaveUp := false
	deadline := time.Now().Add(grace)
	for {
		now := time.Now()
		next := deadline // when to look again: grace's end or a sample's hard timeout
		for _, w := range p.busyWith(s) {
			w.mu.Lock()
			active, tripped, start := w.cur.active, w.cur.tripped, w.cur.start
			w.mu.Unlock()
			if !active {
				continue
			}
			if p.hard > 0 && !tripped {
				if at := start.Add(p.hard); at.After(now) {
					next = minTime(next, at)
					continue
				}
				tripped = true
			}
			if tripped && p.abandon(w, "past the hard timeout") {
				gaveUp = true
			}
		}
		if !now.Before(deadline) {
			break
		}
		t := time.NewTimer(max(next.Sub(now), time.Millisecond))
		select {
		case <-done:
			t.Stop()
			return !gaveUp
		case <-t.C:
		}
	}
	select {
	case <-done:
		return !gaveUp
	default:
	}
	for _, w := range p.busyWith(s) {
		p.abandon(w, "still running "+grace.String()+" after its stream closed")
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// busyWith returns the pool's workers running a job of s.
func (p *Pool) busyWith(s *BatchStream) []*worker {
	p.mu.Lock()
	ws := append([]*worker(nil), p.workers...)
	p.mu.Unlock()
	var out []*worker
	for _, w := range ws {
		if w.job.Load() == s {
			out = append(out, w)
		}
	}
	return out
}
