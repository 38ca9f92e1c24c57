// Package feed moves training batches from host memory to a compute
// device so that the copy of batch i+1 runs while the device computes step
// i: a copy stream, two device input buffers (double buffering) and the
// events that order them. It is written against nn.Device only, so the
// trainer uses the same code on the CPU and CUDA devices.
//
// One step of the trainer, with f a Feeder and ring batches from package
// data (pinned host memory on CUDA):
//
//	next, _ := f.Upload(b)         // batch i+1: queued until step i starts
//	x, y := f.Acquire(cur)         // compute waits for "copied(i)", records "start(i)";
//	                               // copy stream: wait start(i) and "free" of i+1's slot, H2D, record "copied(i+1)"
//	learner.Step(x, y, lr)         // compute stream
//	f.Done(cur)                    // compute stream: record "free" of slot i
//	f.Reap()                       // host: release the ring buffers whose copies completed
//	cur = next
//
// and the timeline it produces on a GPU (slot A holds batch i, B i+1):
//
//	copy    |==H2D i+1 -> B==|                          |==H2D i+2 -> A==|
//	compute |=========== step i (reads A) ==============|=========== step i+1 (reads B) ...
//	        ^ start(i) = free(B): step i-1 is done with B    ^ free(A) = start(i+1)
//
// A host buffer goes back to its ring only once its copy has completed
// (Reap, Flush), a device buffer is overwritten only after the step that
// read it (the copy stream waits for that step's "free" event), a copy
// never starts before the step it should hide under, and batches are
// never reordered. The trainer should Reap before asking the ring for the
// next batch, so that it holds at most two host buffers.
package feed

import (
	"errors"
	"fmt"
	"time"

	"github.com/voxtrain/voxtrain/nn"
)

// HostBatch is one batch in host memory; *data.Batch, which package
// data's ring delivers, is one.
type HostBatch interface {
	// HostArrays returns the image (N×C×D×H×W) and label (N×D×H×W, class
	// indices) arrays, N samples of C channels, and the patch (D, H, W).
	HostArrays() (image, label []float32, n, c int, patch [3]int)
	// Release gives the arrays back to their owner (the ring); the Feeder
	// calls it exactly once, after the copy out of them has completed.
	Release()
}

// Arrays is a HostBatch of plain arrays, for callers without a ring
// (tests, benchmarks).
type Arrays struct {
	Image, Label []float32
	N, C         int
	Patch        [3]int
	// OnRelease, when set, is called by Release.
	OnRelease func()
}

// HostArrays implements HostBatch.
func (a *Arrays) HostArrays() (image, label []float32, n, c int, patch [3]int) {
	return a.Image, a.Label, a.N, a.C, a.Patch
}

// Release implements HostBatch.
func (a *Arrays) Release() {
	if a.OnRelease != nil {
		a.OnRelease()
	}
}

// host is a HostBatch's arrays, as Upload read them.
type host struct {
	image, label []float32
	n, c         int
	patch        [3]int
	src          HostBatch
}

// Batch is a batch uploaded to the device: Image (N, C, D, H, W) and
// Label (N, D, H, W) are the device buffers of its slot.
type Batch struct {
	Image, Label nn.Tensor
	N            int
	Seq          int64 // upload order, from 0

	slot     *slot
	host     host
	copied   nn.Event // on the copy stream, after the upload (nil until issued)
	released bool
	acquired bool
	done     bool
	// Timestamps (devices with a Timeline only).
	copyStart, stepStart, stepEnd nn.Event
}

// Timeline is implemented by devices whose events carry timestamps (the
// CUDA device's timing events). With one, a Feeder measures each copy and
// step on the device's own clock.
type Timeline interface {
	// RecordTimed is Record on s with an event that carries a timestamp.
	RecordTimed(s nn.Stream) nn.Event
	// Elapsed returns the time from start to end, both completed.
	Elapsed(start, end nn.Event) (time.Duration, error)
}

