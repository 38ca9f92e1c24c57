package cpu

import (
	"fmt"
	"sync"

	"github.com/voxtrain/voxtrain/nn"
)

// event is a CPU event: a channel closed when the stream reaches it.
// Closing a channel happens before a receive that observes the close, so
// everything a stream wrote before the event is visible (to the race
// detector too) after Synchronize or a stream's Wait.
type event struct{ done chan struct{} }

func newEvent() *event { return &event{done: make(chan struct{})} }

// completedEvent is an event that has already happened.
func completedEvent() *event {
	e := newEvent()
	close(e.done)
	return e
}

// Synchronize blocks until the event has completed.
func (e *event) Synchronize() { <-e.done }

// Done reports whether the event has completed.
func (e *event) Done() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func toEvent(e nn.Event) *event {
	ce, ok := e.(*event)
	if !ok {
		panic(fmt.Sprintf("cpu: event of type %T does not belong to the CPU device", e))
	}
	return ce
}

// syncStream is the compute stream: work runs on the caller's goroutine
// when it is enqueued, so everything enqueued earlier has finished.
type syncStream struct{}

// Record returns a completed event: all earlier work has already run.
func (*syncStream) Record() nn.Event { return completedEvent() }

// Wait blocks the caller until e completes, so later work starts after it.
func (*syncStream) Wait(e nn.Event) { toEvent(e).Synchronize() }

// Synchronize returns at once: the stream never has pending work.
func (*syncStream) Synchronize() {}

// asyncStream runs its work in FIFO order on one goroutine, started when
// work arrives on an idle stream and ending when the queue empties (so an
// abandoned stream leaks nothing).
type asyncStream struct {
	mu      sync.Mutex
	queue   []func()
	running bool
}

func (s *asyncStream) enqueue(f func()) {
	s.mu.Lock()
	s.queue = append(s.queue, f)
	if !s.running {
		s.running = true
		go s.drain()
	}
	s.mu.Unlock()
}

func (s *asyncStream) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.queue = nil
			s.mu.Unlock()
			return
		}
		f := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		f()
	}
}

// Record enqueues the completion of a new event.
func (s *asyncStream) Record() nn.Event {
	e := newEvent()
	s.enqueue(func() { close(e.done) })
	return e
}

// Wait enqueues a wait for e; the caller does not block.
func (s *asyncStream) Wait(e nn.Event) {
	ce := toEvent(e)
	s.enqueue(func() { <-ce.done })
}

// Synchronize blocks until all work enqueued so far has run.
func (s *asyncStream) Synchronize() { s.Record().Synchronize() }

// enqueue runs f on stream s: now on the compute stream, queued on an
// asynchronous one.
func enqueue(s nn.Stream, f func()) error {
	switch cs := s.(type) {
	case *syncStream:
		f()
	case *asyncStream:
		cs.enqueue(f)
	default:
		return fmt.Errorf("cpu: stream of type %T does not belong to the CPU device", s)
	}
	return nil
}
