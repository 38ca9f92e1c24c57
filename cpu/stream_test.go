package cpu

import (
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/nn"
)

// TestStreamOrdering exercises the trainer's double-buffered pattern under
// the race detector: upload batch i+1 on a copy stream while "computing" on
// batch i, make compute wait on the copy's event, reuse the host buffer
// only after the event. Any missing happens-before edge is a data race.
func TestStreamOrdering(t *testing.T) {
	d := New(Options{Threads: 2})
	const n = 1 << 12
	copyS := d.NewStream()
	compute := d.ComputeStream()
	bufs := [2]nn.Tensor{d.Alloc(nn.Shape{n}), d.Alloc(nn.Shape{n})}
	hosts := [2][]float32{make([]float32, n), make([]float32, n)}
	var events [2]nn.Event
	fill := func(h []float32, v float32) {
		for i := range h {
			h[i] = v
		}
	}
	fill(hosts[0], 0)
	if err := d.Upload(copyS, bufs[0], hosts[0]); err != nil {
		t.Fatal(err)
	}
	events[0] = copyS.Record()
	out := d.Alloc(nn.Shape{n}).(*Tensor)
	for it := 0; it < 50; it++ {
		cur, next := it%2, (it+1)%2
		// Prefetch the next batch; its host buffer was released by the
		// event of its previous upload.
		if events[next] != nil {
			events[next].Synchronize()
		}
		fill(hosts[next], float32(it+1))
		if err := d.Upload(copyS, bufs[next], hosts[next]); err != nil {
			t.Fatal(err)
		}
		events[next] = copyS.Record()
		// Compute on the current batch after its copy.
		compute.Wait(events[cur])
		d.Copy(out, bufs[cur])
		d.Scale(out, 2)
		for i, v := range out.data {
			if v != float32(2*it) {
				t.Fatalf("iteration %d: element %d = %v, want %v (compute ran before its copy)", it, i, v, 2*it)
			}
		}
	}
	copyS.Synchronize()
}

// TestStreamFIFOAndCrossStreamWait checks in-order execution on a stream,
// an event's completion, and a stream waiting on another stream's event.
func TestStreamFIFOAndCrossStreamWait(t *testing.T) {
	d := New(Options{})
	a := d.NewStream().(*asyncStream)
	b := d.NewStream()
	gate := make(chan struct{})
	a.enqueue(func() { <-gate }) // holds stream a until the gate opens
	x := d.Alloc(nn.Shape{4}).(*Tensor)
	for v := 1; v <= 20; v++ {
		if err := d.Upload(a, x, []float32{float32(v), float32(v), float32(v), float32(v)}); err != nil {
			t.Fatal(err)
		}
	}
	ea := a.Record()
	b.Wait(ea)
	host := make([]float32, 4)
	if err := d.Download(b, host, x); err != nil {
		t.Fatal(err)
	}
	eb := b.Record()
	time.Sleep(10 * time.Millisecond)
	if ea.Done() || eb.Done() {
		t.Fatal("events completed while stream a was blocked")
	}
	close(gate)
	eb.Synchronize()
	if !ea.Done() {
		t.Fatal("b's event completed before the event it waited for")
	}
	if host[0] != 20 {
		t.Fatalf("download saw %v, want the last upload (20): uploads ran out of order or the wait failed", host[0])
	}
	// The compute stream's events are complete at once; its Wait blocks.
	if !d.ComputeStream().Record().Done() {
		t.Fatal("compute stream event not complete")
	}
	if err := d.Upload(a, x, make([]float32, 3)); err == nil {
		t.Fatal("upload with a wrong length did not fail")
	}
}
