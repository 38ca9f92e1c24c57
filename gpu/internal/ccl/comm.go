package ccl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/dist"
)

// Store is the part of dist's store the rendezvous uses (*dist.Store).
type Store interface {
	Set(ctx context.Context, key string, val []byte) error
	Get(ctx context.Context, key string, timeout time.Duration) ([]byte, error)
	TryGet(ctx context.Context, key string) ([]byte, bool, error)
	Addr() string
}

// Options tune Init.
type Options struct {
	// JoinTimeout bounds the rendezvous and ncclCommInitRank; Timeout
	// bounds one all-reduce, after which the communicator is aborted
	// (0: dist's defaults, as the TCP communicator's).
	JoinTimeout, Timeout time.Duration
	// BucketBytes is the size gradients are grouped into (0:
	// dist.DefaultBucketBytes).
	BucketBytes int
	// Fault, when set, is polled while an all-reduce is waited for: the
	// job's fault as another communicator knows it (dist's TCP one names
	// the rank that died). A non-nil fault aborts the NCCL communicator
	// and is returned.
	Fault func() error
	// Key prefixes the store keys of the rendezvous (""; "voxtrain/nccl").
	Key string
	// Poll is the watchdog's first polling interval, doubled up to
	// maxPoll while the work is not done (0: 50µs).
	Poll time.Duration
}

// maxPoll bounds the watchdog's polling interval: a step's all-reduce
// takes milliseconds, so its end is seen within a few percent.
const maxPoll = 2 * time.Millisecond

// StallError is an all-reduce that did not finish within the timeout: a
// peer died or stalled. NCCL cannot say which peer; the TCP
// communicator's fault, polled meanwhile, names it when it knows.
type StallError struct {
	Rank, Size int
	What       string // "all-reduce of bucket 2 of 5 (3 tensors, 1234 elements)"
	Timeout    time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("rank %d of %d: NCCL %s did not finish within %v: a peer died or stalled (NCCL cannot say which; the other ranks' errors name it); the communicator was aborted",
		e.Rank, e.Size, e.What, e.Timeout)
}

// Unwrap makes errors.Is(err, dist.ErrTimeout) hold.
func (e *StallError) Unwrap() error { return dist.ErrTimeout }

// Comm is one rank's NCCL communicator. Its calls are not to be made
// from several goroutines at once. After a call fails the communicator is
// aborted and every later call fails with the same error.
type Comm[B any] struct {
	lib        Lib[B]
	rank, size int
	handle     Handle
	stream     Stream
	opts       Options
	version    int
	broken     error
	freed      bool // aborted or destroyed
}

// Init makes rank's (of size) communicator on stream, meeting the other
// ranks through store: rank 0 makes NCCL's unique id and sets it at
// Key/id; the others wait for it up to the join timeout; every rank then
// marks itself at Key/joined/<rank> and waits for the others' marks, so
// that a rank that never comes is named instead of ncclCommInitRank
// blocking for ever. A job of one rank needs no store (nil).
func Init[B any](ctx context.Context, lib Lib[B], store Store, rank, size int, stream Stream, o Options) (*Comm[B], error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d of %d: want 0 ≤ rank < size", rank, size)
	}
	if stream == 0 {
		return nil, fmt.Errorf("nccl: rank %d of %d: no stream (NCCL's work needs its own)", rank, size)
	}
	if size > 1 && store == nil {
		return nil, fmt.Errorf("nccl: rank %d of %d: no store to meet the other ranks through", rank, size)
	}
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = dist.DefaultJoinTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = dist.DefaultTimeout
	}
	if o.BucketBytes <= 0 {
		o.BucketBytes = dist.DefaultBucketBytes
	}
	if o.Key == "" {
		o.Key = "voxtrain/nccl"
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Microsecond
	}
	c := &Comm[B]{lib: lib, rank: rank, size: size, stream: stream, opts: o}
	v, r := lib.Version()
	if err := check(lib, "ncclGetVersion", r); err != nil {
		return nil, c.errorf("%w", err)
	}
	c.version = v
	deadline := time.Now().Add(o.JoinTimeout)
	id, err := c.rendezvous(ctx, store, deadline)
	if err != nil {
		return nil, err
	}
	type initResult struct {
		h Handle
		r Result
	}
	done := make(chan initResult, 1)
	go func() {
		h, r := lib.CommInitRank(size, id, rank)
		done <- initResult{h, r}
	}()
	wait := time.NewTimer(max(time.Until(deadline), time.Second))
	defer wait.Stop()
	select {
	case res := <-done:
		if err := check(lib, "ncclCommInitRank", res.r); err != nil {
			return nil, c.errorf("%w", err)
		}
		c.handle = res.h
	case <-wait.C:
		// ncclCommInitRank cannot be interrupted; the goroutine is left
		// to it, and the process is about to fail anyway.
		return nil, c.errorf("ncclCommInitRank did not return within the join timeout %v although every rank reached the rendezvous: a peer died meanwhile, or NCCL cannot connect the ranks (NCCL_DEBUG=INFO tells; %w)", o.JoinTimeout, dist.ErrTimeout)
	case <-ctx.Done():
		return nil, c.errorf("ncclCommInitRank: %w", ctx.Err())
	}
	return c, nil
}

