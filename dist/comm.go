package dist

import (
	"context"
	"fmt"
	"time"
)

// Comm is a communicator: the collective calls the data-parallel trainer
// makes. Every rank must make the same calls, with buffers of the same
// lengths, in the same order; a Comm's calls are not to be made from
// several goroutines at once. After a call fails (a rank died, stalled or
// left, or ctx was cancelled) every later call fails too: the job is over.
type Comm interface {
	// Rank is this process's rank, Size the number of ranks.
	Rank() int
	Size() int
	// AllReduceSum replaces buf on every rank by the elementwise sum of
	// every rank's buf, the same bits on every rank.
	AllReduceSum(ctx context.Context, buf []float32) error
	// Broadcast copies root's buf into every rank's buf (of the same
	// length).
	Broadcast(ctx context.Context, buf []byte, root int) error
	// Barrier returns once every rank has called it.
	Barrier(ctx context.Context) error
	// Close leaves the job; rank 0 waits (up to the timeout) for the
	// others to leave first, since it serves the store.
	Close() error
}

// Options tune Init.
type Options struct {
	// JoinTimeout bounds the rendezvous: reaching the store and waiting
	// for every rank to join (0: DefaultJoinTimeout).
	JoinTimeout time.Duration
	// Timeout bounds how long a call waits without progress, that is
	// without a byte from the rank it waits for, before it fails naming
	// that rank (0: DefaultTimeout).
	Timeout time.Duration
}

const (
	// DefaultJoinTimeout leaves time for ranks a scheduler starts apart.
	DefaultJoinTimeout = 10 * time.Minute
	// DefaultTimeout is long enough for a slow step on one rank (a
	// validation, a checkpoint written by rank 0) and short enough that a
	// dead job does not hold its GPUs for long.
	DefaultTimeout = 5 * time.Minute
)

// Init joins the job env describes and returns its communicator: Single
// for a job of one process, else the CPU ring over TCP (see tcpcomm.go)
// after rank 0 starts the store at env.Addr() and every rank announces
// itself there.
func Init(ctx context.Context, env Env, opts Options) (Comm, error) {
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = DefaultJoinTimeout
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if env.WorldSize <= 1 {
		return Single{}, nil
	}
	return initTCP(ctx, env, opts)
}

// Single is the communicator of a job of one process: every call returns
// at once, buffers untouched.
type Single struct{}

// Rank is 0.
func (Single) Rank() int { return 0 }

// Size is 1.
func (Single) Size() int { return 1 }

// AllReduceSum leaves buf as it is: the sum over one rank.
func (Single) AllReduceSum(context.Context, []float32) error { return nil }

// Broadcast leaves buf as it is; root must be 0.
func (Single) Broadcast(_ context.Context, _ []byte, root int) error {
	if root != 0 {
		return fmt.Errorf("broadcast from rank %d in a job of one rank", root)
	}
	return nil
}

// Barrier returns at once.
func (Single) Barrier(context.Context) error { return nil }

// Close does nothing.
func (Single) Close() error { return nil }

// DefaultBucketBytes is the size AllReduceBuckets gathers tensors into,
// PyTorch DDP's bucket_cap_mb (25 MiB).
const DefaultBucketBytes = 25 << 20

// AllReduceBuckets sums each of bufs over the ranks, as AllReduceSum does,
// in buckets of about bucketBytes (≤ 0: DefaultBucketBytes): the tensors
// are taken in reverse order (the order backward produces gradients in,
// as DDP does), packed into one flat buffer until the next would overflow
// it, and each bucket is reduced in one call; a tensor larger than a
// bucket is reduced alone, in place. Every rank must pass tensors of the
// same lengths in the same order.
//
// This is synchronous: it returns once every bucket is reduced. The NCCL
// path will overlap instead: backward will mark each gradient ready, a
// full bucket will be all-reduced on a communication stream while
// backward goes on producing the next, and the optimizer step will wait
// on that stream's event; the buckets and their order stay these, so the
// sums are the same.
func AllReduceBuckets(ctx context.Context, c Comm, bufs [][]float32, bucketBytes int) error {
	if c.Size() == 1 {
		return nil
	}
	if bucketBytes <= 0 {
		bucketBytes = DefaultBucketBytes
	}
	limit := max(1, bucketBytes/4)
	var flat []float32
	var bucket [][]float32
	reduce := func() error {
		defer func() { bucket = bucket[:0] }()
		switch len(bucket) {
		case 0:
			return nil
		case 1:
			return c.AllReduceSum(ctx, bucket[0])
		}
		flat = flat[:0]
		for _, b := range bucket {
			flat = append(flat, b...)
		}
		if err := c.AllReduceSum(ctx, flat); err != nil {
			return err
		}
		off := 0
		for _, b := range bucket {
			off += copy(b, flat[off:])
		}
		return nil
	}
	n := 0 // elements in the bucket being filled
	for i := len(bufs) - 1; i >= 0; i-- {
		if len(bufs[i]) == 0 {
			continue
		}
		if n > 0 && n+len(bufs[i]) > limit {
			if err := reduce(); err != nil {
				return err
			}
			n = 0
		}
		bucket = append(bucket, bufs[i])
		n += len(bufs[i])
	}
	return reduce()
}
