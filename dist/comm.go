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
// This is synchronous: it returns once every bucket is reduced. The
// trainer's overlapped reduction (Tracker) reduces the same buckets in the
// same order, each as soon as backward has made its gradients final, so
// the sums are the same.
func AllReduceBuckets(ctx context.Context, c Comm, bufs [][]float32, bucketBytes int) error {
	if c.Size() == 1 {
		return nil
	}
	lens := make([]int, len(bufs))
	for i, b := range bufs {
		lens[i] = len(b)
	}
	var flat []float32
	for _, bucket := range Buckets(lens, 4, bucketBytes) {
		var err error
		if flat, err = AllReduceBucket(ctx, c, bufs, bucket, flat); err != nil {
			return err
		}
	}
	return nil
}

// Buckets plans AllReduceBuckets' buckets for tensors of lens elements of
// elemBytes bytes each, in buckets of about bucketBytes (≤ 0:
// DefaultBucketBytes): the indices of each bucket's tensors, buckets in
// the order they are reduced. The tensors are taken in reverse order,
// empty ones skipped, and a bucket is closed when the next tensor would
// overflow it; a tensor larger than a bucket makes a bucket of its own.
// The NCCL communicator reduces the same buckets, so both devices sum the
// same groups in the same order.
func Buckets(lens []int, elemBytes, bucketBytes int) [][]int {
	if bucketBytes <= 0 {
		bucketBytes = DefaultBucketBytes
	}
	limit := max(1, bucketBytes/max(1, elemBytes))
	var out [][]int
	var cur []int
	n := 0 // elements in cur
	for i := len(lens) - 1; i >= 0; i-- {
		if lens[i] <= 0 {
			continue
		}
		if n > 0 && n+lens[i] > limit {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, i)
		n += lens[i]
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
