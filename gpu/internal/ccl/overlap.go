package ccl

import (
	"context"
	"fmt"

	"github.com/voxtrain/voxtrain/dist"
)

// Overlap is AllReduceMean spread over a backward pass, as PyTorch DDP's
// Reducer does it: the same buckets (dist.Buckets, last tensor first),
// each launched as one NCCL group on the communicator's stream as soon as
// its tensors are final and every earlier bucket was launched
// (dist.Tracker: the same order on every rank), while the compute stream
// goes on with the rest of the pass. Begin starts a step, Ready reports a
// tensor final, Finish launches what is left, waits (the watchdog) and
// scales. One Overlap serves every step; its calls are not to be made
// from several goroutines at once (the device issues them in order).
type Overlap[B any] struct {
	c       *Comm[B]
	bufs    []B
	lens    []int
	tracker *dist.Tracker
	// before orders the communicator's stream after the work issued to
	// the compute stream so far (an event recorded there, waited for on
	// the NCCL stream); called before each bucket's launch.
	before func() error
	err    error // the step's first launch or reporting error
}

// NewOverlap prepares the overlapped reduction of bufs (lens[i] float32
// elements each, device memory that stays put across steps); before is
// called before each bucket is launched (see Overlap).
func (c *Comm[B]) NewOverlap(bufs []B, lens []int, before func() error) (*Overlap[B], error) {
	if len(bufs) != len(lens) {
		return nil, c.errorf("%d buffers with %d lengths", len(bufs), len(lens))
	}
	t, err := dist.NewTracker(dist.Buckets(lens, Float32.Size(), c.opts.BucketBytes), len(bufs))
	if err != nil {
		return nil, c.errorf("%w", err)
	}
	return &Overlap[B]{c: c, bufs: bufs, lens: lens, tracker: t, before: before}, nil
}

// Buckets is the plan, in launch order.
func (o *Overlap[B]) Buckets() [][]int { return o.tracker.Buckets() }

// Begin starts a step: no tensor ready, no bucket launched.
func (o *Overlap[B]) Begin() {
	o.tracker.Reset()
	o.err = nil
}

// Ready reports tensor i final (its producing ops issued on the compute
// stream) and launches the buckets that may start now. An error is kept
// for Finish; after one, nothing more is launched on this rank.
func (o *Overlap[B]) Ready(i int) {
	if err := o.tracker.Ready(i, o.launch); err != nil && o.err == nil {
		o.err = o.c.errorf("%w", err)
	}
}

func (o *Overlap[B]) launch(k int) {
	if o.err != nil {
		return
	}
	if err := o.before(); err != nil {
		o.err = o.c.errorf("ordering bucket %d after the backward pass: %w", k+1, err)
		return
	}
	nb := len(o.tracker.Buckets())
	o.err = o.c.launch(o.bufs, o.lens, o.tracker.Buckets()[k], k, nb)
}

// Finish launches the buckets not launched yet (none when every tensor
// was reported), waits for the stream up to the timeout as AllReduceSum
// does (the watchdog: NCCL's asynchronous error, the job's fault), and
// scales every non-empty buffer by 1/N as AllReduceMean does. A tensor
// never reported is an error, after its bucket was reduced all the same
// (the ranks' calls stay matched).
func (o *Overlap[B]) Finish(ctx context.Context, scale func(i int, alpha float32) error) error {
	missing := o.tracker.Rest(o.launch)
	if o.err != nil {
		return o.c.fail(o.err)
	}
	n := 0
	for _, l := range o.lens {
		n += max(0, l)
	}
	if err := o.c.wait(ctx, fmt.Sprintf("overlapped all-reduce of %d buckets (%d tensors, %d elements)", len(o.tracker.Buckets()), len(o.lens), n)); err != nil {
		return err
	}
	if len(missing) > 0 {
		return o.c.errorf("the backward pass never reported gradients %v ready", missing)
	}
	if o.c.size == 1 {
		return nil
	}
	inv := float32(1 / float64(o.c.size))
	for i := range o.bufs {
		if o.lens[i] > 0 {
			if err := scale(i, inv); err != nil {
				return o.c.errorf("scaling gradient %d by 1/%d: %w", i, o.c.size, err)
			}
		}
	}
	return nil
}
