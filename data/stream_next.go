package data

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Next returns the next batch in sequence order, waiting for it if needed.
// It returns io.EOF after the last epoch of a stream with an end, the
// error that stopped the stream (a sample that failed in on_error: fail,
// a hard timeout), or ctx.Err() when ctx ends first (the batch is then
// still delivered by the following call). The caller owns the batch until
// Release.
func (s *BatchStream) Next(ctx context.Context) (*Batch, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if n := s.ring.heldCount(); n >= len(s.ring.all) {
		return nil, fmt.Errorf("data: %s stream: the consumer holds all %d batch buffers; Release batches before asking for more", s.name, n)
	}
	t0 := time.Now()
	if !s.stats.lastReturn.IsZero() {
		s.stats.stepNanos += int64(t0.Sub(s.stats.lastReturn))
		s.stats.steps++
	}
	var (
		b   *Batch
		err error
	)
	if s.sync {
		b, err = s.nextSync(ctx)
	} else {
		b, err = s.nextAsync(ctx)
	}
	t1 := time.Now()
	s.stats.mu.Lock()
	s.stats.waitNanos += int64(t1.Sub(t0))
	if err == nil {
		if s.stats.delivered == 0 {
			s.stats.firstBatch = t1.Sub(s.stats.started)
		}
		s.stats.delivered++
	}
	s.stats.mu.Unlock()
	prev := s.stats.lastReturn
	s.stats.lastReturn = t1
	if err == nil && s.auto {
		if !s.stats.tuned {
			s.autotune()
		} else if !prev.IsZero() {
			s.watchStarvation(t1.Sub(t0), t1.Sub(prev))
		}
	}
	return b, err
}

func (s *BatchStream) nextAsync(ctx context.Context) (*Batch, error) {
	if err := s.failure(); err != nil {
		return nil, err
	}
	b := s.pending
	if b == nil {
		var ok bool
		select {
		case b, ok = <-s.order:
			if !ok {
				if err := s.failure(); err != nil {
					return nil, err
				}
				return nil, io.EOF
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.failed:
			return nil, s.failErr
		}
		s.pending = b
	}
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.failed:
		return nil, s.failErr
	}
	s.pending = nil
	// Count down before giving the token back, so the instrumented count
	// never runs ahead of the tokens.
	s.trackInFlight(-1)
	<-s.inflight
	if err := b.takeErr(); err != nil {
		s.fail(err)
		return nil, err
	}
	s.ring.deliver(b)
	return b, nil
}

// nextSync makes the next batch on the caller's goroutine (0 workers).
func (s *BatchStream) nextSync(ctx context.Context) (*Batch, error) {
	if err := s.failure(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.epochs > 0 && s.syncEpoch >= s.startEpoch+s.epochs {
		return nil, io.EOF
	}
	if !s.syncLoaded {
		s.syncBuf = s.sampler.Epoch(s.samplerEpoch(s.syncEpoch), s.syncBuf)
		s.syncLoaded = true
	}
	b := <-s.ring.free // one is free: Next checked that the consumer does not hold all
	s.fill(b, s.syncEpoch, s.syncStep, s.syncBuf, s.syncSeq)
	s.syncSeq++
	for i := 0; i < b.N; i++ {
		if err := s.makeSample(s.syncW, b, i); err != nil {
			s.ring.free <- b
			s.fail(err)
			return nil, err
		}
		if err := s.failure(); err != nil { // hard timeout tripped meanwhile
			s.ring.free <- b
			return nil, err
		}
	}
	s.syncStep++
	if s.syncStep >= s.sampler.Batches() {
		s.syncStep = 0
		s.syncEpoch++
		s.syncLoaded = false
	}
	b.pending.Store(0)
	s.ring.deliver(b)
	return b, nil
}