// Options configure a Feeder.
type Options struct {
	// Slots is the number of device input buffers (default 2).
	Slots int
	// MaxPending bounds the host buffers the Feeder holds (uploaded, not
	// yet released): Upload first waits for the oldest copies beyond it.
	// Default: Slots. It must leave the ring's held budget room for the
	// batch being uploaded.
	MaxPending int
}

// Feeder uploads batches to a device on its own copy stream. It is used by
// one goroutine (the training loop).
type Feeder struct {
	dev     nn.Device
	copyS   nn.Stream
	tl      Timeline
	ref     nn.Event // timeline origin
	slots   []*slot
	next    int
	pending []*Batch // uploaded, host buffer not released, in order
	// deferred are uploaded batches whose copies wait for the Acquire of
	// the batch before them; unacquired counts batches not yet acquired.
	deferred   []*Batch
	unacquired int
	err        error // a failed deferred copy, reported by Close
	seq        int64
	maxPend    int
	stats      Stats
	closed     bool

	// Timeline bookkeeping (see timeline.go).
	timedCopies []*Batch           // released, copy not yet accounted
	stepPending []*Batch           // Done, step not yet accounted
	stepIv      map[int64]interval // accounted steps by batch Seq (recent)
}

// slot is one set of device input buffers.
type slot struct {
	id     int
	bufs   map[shapeKey][2]nn.Tensor
	free   nn.Event // the last step that read the slot is done with it
	inUse  *Batch   // uploaded into the slot, Done not yet called
	shapes []shapeKey
}

type shapeKey struct {
	n, c  int
	patch [3]int
}

// Stats sum up a Feeder's work.
type Stats struct {
	Batches     int64         // uploaded
	Bytes       int64         // copied host to device
	Released    int64         // host buffers given back
	HostWaits   int64         // times Upload or Flush blocked on a copy
	HostWaited  time.Duration // time blocked on copies
	Timed       int64         // copies timed (all but batch 0's, which nothing can hide)
	CopyTime    time.Duration // device time of the timed copies
	HiddenCopy  time.Duration // of which overlapped a step
	LastHidden  float64       // hidden share of the last timed copy
	StepTime    time.Duration // device time of the timed steps
	TimedSteps  int64         // steps timed
	MaxInFlight int           // most host buffers held at once
}

// HiddenShare is the share of copy time that ran while a step computed
// (1 when nothing was timed).
func (s Stats) HiddenShare() float64 {
	if s.CopyTime == 0 {
		return 1
	}
	return float64(s.HiddenCopy) / float64(s.CopyTime)
}

// New returns a Feeder on dev with its own copy stream. When dev
// implements Timeline, copies and steps are timed.
func New(dev nn.Device, o Options) *Feeder {
	if o.Slots <= 0 {
		o.Slots = 2
	}
	if o.MaxPending <= 0 {
		o.MaxPending = o.Slots
	}
	f := &Feeder{dev: dev, copyS: dev.NewStream(), maxPend: o.MaxPending}
	for i := 0; i < o.Slots; i++ {
		f.slots = append(f.slots, &slot{id: i, bufs: map[shapeKey][2]nn.Tensor{}})
	}
	if tl, ok := dev.(Timeline); ok {
		f.tl = tl
		f.ref = tl.RecordTimed(dev.ComputeStream())
	}
	return f
}

// CopyStream returns the Feeder's copy stream.
func (f *Feeder) CopyStream() nn.Stream { return f.copyS }

// check validates a host batch's sizes.
func (h host) check() error {
	v := h.patch[0] * h.patch[1] * h.patch[2]
	if h.n <= 0 || h.c <= 0 || h.patch[0] <= 0 || h.patch[1] <= 0 || h.patch[2] <= 0 {
		return fmt.Errorf("feed: batch of %d samples, %d channels, patch %v: sizes must be positive", h.n, h.c, h.patch)
	}
	if len(h.image) != h.n*h.c*v {
		return fmt.Errorf("feed: image has %d floats, %d samples × %d channels × %v need %d", len(h.image), h.n, h.c, h.patch, h.n*h.c*v)
	}
	if len(h.label) != h.n*v {
		return fmt.Errorf("feed: label has %d floats, %d samples × %v need %d", len(h.label), h.n, h.patch, h.n*v)
	}
	return nil
}

