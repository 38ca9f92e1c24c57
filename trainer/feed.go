package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nn"
)

// feed is the pipelined input of the training loop: while step i computes
// on one pair of device input tensors, a goroutine takes batch i+1 from the
// data stream and uploads it on a separate copy stream into the other pair.
//
//	copy stream:    [wait step i-1 done][upload i+1][record copied]
//	compute stream: [wait copied i][step i ... ][record done i]
//
// A host batch is released back to the data ring only after its copy event
// has completed, so a pinned buffer is never rewritten while the device
// still reads it, and a device input is never overwritten while the step
// that used it may still be running (the copy stream waits for that step's
// done event first).
type feed struct {
	dev     nn.Device
	copyS   nn.Stream
	compute nn.Stream
	stream  *data.Stream
	x, y    [2]nn.Tensor
	done    [2]nn.Event
	next    chan fetched
	pending bool
}

// fetched is one batch on the device (or the error that stopped it), with
// the times its stream delivered it and its copy completed.
type fetched struct {
	slot               int
	copied             nn.Event
	epoch, step        int
	lastInEpoch        bool
	delivered, copyEnd time.Time
	err                error
}

func newFeed(dev nn.Device, s *data.Stream, xShape, yShape nn.Shape) *feed {
	f := &feed{dev: dev, copyS: dev.NewStream(), compute: dev.ComputeStream(), stream: s, next: make(chan fetched, 1)}
	for i := range f.x {
		f.x[i] = dev.Alloc(xShape)
		f.y[i] = dev.Alloc(yShape)
	}
	return f
}

// start begins fetching the next batch into slot, on a goroutine.
func (f *feed) start(ctx context.Context, slot int) {
	f.pending = true
	prior := f.done[slot]
	go func() {
		r := fetched{slot: slot}
		b, err := f.stream.Next(ctx)
		r.delivered = time.Now()
		if err != nil {
			r.err = err
			f.next <- r
			return
		}
		r.epoch, r.step, r.lastInEpoch = b.Epoch, b.Step, b.LastInEpoch
		if prior != nil {
			f.copyS.Wait(prior)
		}
		if err := f.dev.Upload(f.copyS, f.x[slot], b.Image); err != nil {
			r.err = fmt.Errorf("upload batch: %w", err)
		} else if err := f.dev.Upload(f.copyS, f.y[slot], b.Label); err != nil {
			r.err = fmt.Errorf("upload labels: %w", err)
		}
		r.copied = f.copyS.Record()
		r.copied.Synchronize()
		r.copyEnd = time.Now()
		b.Release()
		f.next <- r
	}()
}

// wait returns the batch being fetched and how long the caller was
// blocked, split into waiting for data and waiting for the copy.
func (f *feed) wait() (r fetched, dataWait, copyWait time.Duration) {
	t0 := time.Now()
	r = <-f.next
	f.pending = false
	t1 := time.Now()
	if r.err != nil {
		return r, t1.Sub(t0), 0
	}
	// The caller waited from t0 to t1: for data until the stream delivered,
	// then for the copy.
	split := r.delivered
	if split.Before(t0) {
		split = t0
	}
	if split.After(t1) {
		split = t1
	}
	f.compute.Wait(r.copied)
	return r, split.Sub(t0), t1.Sub(split)
}

// stepDone records that the compute stream has enqueued everything that
// reads slot's inputs.
func (f *feed) stepDone(slot int) { f.done[slot] = f.compute.Record() }

// drain waits for a fetch in flight (after a cancellation) so no goroutine
// outlives the feed.
func (f *feed) drain() {
	if f.pending {
		<-f.next
		f.pending = false
	}
}

func (f *feed) free() {
	f.drain()
	f.compute.Synchronize()
	f.copyS.Synchronize()
	for i := range f.x {
		f.dev.Free(f.x[i])
		f.dev.Free(f.y[i])
	}
}