// errorf is an error of this rank's communicator.
func (c *Comm[B]) errorf(format string, args ...any) error {
	return fmt.Errorf("nccl: rank %d of %d: "+format, append([]any{c.rank, c.size}, args...)...)
}

// rendezvous returns the job's unique id once every rank has come.
func (c *Comm[B]) rendezvous(ctx context.Context, store Store, deadline time.Time) (UniqueID, error) {
	var id UniqueID
	if c.rank == 0 {
		var r Result
		id, r = c.lib.UniqueID()
		if err := check(c.lib, "ncclGetUniqueId", r); err != nil {
			return id, c.errorf("%w", err)
		}
	}
	if c.size == 1 {
		return id, nil
	}
	idKey := c.opts.Key + "/id"
	if c.rank == 0 {
		if err := store.Set(ctx, idKey, id[:]); err != nil {
			return id, c.errorf("publishing NCCL's unique id: %w", err)
		}
	} else {
		v, err := store.Get(ctx, idKey, max(0, time.Until(deadline)))
		if errors.Is(err, dist.ErrTimeout) {
			return id, c.errorf("rank 0 did not publish NCCL's unique id at %s within %v (%w)", store.Addr(), c.opts.JoinTimeout, dist.ErrTimeout)
		}
		if err != nil {
			return id, c.errorf("fetching NCCL's unique id: %w", err)
		}
		if len(v) != len(id) {
			return id, c.errorf("NCCL's unique id at %s (%q) has %d bytes, want %d", store.Addr(), idKey, len(v), len(id))
		}
		copy(id[:], v)
	}
	mark := func(r int) string { return c.opts.Key + "/joined/" + strconv.Itoa(r) }
	if err := store.Set(ctx, mark(c.rank), []byte{1}); err != nil {
		return id, c.errorf("joining NCCL's rendezvous: %w", err)
	}
	for r := range c.size {
		_, err := store.Get(ctx, mark(r), max(0, time.Until(deadline)))
		if errors.Is(err, dist.ErrTimeout) {
			var missing []string
			for q := r; q < c.size; q++ {
				if _, ok, err := store.TryGet(ctx, mark(q)); err == nil && !ok {
					missing = append(missing, strconv.Itoa(q))
				}
			}
			who := "rank " + strings.Join(missing, ", ")
			if len(missing) > 1 {
				who = "ranks " + strings.Join(missing, ", ")
			}
			return id, c.errorf("%s of %d did not join NCCL's rendezvous at %s within %v (%w)", who, c.size, store.Addr(), c.opts.JoinTimeout, dist.ErrTimeout)
		}
		if err != nil {
			return id, c.errorf("waiting for rank %d at NCCL's rendezvous: %w", r, err)
		}
	}
	return id, nil
}

// Rank is this communicator's rank, Size the number of ranks.
func (c *Comm[B]) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm[B]) Size() int { return c.size }

// Version is the NCCL library's version ("2.21.5").
func (c *Comm[B]) Version() string { return VersionString(c.version) }

// Stream is the stream the communicator's work runs on.
func (c *Comm[B]) Stream() Stream { return c.stream }

// AllReduceMean replaces each bufs[i], lens[i] float32 elements of device
// memory, by its mean over the ranks: AllReduceSum, then scale(i, 1/N)
// for every non-empty buffer (not at all for one rank, whose mean is its
// own). scale multiplies the buffer on the device, after the sums (the
// caller orders it after the communicator's stream).
func (c *Comm[B]) AllReduceMean(ctx context.Context, bufs []B, lens []int, scale func(i int, alpha float32) error) error {
	if err := c.AllReduceSum(ctx, bufs, lens); err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	inv := float32(1 / float64(c.size))
	for i := range bufs {
		if lens[i] > 0 {
			if err := scale(i, inv); err != nil {
				return c.errorf("scaling gradient %d by 1/%d: %w", i, c.size, err)
			}
		}
	}
	return nil
}