// Upload queues hb for the next device slot and returns the device batch.
// The copy is issued on the copy stream at once when every earlier batch
// has been acquired, otherwise when the batch before it is (Acquire): so
// the copy of batch i+1 starts with step i, never in the idle gap before
// it, and it waits (on the device) for the step that last read its slot.
// The caller keeps hb's arrays untouched until the Feeder releases them.
func (f *Feeder) Upload(hb HostBatch) (*Batch, error) {
	if f.closed {
		return nil, errors.New("feed: Upload on a closed Feeder")
	}
	h := host{src: hb}
	h.image, h.label, h.n, h.c, h.patch = hb.HostArrays()
	if err := h.check(); err != nil {
		return nil, err
	}
	s := f.slots[f.next]
	if s.inUse != nil {
		return nil, fmt.Errorf("feed: all %d device slots hold batches not yet Done (batch %d is still in slot %d): call Done after each step",
			len(f.slots), s.inUse.Seq, s.id)
	}
	f.Reap()
	for len(f.pending) >= f.maxPend {
		f.waitOldest()
	}
	key := shapeKey{h.n, h.c, h.patch}
	bufs, ok := s.bufs[key]
	if !ok {
		p := h.patch
		bufs = [2]nn.Tensor{f.dev.Alloc(nn.Shape{h.n, h.c, p[0], p[1], p[2]}), f.dev.Alloc(nn.Shape{h.n, p[0], p[1], p[2]})}
		s.bufs[key] = bufs
		s.shapes = append(s.shapes, key)
	}
	b := &Batch{Image: bufs[0], Label: bufs[1], N: h.n, Seq: f.seq, slot: s, host: h}
	s.inUse = b
	f.next = (f.next + 1) % len(f.slots)
	f.seq++
	f.pending = append(f.pending, b)
	f.stats.MaxInFlight = max(f.stats.MaxInFlight, len(f.pending))
	if f.unacquired > 0 {
		f.deferred = append(f.deferred, b)
	} else if err := f.issue(b, nil); err != nil {
		return nil, err
	}
	f.unacquired++
	return b, nil
}

// issue enqueues b's copy on the copy stream, after event after (if any)
// and after the last step that read b's slot.
func (f *Feeder) issue(b *Batch, after nn.Event) error {
	if after != nil {
		f.copyS.Wait(after)
	}
	if b.slot.free != nil {
		f.copyS.Wait(b.slot.free)
	}
	if f.tl != nil {
		b.copyStart = f.tl.RecordTimed(f.copyS)
	}
	h := b.host
	if err := f.dev.Upload(f.copyS, b.Image, h.image); err != nil {
		return fmt.Errorf("feed: upload image of batch %d: %w", b.Seq, err)
	}
	if err := f.dev.Upload(f.copyS, b.Label, h.label); err != nil {
		return fmt.Errorf("feed: upload label of batch %d: %w", b.Seq, err)
	}
	if f.tl != nil {
		b.copied = f.tl.RecordTimed(f.copyS)
	} else {
		b.copied = f.copyS.Record()
	}
	f.stats.Batches++
	f.stats.Bytes += 4 * int64(len(h.image)+len(h.label))
	return nil
}

// issueDeferred issues the deferred copies up to and including b (all of
// them for a nil b), after event after.
func (f *Feeder) issueDeferred(b *Batch, after nn.Event) error {
	for len(f.deferred) > 0 {
		d := f.deferred[0]
		f.deferred = f.deferred[1:]
		if err := f.issue(d, after); err != nil {
			f.err = errors.Join(f.err, err)
			return err
		}
		if d == b {
			break
		}
	}
	return nil
}

