package ccl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/dist"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// onRanks runs f for ranks 0…n−1 at once and returns their errors.
func onRanks(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r) }()
	}
	wg.Wait()
	return errs
}

// serveStore starts a dist store on localhost and dials it for n ranks.
func serveStore(t *testing.T, n int) (*dist.Server, []*dist.Store) {
	t.Helper()
	srv, err := dist.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	stores := make([]*dist.Store, n)
	for r := range n {
		if stores[r], err = dist.Dial(context.Background(), srv.Addr(), r, n, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stores[r].Close() })
	}
	return srv, stores
}

// initAll makes n ranks' communicators over one fake net.
func initAll(t *testing.T, n int, stores []*dist.Store, o Options) ([]*Comm[[]float32], []*fakeLib) {
	t.Helper()
	net := newFakeNet()
	libs := make([]*fakeLib, n)
	comms := make([]*Comm[[]float32], n)
	for r := range n {
		libs[r] = net.lib()
	}
	for r, err := range onRanks(n, func(r int) error {
		var st Store
		if stores != nil {
			st = stores[r]
		}
		var err error
		comms[r], err = Init[[]float32](context.Background(), libs[r], st, r, n, Stream(100+r), o)
		return err
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms, libs
}

// TestAllReduceMeanIsTheTCPRingsMean runs the trainer's gradient average
// both ways on the same inputs — the CPU path (dist.AllReduceBuckets over
// the TCP ring, then ×1/N) and the NCCL path (rendezvous through a real
// dist store, bucketed groups, the fake's sums, scale(1/N)) — and wants
// the same bits, and the fake to have seen dist.Buckets' groups.
func TestAllReduceMeanIsTheTCPRingsMean(t *testing.T) {
	const n = 3
	port := freePort(t)
	tcp := make([]dist.Comm, n)
	for r, err := range onRanks(n, func(r int) error {
		env := dist.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
		var err error
		tcp[r], err = dist.Init(context.Background(), env, dist.Options{Timeout: 10 * time.Second})
		return err
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer onRanks(n, func(r int) error { return tcp[r].Close() })
	stores := make([]*dist.Store, n)
	for r := range n {
		var err error
		if stores[r], err = dist.Dial(context.Background(), fmt.Sprintf("127.0.0.1:%d", port), r, n, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		defer stores[r].Close()
	}
	const bucket = 4096
	comms, libs := initAll(t, n, stores, Options{BucketBytes: bucket, Timeout: 10 * time.Second})

	lens := []int{5, 0, 1000, 3, 40_000, 17, 17, 2500, 1}
	grads := func(r int) [][]float32 {
		var out [][]float32
		for k, l := range lens {
			b := make([]float32, l)
			for i := range b {
				// Sixteenths of small integers: exact in any summation order.
				b[i] = float32((r+1)*100+k*10+i%7) / 16
			}
			out = append(out, b)
		}
		return out
	}
	ring := make([][][]float32, n)
	for r, err := range onRanks(n, func(r int) error {
		ring[r] = grads(r)
		if err := dist.AllReduceBuckets(context.Background(), tcp[r], ring[r], bucket); err != nil {
			return err
		}
		inv := float32(1 / float64(n))
		for _, b := range ring[r] {
			for i := range b {
				b[i] *= inv
			}
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("TCP ring, rank %d: %v", r, err)
		}
	}
	dev := make([][][]float32, n)
	for r, err := range onRanks(n, func(r int) error {
		dev[r] = grads(r)
		return comms[r].AllReduceMean(context.Background(), dev[r], lens, func(i int, alpha float32) error {
			for k := range dev[r][i] {
				dev[r][i][k] *= alpha
			}
			return nil
		})
	}) {
		if err != nil {
			t.Fatalf("NCCL, rank %d: %v", r, err)
		}
	}
	for r := range n {
		for k := range lens {
			for i := range lens[k] {
				if dev[r][k][i] != ring[r][k][i] {
					t.Fatalf("rank %d tensor %d element %d: NCCL %v, TCP ring %v", r, k, i, dev[r][k][i], ring[r][k][i])
				}
			}
		}
		groups, aborts, _ := libs[r].counts()
		var want []int
		for _, b := range dist.Buckets(lens, 4, bucket) {
			want = append(want, len(b))
		}
		if fmt.Sprint(groups) != fmt.Sprint(want) || aborts != 0 {
			t.Errorf("rank %d: groups of %v all-reduces, %d aborts; want %v, 0", r, groups, aborts, want)
		}
	}
	for r, c := range comms {
		if err := c.Close(); err != nil {
			t.Errorf("rank %d: Close: %v", r, err)
		}
		if _, _, d := libs[r].counts(); d != 1 {
			t.Errorf("rank %d: %d ncclCommDestroy, want 1", r, d)
		}
		if err := c.Close(); err != nil {
			t.Errorf("rank %d: second Close: %v", r, err)
		}
	}
}

// TestOneRankNeedsNoStore: a job of one rank (NCCL forced at world size
// 1, to measure its cost) makes its id itself and reduces nothing away.
func TestOneRankNeedsNoStore(t *testing.T) {
	comms, libs := initAll(t, 1, nil, Options{})
	buf := []float32{1, 2, 3}
	scaled := false
	err := comms[0].AllReduceMean(context.Background(), [][]float32{buf}, []int{3}, func(int, float32) error { scaled = true; return nil })
	if err != nil || fmt.Sprint(buf) != "[1 2 3]" || scaled {
		t.Errorf("one rank: %v, %v, scaled %v", buf, err, scaled)
	}
	if g, _, _ := libs[0].counts(); fmt.Sprint(g) != "[1]" {
		t.Errorf("one rank: groups %v, want one all-reduce", g)
	}
	if comms[0].Version() != "2.21.5" {
		t.Errorf("Version = %q", comms[0].Version())
	}
}

func TestARankThatNeverJoinsIsNamed(t *testing.T) {
	for _, missing := range []int{2, 0} {
		const n = 3
		_, stores := serveStore(t, n)
		net := newFakeNet()
		join := 300 * time.Millisecond
		start := time.Now()
		errs := onRanks(n, func(r int) error {
			if r == missing {
				return nil
			}
			_, err := Init[[]float32](context.Background(), net.lib(), stores[r], r, n, 1, Options{JoinTimeout: join})
			return err
		})
		if took := time.Since(start); took > join+3*time.Second {
			t.Errorf("rank %d missing: the others failed after %v", missing, took)
		}
		want := fmt.Sprintf("rank %d of 3 did not join NCCL's rendezvous at %s within 300ms", missing, stores[0].Addr())
		if missing == 0 {
			want = fmt.Sprintf("rank 0 did not publish NCCL's unique id at %s within 300ms", stores[0].Addr())
		}
		for r, err := range errs {
			if r == missing {
				continue
			}
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dist.ErrTimeout) ||
				!strings.HasPrefix(err.Error(), fmt.Sprintf("nccl: rank %d of 3: ", r)) {
				t.Errorf("rank %d missing: rank %d's Init: %v, want … %q", missing, r, err, want)
			}
		}
	}
}

// TestAHungAllReduceIsAbortedWithinTheTimeout: rank 1 never makes the
// all-reduce (its process hangs), so rank 0's kernels would spin for
// ever; the watchdog aborts the communicator at the timeout.
func TestAHungAllReduceIsAbortedWithinTheTimeout(t *testing.T) {
	_, stores := serveStore(t, 2)
	timeout := 200 * time.Millisecond
	comms, libs := initAll(t, 2, stores, Options{Timeout: timeout})
	start := time.Now()
	err := comms[0].AllReduceSum(context.Background(), [][]float32{make([]float32, 10)}, []int{10})
	took := time.Since(start)
	var se *StallError
	if !errors.As(err, &se) || !errors.Is(err, dist.ErrTimeout) || se.Rank != 0 || se.Size != 2 ||
		!strings.Contains(err.Error(), "rank 0 of 2: NCCL all-reduce of 1 buckets (1 tensors, 10 elements) did not finish within 200ms") {
		t.Fatalf("hung all-reduce: %v", err)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("hung all-reduce failed after %v, timeout %v", took, timeout)
	}
	if _, aborts, _ := libs[0].counts(); aborts != 1 {
		t.Errorf("%d ncclCommAbort, want 1", aborts)
	}
	// The communicator is over: later calls answer the same error at
	// once, and Close does not touch the aborted (freed) communicator.
	if err2 := comms[0].AllReduceSum(context.Background(), [][]float32{make([]float32, 1)}, []int{1}); err2 != err {
		t.Errorf("after the abort: %v", err2)
	}
	if err := comms[0].Close(); err != nil {
		t.Errorf("Close after the abort: %v", err)
	}
	// The peer now sees the abort as NCCL's asynchronous error.
	err = comms[1].AllReduceSum(context.Background(), [][]float32{make([]float32, 10)}, []int{10})
	if err == nil || !strings.Contains(err.Error(), "ncclCommGetAsyncError: ncclRemoteError") || !strings.HasPrefix(err.Error(), "nccl: rank 1 of 2: ") {
		t.Errorf("rank 1 after rank 0's abort: %v", err)
	}
	comms[1].Close()
	if _, aborts, destroys := libs[1].counts(); aborts != 1 || destroys != 0 {
		t.Errorf("rank 1: %d aborts %d destroys, want 1, 0", aborts, destroys)
	}
}

// TestTheJobsFaultAbortsTheWait: the TCP communicator's fault, naming the
// dead rank, ends the wait long before the timeout.
func TestTheJobsFaultAbortsTheWait(t *testing.T) {
	_, stores := serveStore(t, 2)
	dead := &dist.PeerError{Rank: 1, Addr: "10.0.0.2:4000", What: "closed its connection"}
	var mu sync.Mutex
	var fault error
	time.AfterFunc(50*time.Millisecond, func() { mu.Lock(); fault = dead; mu.Unlock() })
	comms, libs := initAll(t, 2, stores, Options{Timeout: time.Minute, Fault: func() error { mu.Lock(); defer mu.Unlock(); return fault }})
	start := time.Now()
	err := comms[0].AllReduceSum(context.Background(), [][]float32{make([]float32, 10)}, []int{10})
	var pe *dist.PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || !strings.Contains(err.Error(), "rank 1 (10.0.0.2:4000) closed its connection") {
		t.Fatalf("fault: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the fault took %v to end the wait", time.Since(start))
	}
	if _, aborts, _ := libs[0].counts(); aborts != 1 {
		t.Errorf("%d aborts, want 1", aborts)
	}
	comms[1].Close()
}

// TestMismatchedCallsFail: ranks whose all-reduces differ get NCCL's
// ncclInvalidUsage, not a hang; arguments NCCL refuses fail at once.
func TestMismatchedCallsFail(t *testing.T) {
	_, stores := serveStore(t, 2)
	comms, _ := initAll(t, 2, stores, Options{Timeout: 5 * time.Second})
	errs := onRanks(2, func(r int) error {
		l := 4 + r
		return comms[r].AllReduceSum(context.Background(), [][]float32{make([]float32, l)}, []int{l})
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "ncclInvalidUsage (invalid usage): the ranks' calls differ") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// A length beyond the buffer: ncclInvalidArgument from the enqueue,
	// naming the tensor, and the communicator aborted.
	comms2, libs := initAll(t, 1, nil, Options{})
	err := comms2[0].AllReduceSum(context.Background(), [][]float32{make([]float32, 2), make([]float32, 3)}, []int{2, 9})
	if err == nil || !strings.Contains(err.Error(), "gradient 1 (9 elements, bucket 1 of 1): ncclAllReduce: ncclInvalidArgument") {
		t.Errorf("bad length: %v", err)
	}
	if _, aborts, _ := libs[0].counts(); aborts != 1 {
		t.Errorf("bad length: %d aborts, want 1", aborts)
	}
}

func TestInitChecksItsArguments(t *testing.T) {
	lib := newFakeNet().lib()
	for _, c := range []struct {
		rank, size int
		stream     Stream
		store      Store
		want       string
	}{
		{2, 2, 1, nil, "rank 2 of 2: want 0 ≤ rank < size"},
		{0, 1, 0, nil, "no stream"},
		{0, 2, 1, nil, "no store"},
	} {
		_, err := Init[[]float32](context.Background(), lib, c.store, c.rank, c.size, c.stream, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Init(rank %d, size %d, stream %d): %v, want %q", c.rank, c.size, c.stream, err, c.want)
		}
	}
}

func TestErrorStrings(t *testing.T) {
	for r, want := range map[Result]string{
		Success: "ncclSuccess", UnhandledCudaError: "ncclUnhandledCudaError", SystemError: "ncclSystemError",
		InternalError: "ncclInternalError", InvalidArgument: "ncclInvalidArgument", InvalidUsage: "ncclInvalidUsage",
		RemoteError: "ncclRemoteError", InProgress: "ncclInProgress", Timeout: "ncclTimeout", 42: "ncclResult 42",
	} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d) = %q, want %q", int(r), got, want)
		}
	}
	e := &Error{Call: "ncclCommInitRank", Result: SystemError, Text: "unhandled system error"}
	if got := e.Error(); !strings.HasPrefix(got, "ncclCommInitRank: ncclSystemError (unhandled system error): a system call or the network failed") {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Call: "ncclGroupEnd", Result: InternalError}).Error(); got != "ncclGroupEnd: ncclInternalError" {
		t.Errorf("Error() = %q", got)
	}
	for code, want := range map[int]string{2708: "2.7.8", 21903: "2.19.3", 22105: "2.21.5"} {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", code, got, want)
		}
	}
	if Float32.Size() != 4 || BFloat16.Size() != 2 || Float32.String() != "ncclFloat32" || int(BFloat16) != 9 {
		t.Error("data types")
	}
}