// AllReduceSum replaces each bufs[i] (lens[i] float32 elements, in
// place) by its sum over the ranks, in dist.Buckets' buckets (last tensor
// first, about BucketBytes each): each bucket's all-reduces are one NCCL
// group, launched together on the communicator's stream. It returns when
// the stream has finished them, waiting at most the timeout: a peer that
// died or stalled leaves NCCL's kernels spinning for ever, so the
// watchdog polls the stream, NCCL's asynchronous error and the job's
// fault (Options.Fault) meanwhile, and aborts the communicator on any of
// them or at the timeout. Every rank must pass buffers of the same
// lengths in the same order.
func (c *Comm[B]) AllReduceSum(ctx context.Context, bufs []B, lens []int) error {
	if len(bufs) != len(lens) {
		return c.errorf("%d buffers with %d lengths", len(bufs), len(lens))
	}
	if c.broken != nil {
		return c.broken
	}
	if c.freed {
		return c.errorf("all-reduce after Close")
	}
	buckets := dist.Buckets(lens, Float32.Size(), c.opts.BucketBytes)
	for k, bucket := range buckets {
		if err := c.launch(bufs, lens, bucket, k, len(buckets)); err != nil {
			return err
		}
	}
	n := 0
	for _, l := range lens {
		n += max(0, l)
	}
	return c.wait(ctx, fmt.Sprintf("all-reduce of %d buckets (%d tensors, %d elements)", len(buckets), len(lens), n))
}

// launch enqueues bucket k (of nb) of bufs' all-reduces on the
// communicator's stream as one NCCL group; it does not wait. A failed
// call aborts the communicator.
func (c *Comm[B]) launch(bufs []B, lens []int, bucket []int, k, nb int) error {
	if c.broken != nil {
		return c.broken
	}
	if c.freed {
		return c.errorf("all-reduce after Close")
	}
	if err := check(c.lib, "ncclGroupStart", c.lib.GroupStart()); err != nil {
		return c.fail(c.errorf("%w", err))
	}
	var failed error
	for _, i := range bucket {
		if err := check(c.lib, "ncclAllReduce", c.lib.AllReduce(bufs[i], bufs[i], lens[i], Float32, Sum, c.handle, c.stream)); err != nil {
			failed = c.errorf("gradient %d (%d elements, bucket %d of %d): %w", i, lens[i], k+1, nb, err)
			break
		}
	}
	// The group is closed even after a failed call, as NCCL wants.
	if err := check(c.lib, "ncclGroupEnd", c.lib.GroupEnd()); err != nil && failed == nil {
		failed = c.errorf("bucket %d of %d: %w", k+1, nb, err)
	}
	if failed != nil {
		return c.fail(failed)
	}
	return nil
}

// wait is the watchdog: it returns once the stream's work is done, or
// aborts the communicator on an error, a fault or the timeout.
func (c *Comm[B]) wait(ctx context.Context, what string) error {
	start := time.Now()
	poll := c.opts.Poll
	for {
		done, err := c.lib.StreamDone(c.stream)
		if err != nil {
			return c.fail(c.errorf("NCCL %s: %w", what, err))
		}
		if done {
			return nil
		}
		state, r := c.lib.CommGetAsyncError(c.handle)
		if err := check(c.lib, "ncclCommGetAsyncError", r); err != nil {
			return c.fail(c.errorf("NCCL %s: %w", what, err))
		}
		if state != Success && state != InProgress {
			err := &Error{Call: "ncclCommGetAsyncError", Result: state, Text: c.lib.ErrorString(state)}
			if f := c.fault(); f != nil {
				return c.fail(c.errorf("NCCL %s: %w (NCCL: %v)", what, f, err))
			}
			return c.fail(c.errorf("NCCL %s: %w", what, err))
		}
		if f := c.fault(); f != nil {
			return c.fail(c.errorf("NCCL %s: %w", what, f))
		}
		if ctx.Err() != nil {
			return c.fail(c.errorf("NCCL %s: %w", what, ctx.Err()))
		}
		if time.Since(start) > c.opts.Timeout {
			return c.fail(&StallError{Rank: c.rank, Size: c.size, What: what, Timeout: c.opts.Timeout})
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
}

// fault polls Options.Fault.
func (c *Comm[B]) fault() error {
	if c.opts.Fault == nil {
		return nil
	}
	return c.opts.Fault()
}

// fail aborts the communicator (its kernels stop, the GPU is free for
// the process to exit) and makes err the answer to every later call.
func (c *Comm[B]) fail(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	if !c.freed {
		c.freed = true
		if r := c.lib.CommAbort(c.handle); r != Success {
			c.broken = fmt.Errorf("%w (and ncclCommAbort: %v)", c.broken, r)
		}
	}
	return c.broken
}

// Err is the error that ended the communicator, nil while it works.
func (c *Comm[B]) Err() error { return c.broken }

// Close frees the communicator (ncclCommDestroy; nothing after an abort,
// which freed it). It is safe to call twice.
func (c *Comm[B]) Close() error {
	if c.freed {
		return nil
	}
	c.freed = true
	return check(c.lib, "ncclCommDestroy", c.lib.CommDestroy(c.handle))
}
