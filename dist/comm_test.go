package dist

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freePort is a TCP port nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJob joins n ranks, goroutines of this process over localhost TCP.
func startJob(t *testing.T, n int, opts Options) []Comm {
	t.Helper()
	port := freePort(t)
	comms := make([]Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
			comms[r], errs[r] = Init(context.Background(), env, opts)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() { closeAll(comms) })
	return comms
}

// closeAll closes the ranks together, as the processes of a job do.
func closeAll(comms []Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
}

// onAll runs f on every rank at once and returns their errors.
func onAll(comms []Comm, f func(r int, c Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r, c) }()
	}
	wg.Wait()
	return errs
}

// referenceSum is the documented order: chunk c of n, a left fold in
// float32 over ranks c, c+1, …, c+n−1 (mod n).
func referenceSum(inputs [][]float32) []float32 {
	n, L := len(inputs), len(inputs[0])
	out := make([]float32, L)
	for c := range n {
		for i := c * L / n; i < (c+1)*L/n; i++ {
			acc := inputs[c][i]
			for k := 1; k < n; k++ {
				acc += inputs[(c+k)%n][i]
			}
			out[i] = acc
		}
	}
	return out
}

func TestAllReduceSumIsTheSameBitsOnEveryRank(t *testing.T) {
	for _, n := range []int{2, 3} {
		comms := startJob(t, n, Options{Timeout: 10 * time.Second})
		for _, L := range []int{1, 2, 7, 1000, 300_001} {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(L)))
			inputs := make([][]float32, n)
			for r := range inputs {
				inputs[r] = make([]float32, L)
				for i := range inputs[r] {
					// Magnitudes far apart, so the order of the terms shows.
					inputs[r][i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8))))
				}
			}
			want := referenceSum(inputs)
			bufs := make([][]float32, n)
			for r := range bufs {
				bufs[r] = append([]float32(nil), inputs[r]...)
			}
			for r, err := range onAll(comms, func(r int, c Comm) error { return c.AllReduceSum(context.Background(), bufs[r]) }) {
				if err != nil {
					t.Fatalf("%d ranks, %d elements, rank %d: %v", n, L, r, err)
				}
			}
			for r := range bufs {
				for i := range want {
					if math.Float32bits(bufs[r][i]) != math.Float32bits(want[i]) {
						t.Fatalf("%d ranks, %d elements: rank %d element %d is %v, the fixed-order sum %v", n, L, r, i, bufs[r][i], want[i])
					}
				}
			}
		}
		// Broadcast from each root, and a barrier.
		for root := range n {
			bufs := make([][]byte, n)
			for r := range bufs {
				bufs[r] = []byte(fmt.Sprintf("rank %d's bytes", r))
			}
			for r, err := range onAll(comms, func(r int, c Comm) error { return c.Broadcast(context.Background(), bufs[r], root) }) {
				if err != nil || string(bufs[r]) != fmt.Sprintf("rank %d's bytes", root) {
					t.Fatalf("broadcast from %d: rank %d holds %q, %v", root, r, bufs[r], err)
				}
			}
		}
		for r, err := range onAll(comms, func(_ int, c Comm) error { return c.Barrier(context.Background()) }) {
			if err != nil {
				t.Fatalf("barrier, rank %d: %v", r, err)
			}
		}
		closeAll(comms)
	}
}

func TestAllReduceBuckets(t *testing.T) {
	const n = 3
	comms := startJob(t, n, Options{Timeout: 10 * time.Second})
	sizes := []int{5, 0, 1000, 3, 40_000, 17, 17, 2500, 1}
	bufs := make([][][]float32, n)
	for r := range n {
		for k, s := range sizes {
			b := make([]float32, s)
			for i := range b {
				// Small integers: any order of the terms sums them exactly.
				b[i] = float32((r+1)*1000 + k*10 + i%7)
			}
			bufs[r] = append(bufs[r], b)
		}
	}
	// 4 KB buckets: several tensors share one, the 40 000 goes alone.
	for r, err := range onAll(comms, func(r int, c Comm) error { return AllReduceBuckets(context.Background(), c, bufs[r], 4096) }) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		for k, s := range sizes {
			for i := range s {
				want := float32(6000 + n*(k*10+i%7))
				if got := bufs[r][k][i]; got != want {
					t.Fatalf("rank %d tensor %d element %d: %v, want %v", r, k, i, got, want)
				}
			}
		}
	}
	// One rank alone: nothing to do, nothing changed.
	one := [][]float32{{1, 2}}
	if err := AllReduceBuckets(context.Background(), Single{}, one, 0); err != nil || one[0][1] != 2 {
		t.Errorf("single rank: %v %v", one, err)
	}
}

// kill makes rank c vanish as a dead process does: every connection
// closed, no goodbye (the store too, for rank 0).
func kill(c Comm) {
	t := c.(*tcpComm)
	t.closing.Store(true)
	for _, conn := range []net.Conn{t.watch.conn, t.store.conn, t.next, t.prev} {
		conn.Close()
	}
	t.ln.Close()
	if t.server != nil {
		t.server.Close()
	}
}

