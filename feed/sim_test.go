package feed_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voxtrain/voxtrain/nn"
)

// simDevice emulates a GPU's streams for the Feeder: each stream is a
// goroutine that runs its work in order, really (copies copy, steps read
// their input), and a virtual clock gives every piece of work the start
// and end it would have on a GPU: a task starts when its stream is free,
// the host has issued it and the events it waits for have completed, and
// lasts a set time (copies: bytes / bandwidth; steps: fixed). The host has
// a virtual clock too, advanced when it synchronises. The timeline is
// therefore deterministic whatever the goroutine scheduling, while the
// real execution under -race checks that no buffer is touched by two
// streams at once.
//
// Only the nn.Device methods the Feeder uses are implemented; the rest
// panic (nil embedded interface).
type simDevice struct {
	nn.Device

	bandwidth       float64       // virtual bytes per second of a copy
	fwdDur, bwdDur  time.Duration // virtual duration of a step's halves
	realCopy        time.Duration // real time a copy holds its tensor
	compute         *simStream
	nextID          atomic.Int32
	streams         atomic.Int32
	hostMu          sync.Mutex
	host            time.Duration // the host's virtual clock
	logMu           sync.Mutex
	copies          []span // every copy, in issue order
	steps           []span // every step half
	violations      []string
	checkHostDuring bool
}

// span is one piece of work on the virtual timeline.
type span struct {
	kind       string // "copy", "fwd", "bwd"
	tensor     int    // tensor id written (copy) or read (step: the image)
	seq        int64  // batch (from the data pattern)
	start, end time.Duration
}

func newSim(bandwidth float64, fwd, bwd time.Duration) *simDevice {
	d := &simDevice{bandwidth: bandwidth, fwdDur: fwd, bwdDur: bwd, realCopy: 200 * time.Microsecond, checkHostDuring: true}
	d.compute = d.newStream("compute")
	return d
}

func (d *simDevice) violate(format string, args ...any) {
	d.logMu.Lock()
	d.violations = append(d.violations, fmt.Sprintf(format, args...))
	d.logMu.Unlock()
}

func (d *simDevice) hostNow() time.Duration {
	d.hostMu.Lock()
	defer d.hostMu.Unlock()
	return d.host
}

func (d *simDevice) hostAdvance(t time.Duration) {
	d.hostMu.Lock()
	d.host = max(d.host, t)
	d.hostMu.Unlock()
}

// simTensor is device memory: a host slice plus who is using it.
type simTensor struct {
	shape   nn.Shape
	data    []float32
	id      int
	readers atomic.Int32
	writers atomic.Int32
	freed   atomic.Bool
}

func (t *simTensor) Shape() nn.Shape { return t.shape }

func (d *simDevice) Name() string { return "simulated device (virtual clock)" }
func (d *simDevice) Err() error   { return nil }

func (d *simDevice) Alloc(shape nn.Shape) nn.Tensor {
	return &simTensor{shape: shape.Clone(), data: make([]float32, shape.Len()), id: int(d.nextID.Add(1))}
}

func (d *simDevice) Free(t nn.Tensor) {
	st := t.(*simTensor)
	if st.readers.Load() != 0 || st.writers.Load() != 0 {
		d.violate("tensor %d freed while in use", st.id)
	}
	st.freed.Store(true)
}

func (d *simDevice) ComputeStream() nn.Stream { return d.compute }
func (d *simDevice) NewStream() nn.Stream {
	return d.newStream(fmt.Sprintf("copy %d", d.streams.Add(1)))
}

// simEvent completes when its stream reaches it; at is its virtual time.
type simEvent struct {
	d    *simDevice
	done chan struct{}
	at   time.Duration // set before done is closed
}

// Synchronize waits for the event and moves the host's clock to it.
func (e *simEvent) Synchronize() {
	<-e.done
	e.d.hostAdvance(e.at)
}

// Done: the event has run and, on the virtual clock, the host is past it.
func (e *simEvent) Done() bool {
	select {
	case <-e.done:
		return e.at <= e.d.hostNow()
	default:
		return false
	}
}

// simStream runs tasks in order on a goroutine.
type simStream struct {
	d     *simDevice
	name  string
	mu    sync.Mutex
	queue []simTask
	run   bool
	clock time.Duration // virtual end of the last task (goroutine only)
	idle  *sync.Cond
}

type simTask struct {
	issued time.Duration                           // host clock at issue
	f      func(start time.Duration) time.Duration // runs the task, returns its end
}

func (d *simDevice) newStream(name string) *simStream {
	s := &simStream{d: d, name: name}
	s.idle = sync.NewCond(&s.mu)
	return s
}

