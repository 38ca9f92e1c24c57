package dist

import (
	"context"
	"fmt"
)

// AllReduceBucket sums one of Buckets' buckets of bufs over the ranks, as
// AllReduceBuckets does for each of its buckets: a bucket of one tensor
// in place, else packed into flat (grown as needed and returned, for the
// caller to reuse) and copied back. AllReduceBuckets and the trainer's
// overlapped reduction both reduce through it, so their sums are the same
// bits.
func AllReduceBucket(ctx context.Context, c Comm, bufs [][]float32, bucket []int, flat []float32) ([]float32, error) {
	if len(bucket) == 1 {
		return flat, c.AllReduceSum(ctx, bufs[bucket[0]])
	}
	flat = flat[:0]
	for _, i := range bucket {
		flat = append(flat, bufs[i]...)
	}
	if err := c.AllReduceSum(ctx, flat); err != nil {
		return flat, err
	}
	off := 0
	for _, i := range bucket {
		off += copy(bufs[i], flat[off:])
	}
	return flat, nil
}

// Tracker decides when each bucket of an overlapped all-reduce may start,
// as PyTorch DDP's Reducer does: the backward pass reports tensors ready
// (their gradients final), and a bucket is launched once all of its
// tensors are ready and every bucket before it was launched. The buckets
// therefore start in their order on every rank, whatever order the
// tensors come in, and the ranks' collective calls match. One Tracker
// serves every step: Reset starts the next.
type Tracker struct {
	buckets  [][]int
	bucketOf []int  // tensor → its bucket, -1 for none (empty tensors)
	seen     []bool // tensor reported this step
	pending  []int  // bucket → tensors not yet ready
	next     int    // the first bucket not launched
}

// NewTracker tracks n tensors grouped into buckets (Buckets' plan; each
// index < n at most once).
func NewTracker(buckets [][]int, n int) (*Tracker, error) {
	t := &Tracker{buckets: buckets, bucketOf: make([]int, n), seen: make([]bool, n), pending: make([]int, len(buckets))}
	for i := range t.bucketOf {
		t.bucketOf[i] = -1
	}
	for k, b := range buckets {
		for _, i := range b {
			if i < 0 || i >= n || t.bucketOf[i] >= 0 {
				return nil, fmt.Errorf("bucket plan: tensor %d of %d out of range or in two buckets", i, n)
			}
			t.bucketOf[i] = k
		}
	}
	t.Reset()
	return t, nil
}

// Reset starts a step: no tensor ready, no bucket launched.
func (t *Tracker) Reset() {
	for k, b := range t.buckets {
		t.pending[k] = len(b)
	}
	clear(t.seen)
	t.next = 0
}

// Launched is how many buckets have been launched this step.
func (t *Tracker) Launched() int { return t.next }

// Buckets is the plan, in launch order.
func (t *Tracker) Buckets() [][]int { return t.buckets }

// Ready marks tensor i ready and calls launch for every bucket that may
// start now, in order. A tensor reported twice in one step is an error
// (the backward pass's hook is wrong), nothing launched.
func (t *Tracker) Ready(i int, launch func(k int)) error {
	if i < 0 || i >= len(t.seen) {
		return fmt.Errorf("gradient %d reported ready: only %d", i, len(t.seen))
	}
	if t.seen[i] {
		return fmt.Errorf("gradient %d reported ready twice in one step", i)
	}
	t.seen[i] = true
	if k := t.bucketOf[i]; k >= 0 {
		t.pending[k]--
	}
	for t.next < len(t.buckets) && t.pending[t.next] == 0 {
		t.next++
		launch(t.next - 1)
	}
	return nil
}

// Rest calls launch for every bucket not launched yet, in order, and
// returns the tensors never reported ready (in bucket order): a backward
// pass that did not report them. Launching them anyway keeps the ranks'
// calls matched and the sums complete.
func (t *Tracker) Rest(launch func(k int)) (missing []int) {
	for ; t.next < len(t.buckets); t.next++ {
		for _, i := range t.buckets[t.next] {
			if !t.seen[i] {
				missing = append(missing, i)
			}
		}
		launch(t.next)
	}
	return missing
}