func TestARankThatDiesFailsEveryOtherRankNamingIt(t *testing.T) {
	for _, dead := range []int{1, 0} {
		const n = 3
		timeout := 5 * time.Second
		comms := startJob(t, n, Options{Timeout: timeout})
		for r, c := range comms {
			if f := c.(*tcpComm).Fault(); f != nil {
				t.Fatalf("rank %d: Fault() = %v before any fault", r, f)
			}
		}
		addr := comms[dead].(*tcpComm).addrs[dead]
		start := time.Now()
		errs := onAll(comms, func(r int, c Comm) error {
			if r == dead {
				time.Sleep(50 * time.Millisecond) // the others wait in the call
				kill(c)
				return nil
			}
			return c.AllReduceSum(context.Background(), make([]float32, 1000))
		})
		if time.Since(start) > timeout {
			t.Errorf("rank %d dead: the others failed after %v, beyond the %v timeout", dead, time.Since(start), timeout)
		}
		for r, err := range errs {
			if r == dead {
				continue
			}
			var pe *PeerError
			want := fmt.Sprintf("rank %d (%s) closed its connection", dead, addr)
			if !errors.As(err, &pe) || pe.Rank != dead || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "during all-reduce") {
				t.Errorf("rank %d dead: rank %d's all-reduce returned %v, want %q … during all-reduce", dead, r, err, want)
			}
			// Fault reports it without a call (the NCCL watchdog polls it).
			if f := comms[r].(*tcpComm).Fault(); f == nil || !strings.HasPrefix(f.Error(), want) {
				t.Errorf("rank %d dead: rank %d's Fault() = %v, want %q …", dead, r, f, want)
			}
			// The job is over: later calls fail at once with the same fault.
			if err2 := comms[r].Barrier(context.Background()); err2 == nil || !strings.Contains(err2.Error(), want) || !strings.HasSuffix(err2.Error(), "during barrier") {
				t.Errorf("rank %d's barrier after the fault: %v", r, err2)
			}
		}
	}
}

func TestARankThatStallsIsNamedByEveryRank(t *testing.T) {
	const n, stalled = 3, 2
	// Long enough that a loaded CI machine does not delay a healthy
	// rank past it (which would blame the wrong rank).
	timeout := time.Second
	comms := startJob(t, n, Options{Timeout: timeout})
	addr := comms[stalled].(*tcpComm).addrs[stalled]
	release := make(chan struct{})
	start := time.Now()
	errs := onAll(comms, func(r int, c Comm) error {
		if r == stalled {
			<-release // alive, connected, but not calling
			return c.Barrier(context.Background())
		}
		defer func() {
			if r == 0 {
				close(release)
			}
		}()
		return c.Barrier(context.Background())
	})
	elapsed := time.Since(start)
	want := fmt.Sprintf("rank %d (%s) sent nothing for 1s during barrier", stalled, addr)
	for r, err := range errs {
		if err == nil || err.Error() != want {
			t.Errorf("rank %d: %v, want %q", r, err, want)
		}
	}
	if elapsed > 60*timeout { // a hang guard, not a timing: the call must end
		t.Errorf("the stall was reported after %v (timeout %v)", elapsed, timeout)
	}
}

func TestMismatchedCallsNameBoth(t *testing.T) {
	comms := startJob(t, 2, Options{Timeout: 5 * time.Second})
	errs := onAll(comms, func(r int, c Comm) error {
		if r == 0 {
			return c.AllReduceSum(context.Background(), make([]float32, 10))
		}
		return c.AllReduceSum(context.Background(), make([]float32, 12))
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "every rank must make the same calls") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestJoinTimeoutNamesTheMissingRanks(t *testing.T) {
	port := freePort(t)
	env := Env{Rank: 0, WorldSize: 3, LocalWorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port}
	_, err := Init(context.Background(), env, Options{JoinTimeout: 200 * time.Millisecond})
	want := fmt.Sprintf("ranks 1, 2 of 3 did not join 127.0.0.1:%d within 200ms", port)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
	// Rank 1 alone: rank 0 never starts the store.
	env.Rank = 1
	_, err = Init(context.Background(), env, Options{JoinTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), fmt.Sprintf("rank 1 of 3 could not reach the store at 127.0.0.1:%d", port)) {
		t.Errorf("%v", err)
	}
}

func TestCancelledCallFails(t *testing.T) {
	comms := startJob(t, 2, Options{Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	// Rank 1 never calls: rank 0's call ends with its context.
	if err := comms[0].Barrier(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled barrier: %v", err)
	}
}

func TestSingle(t *testing.T) {
	c, err := Init(context.Background(), Env{WorldSize: 1}, Options{})
	if err != nil || c.Rank() != 0 || c.Size() != 1 {
		t.Fatal(c, err)
	}
	b := []float32{1.5}
	if c.AllReduceSum(context.Background(), b) != nil || b[0] != 1.5 || c.Barrier(context.Background()) != nil {
		t.Error("single rank changed its buffer")
	}
	if err := c.Broadcast(context.Background(), nil, 1); err == nil {
		t.Error("broadcast from rank 1 of 1 accepted")
	}
}

func TestBuckets(t *testing.T) {
	// 16-byte buckets of float32 (4 elements), tensors taken last first.
	got := Buckets([]int{1, 2, 0, 9, 1, 3}, 4, 16)
	want := [][]int{{5, 4}, {3}, {1, 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Buckets = %v, want %v", got, want)
	}
	// bf16 halves the bytes: twice the elements fit.
	if got := Buckets([]int{4, 4}, 2, 16); fmt.Sprint(got) != "[[1 0]]" {
		t.Errorf("bf16 buckets = %v, want [[1 0]]", got)
	}
	if got := Buckets(nil, 4, 0); len(got) != 0 {
		t.Errorf("no tensors: %v", got)
	}
}
