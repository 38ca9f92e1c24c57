//go:build cuda

package gpu

import (
	"fmt"
	"runtime"
	"time"

	"github.com/voxtrain/voxtrain/nn"
	"gorgonia.org/cu"
)

// Stream is a CUDA stream of the device (nn.Stream).
type Stream struct {
	dev      *Device
	cuStream cu.Stream
	name     string // "compute" or "stream 3", for messages
}

// Event is a CUDA event (nn.Event). Its driver object is created and
// recorded on the device's thread when the Record call reaches it, so
// Record does not wait; anything that uses the event is queued after.
type Event struct {
	dev    *Device
	handle *eventHandle
	timing bool
	where  string // the stream it was recorded on
}

// eventHandle holds the driver's event, apart from Event so that a cleanup
// can destroy it once the Event is unreachable.
type eventHandle struct{ ev cu.Event } // set on the device's thread

var (
	_ nn.Stream = (*Stream)(nil)
	_ nn.Event  = (*Event)(nil)
)

// newStream creates a stream that does not synchronise with the legacy
// NULL stream (nothing here uses it, but libraries might).
func (d *Device) newStream(name string) (*Stream, error) {
	st := &Stream{dev: d, name: name}
	err := d.thread.do(func() error {
		s, err := cu.MakeStream(cu.NonBlocking)
		st.cuStream = s
		return cuErr("cuStreamCreate(CU_STREAM_NON_BLOCKING)", err)
	})
	if err != nil {
		return nil, err
	}
	// Streams are few (the compute stream and a copy stream or two), but
	// an abandoned one is destroyed once unreachable; cuStreamDestroy
	// returns at once and releases it when its work is done.
	runtime.AddCleanup(st, func(s cu.Stream) {
		d.thread.tryPost(func() error { return cuErr("cuStreamDestroy", s.Destroy()) })
	}, st.cuStream)
	return st, nil
}

// Record returns an event that completes when the work issued to the
// stream so far has completed.
func (s *Stream) Record() nn.Event { return s.record(false) }

// RecordTimed is Record with an event that carries a GPU timestamp, for
// Device.Elapsed (timing events cost a little more to record).
func (s *Stream) RecordTimed() *Event { return s.record(true) }

func (s *Stream) record(timing bool) *Event {
	h := &eventHandle{}
	e := &Event{dev: s.dev, handle: h, timing: timing, where: s.name}
	flags := cu.DisableTiming
	if timing {
		flags = cu.DefaultEvent
	}
	if !s.dev.spin {
		// Host waits sleep instead of spinning on a core the data
		// workers want (as the context's CU_CTX_SCHED_BLOCKING_SYNC does
		// for stream synchronisation).
		flags |= cu.BlockingSyncEvent
	}
	s.dev.thread.post(func() string { return "gpu: record an event on the " + s.name + " stream" }, func() error {
		ev, err := cu.MakeEvent(flags)
		if err != nil {
			return cuErr("cuEventCreate", err)
		}
		h.ev = ev
		return cuErr("cuEventRecord", ev.Record(s.cuStream))
	})
	d := s.dev // the cleanup must not keep the stream reachable
	runtime.AddCleanup(e, func(h *eventHandle) {
		d.thread.tryPost(func() error {
			if h.ev == (cu.Event{}) {
				return nil // never created (the device failed first)
			}
			return cuErr("cuEventDestroy", cu.DestroyEvent(&h.ev))
		})
	}, h)
	return e
}

// Wait makes work issued to the stream after this call wait for e (on the
// GPU: the caller does not block).
func (s *Stream) Wait(e nn.Event) {
	ev := s.dev.event(e)
	s.dev.thread.post(func() string {
		return fmt.Sprintf("gpu: the %s stream waits for an event of the %s stream", s.name, ev.where)
	}, func() error {
		return cuErr("cuStreamWaitEvent", s.cuStream.Wait(ev.handle.ev, 0))
	})
	runtime.KeepAlive(ev)
}

// Synchronize blocks until the work issued to the stream so far has
// completed. A failure is recorded as the device's error (Device.Err).
func (s *Stream) Synchronize() {
	err := s.dev.thread.do(func() error { return cuErr("cuStreamSynchronize("+s.name+")", s.cuStream.Synchronize()) })
	s.dev.core.SetErr(wrapAsync(err))
}

// Synchronize blocks until the event has completed.
func (e *Event) Synchronize() {
	err := e.dev.thread.do(func() error { return cuErr("cuEventSynchronize", e.handle.ev.Synchronize()) })
	e.dev.core.SetErr(wrapAsync(err))
	runtime.KeepAlive(e)
}

// Done reports whether the event has completed, without blocking. A
// failed device reports its events done (so no caller waits forever) and
// records the failure as the device's error.
func (e *Event) Done() bool {
	done := false
	err := e.dev.thread.do(func() error {
		err := e.handle.ev.Query()
		if isNotReady(err) {
			return nil
		}
		done = true
		return cuErr("cuEventQuery", err)
	})
	if err != nil {
		e.dev.core.SetErr(wrapAsync(err))
		return true
	}
	runtime.KeepAlive(e)
	return done
}

// wrapAsync says where an asynchronous failure surfaced: a fault in a
// kernel is reported by the next call that synchronises.
func wrapAsync(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gpu: %w (a failure of earlier asynchronous work surfaces here; run with %s=1 to find the op)", err, SyncEnv)
}

// RecordTimed records a timing event on s (a stream of d): with Elapsed,
// d implements feed.Timeline.
func (d *Device) RecordTimed(s nn.Stream) nn.Event {
	st, err := d.stream(s)
	if err != nil {
		panic(err.Error())
	}
	return st.RecordTimed()
}

// Elapsed returns the GPU time from start to end, events from RecordTimed
// that have both completed (Synchronize one first).
func (d *Device) Elapsed(start, end nn.Event) (time.Duration, error) {
	a, b := d.event(start), d.event(end)
	if !a.timing || !b.timing {
		return 0, fmt.Errorf("gpu: Elapsed needs events from RecordTimed")
	}
	var ms float64
	err := d.thread.do(func() error {
		var err error
		ms, err = a.handle.ev.Elapsed(b.handle.ev)
		return cuErr("cuEventElapsedTime", err)
	})
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return time.Duration(ms * float64(time.Millisecond)), err
}

// event returns the CUDA event behind e, panicking on a foreign event.
func (d *Device) event(e nn.Event) *Event {
	ev, ok := e.(*Event)
	if !ok || ev.dev != d {
		panic(fmt.Sprintf("gpu: event of type %T does not belong to this device", e))
	}
	return ev
}

// stream returns the CUDA stream behind s, panicking on a foreign stream.
func (d *Device) stream(s nn.Stream) (*Stream, error) {
	st, ok := s.(*Stream)
	if !ok || st.dev != d {
		return nil, fmt.Errorf("gpu: stream of type %T does not belong to this device", s)
	}
	return st, nil
}
