package trainer

import (
	"fmt"
	"strings"

	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/nn"
)

// overlapEnv switches the gradients' all-reduce between overlapped with
// the backward pass ("" or "1", the default) and run after it ("0"), so
// that both can be measured; the two make the same collective calls in
// the same order and give the same bits.
const overlapEnv = "VOXTRAIN_DIST_OVERLAP"

func distOverlap(getenv func(string) string) (bool, error) {
	switch v := getenv(overlapEnv); v {
	case "", "1":
		return true, nil
	case "0":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want 1 (overlap the gradients' all-reduce with the backward pass) or 0 (reduce after it)", overlapEnv, v)
	}
}

// syncingComm is a communicator that overlaps its own gradient reduction
// with the backward pass (package gpu's NCCL communicator).
type syncingComm interface {
	NewGradSync(params []*nn.Param) (nn.GradSync, error)
}

// gradSync returns the job's overlapped gradient reduction for params, or
// nil where the job reduces after the backward pass (reduceGrads): a job
// of one process, overlap switched off, or gradients that are neither
// host memory nor the communicator's (a CUDA device on the TCP ring: they
// are staged through host memory after the pass).
func (j *job) gradSync(params []*nn.Param, overlap bool) (nn.GradSync, error) {
	if j == nil || j.comm.Size() == 1 || !overlap {
		return nil, nil
	}
	if c, ok := j.comm.(syncingComm); ok {
		return c.NewGradSync(params)
	}
	if _, ok := j.comm.(deviceReducer); ok {
		return nil, nil
	}
	for _, p := range params {
		if _, ok := p.G.(hostData); !ok {
			return nil, nil
		}
	}
	return newHostSync(j, params)
}

// hostSync is the overlapped gradient reduction over the job's CPU
// communicator (TCP ring), as PyTorch DDP's Reducer: the buckets are
// reduceGrads' (dist.Buckets, last parameter first), and each is summed
// by one background goroutine per step, through dist.AllReduceBucket, as
// soon as its gradients are final and every earlier bucket has started
// (dist.Tracker): the same calls, in the same order, on every rank, as
// the synchronous path makes, so the same bits. The step's goroutine
// makes no collective call between Begin and Finish (Comm is not safe for
// concurrent calls); Finish waits for the background goroutine to end.
type hostSync struct {
	j       *job
	params  []*nn.Param
	index   map[*nn.Param]int
	bufs    [][]float32
	tracker *dist.Tracker

	// The current step's (Begin to Finish).
	work   chan int   // buckets to reduce, in launch order
	done   chan error // the background goroutine's first error, then it ends
	misuse error      // a parameter reported twice or not the model's

	// flat is the background goroutine's packing buffer, kept across steps.
	flat []float32
	// onBucket, for tests, is called on the background goroutine before
	// each bucket's all-reduce.
	onBucket func(k int)
}

func newHostSync(j *job, params []*nn.Param) (*hostSync, error) {
	s := &hostSync{j: j, params: params, index: make(map[*nn.Param]int, len(params)), bufs: make([][]float32, len(params))}
	lens := make([]int, len(params))
	for i, p := range params {
		s.index[p] = i
		s.bufs[i] = p.G.(hostData).Data()
		lens[i] = len(s.bufs[i])
	}
	t, err := dist.NewTracker(dist.Buckets(lens, 4, j.bucketBytes), len(params))
	if err != nil {
		return nil, err
	}
	s.tracker = t
	return s, nil
}

// Begin starts the step's background goroutine.
func (s *hostSync) Begin() {
	s.tracker.Reset()
	s.misuse = nil
	s.work = make(chan int, len(s.tracker.Buckets())) // launch never blocks
	s.done = make(chan error, 1)
	go s.reduce(s.work, s.done)
}

// reduce sums the buckets it is handed, in order, until work is closed;
// after a failure (a rank died: every later call would fail too) it only
// drains work.
func (s *hostSync) reduce(work <-chan int, done chan<- error) {
	var err error
	buckets := s.tracker.Buckets()
	for k := range work {
		if err != nil {
			continue
		}
		if s.onBucket != nil {
			s.onBucket(k)
		}
		s.flat, err = dist.AllReduceBucket(s.j.ctx, s.j.comm, s.bufs, buckets[k], s.flat)
	}
	done <- err
}

func (s *hostSync) launch(k int) { s.work <- k }

// Ready marks params' gradients final; the buckets they complete start.
func (s *hostSync) Ready(params []*nn.Param) {
	for _, p := range params {
		i, ok := s.index[p]
		if !ok {
			if s.misuse == nil {
				s.misuse = fmt.Errorf("gradient of %s reported ready: not one of the model's parameters", p.Name)
			}
			continue
		}
		if err := s.tracker.Ready(i, s.launch); err != nil && s.misuse == nil {
			s.misuse = fmt.Errorf("%s: %w", p.Name, err)
		}
	}
}

// Finish starts the buckets not started yet (none, when the backward pass
// reported every parameter), waits for the background goroutine to end,
// and scales the sums by 1/N. Its error is the first all-reduce's (dist's
// *PeerError naming a rank that died), else a reporting mistake.
func (s *hostSync) Finish() error {
	missing := s.tracker.Rest(s.launch)
	close(s.work)
	err := <-s.done
	s.work, s.done = nil, nil
	if err != nil {
		return err
	}
	if s.misuse != nil {
		return s.misuse
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, k := range missing {
			names[i] = s.params[k].Name
		}
		return fmt.Errorf("the backward pass never reported the gradients of %s ready", strings.Join(names, ", "))
	}
	inv := float32(1 / float64(s.j.comm.Size()))
	for _, b := range s.bufs {
		for k := range b {
			b[k] *= inv
		}
	}
	return nil
}