func (s *simStream) enqueue(f func(start time.Duration) time.Duration) {
	t := simTask{issued: s.d.hostNow(), f: f}
	s.mu.Lock()
	s.queue = append(s.queue, t)
	if !s.run {
		s.run = true
		go s.loop()
	}
	s.mu.Unlock()
}

func (s *simStream) loop() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.run = false
			s.idle.Broadcast()
			s.mu.Unlock()
			return
		}
		t := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.clock = t.f(max(s.clock, t.issued))
	}
}

func (s *simStream) Record() nn.Event {
	e := &simEvent{d: s.d, done: make(chan struct{})}
	s.enqueue(func(start time.Duration) time.Duration {
		e.at = start
		close(e.done)
		return start
	})
	return e
}

func (s *simStream) Wait(ev nn.Event) {
	e := ev.(*simEvent)
	s.enqueue(func(start time.Duration) time.Duration {
		<-e.done
		return max(start, e.at)
	})
}

func (s *simStream) Synchronize() { s.Record().Synchronize() }

// RecordTimed and Elapsed make the simulated device a feed.Timeline.
func (d *simDevice) RecordTimed(s nn.Stream) nn.Event { return s.Record() }

func (d *simDevice) Elapsed(start, end nn.Event) (time.Duration, error) {
	return end.(*simEvent).at - start.(*simEvent).at, nil
}

// Upload copies src into dst on stream s: really (checking that no step
// reads dst meanwhile and that src does not change under the copy), and
// on the virtual clock for bytes/bandwidth.
func (d *simDevice) Upload(s nn.Stream, dst nn.Tensor, src []float32) error {
	t := dst.(*simTensor)
	if len(src) != len(t.data) {
		return fmt.Errorf("upload: %d floats into %v", len(src), t.shape)
	}
	st := s.(*simStream)
	st.enqueue(func(start time.Duration) time.Duration {
		if t.freed.Load() {
			d.violate("copy into freed tensor %d", t.id)
		}
		if t.readers.Load() != 0 {
			d.violate("copy into tensor %d while a step reads it", t.id)
		}
		t.writers.Add(1)
		before := checksum(src)
		copy(t.data, src)
		time.Sleep(d.realCopy)
		if d.checkHostDuring && checksum(src) != before {
			d.violate("host buffer changed during its copy into tensor %d", t.id)
		}
		t.writers.Add(-1)
		end := start + time.Duration(float64(4*len(src))/d.bandwidth*float64(time.Second))
		d.logMu.Lock()
		d.copies = append(d.copies, span{"copy", t.id, int64(math.Round(float64(src[0]))), start, end})
		d.logMu.Unlock()
		return end
	})
	return nil
}

func checksum(x []float32) float64 {
	var s float64
	for i, v := range x {
		s += float64(v) * float64(i%7+1)
	}
	return s
}

// stepHalf enqueues one half of a training step on the compute stream: it
// reads x and y (which must hold batch seq's pattern, before and after a
// real pause) for the virtual duration of that half.
func (d *simDevice) stepHalf(kind string, x, y nn.Tensor, seq int64) {
	xt, yt := x.(*simTensor), y.(*simTensor)
	dur := d.fwdDur
	if kind == "bwd" {
		dur = d.bwdDur
	}
	d.compute.enqueue(func(start time.Duration) time.Duration {
		for _, t := range []*simTensor{xt, yt} {
			if t.writers.Load() != 0 {
				d.violate("step %d (%s) reads tensor %d while a copy writes it", seq, kind, t.id)
			}
			t.readers.Add(1)
		}
		check := func(when string) {
			if !holds(xt.data, seq, 0) || !holds(yt.data, seq, 1) {
				d.violate("step %d (%s) %s: its input does not hold batch %d (image[0] = %v, label[0] = %v)", seq, kind, when, seq, xt.data[0], yt.data[0])
			}
		}
		check("at start")
		time.Sleep(100 * time.Microsecond)
		check("at end")
		for _, t := range []*simTensor{xt, yt} {
			t.readers.Add(-1)
		}
		d.logMu.Lock()
		d.steps = append(d.steps, span{kind, xt.id, seq, start, start + dur})
		d.logMu.Unlock()
		return start + dur
	})
}

// pattern is the value every element of batch seq holds: image (part 0)
// seq, label (part 1) seq + 0.25 — so a stale or half-written buffer shows.
func pattern(seq int64, part int) float32 { return float32(seq) + 0.25*float32(part) }

func holds(x []float32, seq int64, part int) bool {
	want := pattern(seq, part)
	for _, v := range x {
		if v != want {
			return false
		}
	}
	return true
}