// Acquire makes the compute stream wait for b's copy and returns its
// device image and labels, then issues the next batch's copy so that it
// runs alongside this step. Work issued on the compute stream afterwards
// sees the batch. Batches are acquired in upload order.
func (f *Feeder) Acquire(b *Batch) (image, label nn.Tensor) {
	if b.done || b.acquired {
		panic(fmt.Sprintf("feed: Acquire of batch %d twice or after its Done", b.Seq))
	}
	if b.copied == nil { // acquired out of order: issue it now
		f.issueDeferred(b, nil)
	}
	b.acquired = true
	f.unacquired--
	cs := f.dev.ComputeStream()
	cs.Wait(b.copied)
	if f.tl != nil {
		b.stepStart = f.tl.RecordTimed(cs)
	} else {
		b.stepStart = cs.Record()
	}
	if len(f.deferred) > 0 {
		f.issueDeferred(f.deferred[0], b.stepStart)
	}
	return b.Image, b.Label
}

// Done tells the Feeder that all compute work reading b has been issued:
// its slot may be overwritten once that work completes. Call it after the
// step, before the Upload that would reuse the slot.
func (f *Feeder) Done(b *Batch) {
	if b.done {
		panic(fmt.Sprintf("feed: Done called twice for batch %d", b.Seq))
	}
	b.done = true
	cs := f.dev.ComputeStream()
	if f.tl != nil {
		b.stepEnd = f.tl.RecordTimed(cs)
		b.slot.free = b.stepEnd
		if b.stepStart != nil {
			f.stepPending = append(f.stepPending, b)
		}
	} else {
		b.slot.free = cs.Record()
	}
	if b.slot.inUse == b {
		b.slot.inUse = nil
	}
}

// Reap releases, in upload order, the host buffers whose copies have
// completed, without blocking, and returns how many it released.
func (f *Feeder) Reap() int {
	n := 0
	for len(f.pending) > 0 && f.pending[0].copied != nil && f.pending[0].copied.Done() {
		f.release(f.pending[0])
		f.pending = f.pending[1:]
		n++
	}
	f.timeline()
	return n
}

// waitOldest blocks until the oldest pending copy completes and releases
// its host buffer.
func (f *Feeder) waitOldest() {
	b := f.pending[0]
	if b.copied == nil {
		f.issueDeferred(b, nil)
	}
	t0 := time.Now()
	b.copied.Synchronize()
	f.stats.HostWaits++
	f.stats.HostWaited += time.Since(t0)
	f.release(b)
	f.pending = f.pending[1:]
}

// Flush issues the deferred copies, waits for every pending copy and
// releases its host buffer.
func (f *Feeder) Flush() {
	f.issueDeferred(nil, nil)
	for len(f.pending) > 0 {
		f.waitOldest()
	}
	f.timeline()
}

// Pending returns how many host buffers the Feeder holds.
func (f *Feeder) Pending() int { return len(f.pending) }

func (f *Feeder) release(b *Batch) {
	if b.released {
		panic(fmt.Sprintf("feed: batch %d released twice", b.Seq))
	}
	b.released = true
	b.host.src.Release()
	b.host = host{}
	f.stats.Released++
	if f.tl != nil {
		f.timedCopies = append(f.timedCopies, b)
	}
}

// Stats returns what the Feeder did so far.
func (f *Feeder) Stats() Stats { return f.stats }

// Close flushes the pending copies, waits for the compute stream and
// frees the device buffers. The Feeder cannot be used afterwards.
func (f *Feeder) Close() error {
	if f.closed {
		return nil
	}
	f.Flush()
	f.dev.ComputeStream().Synchronize()
	f.copyS.Synchronize()
	for _, s := range f.slots {
		for _, k := range s.shapes {
			for _, t := range s.bufs[k] {
				f.dev.Free(t)
			}
		}
		s.bufs, s.shapes = nil, nil
	}
	f.closed = true
	return errors.Join(f.err, f.dev.Err())
}
