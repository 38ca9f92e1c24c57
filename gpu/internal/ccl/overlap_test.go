package ccl

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/dist"
)

// overlapGrads is rank r's gradients of lens (distinct lengths name the
// tensors in the fake's launch record), values that round in float32.
func overlapGrads(r int, lens []int) [][]float32 {
	var out [][]float32
	for k, l := range lens {
		b := make([]float32, l)
		for i := range b {
			b[i] = float32(math.Sin(float64(r*1000+k*100+i))) / 3
		}
		out = append(out, b)
	}
	return out
}

func scaleHost(bufs [][]float32) func(i int, alpha float32) error {
	return func(i int, alpha float32) error {
		for k := range bufs[i] {
			bufs[i][k] *= alpha
		}
		return nil
	}
}

// The overlapped reduction launches each bucket's group once, in the
// plan's order, on every rank, each after its own stream-ordering call
// and as soon as its tensors are ready (during the backward pass, before
// Finish), whatever order the tensors come in; its means are the
// synchronous AllReduceMean's, bit for bit, step after step.
func TestOverlapLaunchesInOrderAndEqualsAllReduceMean(t *testing.T) {
	const n = 2
	_, stores := serveStore(t, n)
	lens := []int{3, 0, 5, 2, 7, 4, 6}
	o := Options{BucketBytes: 8 * 4, Timeout: 10 * time.Second}
	syncComms, _ := initAll(t, n, stores, o)
	_, stores2 := serveStore(t, n)
	comms, libs := initAll(t, n, stores2, o)

	want := make([][][]float32, n)
	for r, err := range onRanks(n, func(r int) error {
		want[r] = overlapGrads(r, lens)
		return syncComms[r].AllReduceMean(context.Background(), want[r], lens, scaleHost(want[r]))
	}) {
		if err != nil {
			t.Fatalf("synchronous rank %d: %v", r, err)
		}
	}
	// A backward-like order: last tensors first, but not exactly.
	readyOrder := []int{6, 4, 5, 2, 3, 1, 0}
	var plan [][]int
	got := make([][][]float32, n)
	befores := make([][]int, n)
	early := make([]int, n)
	for r, err := range onRanks(n, func(r int) error {
		got[r] = overlapGrads(r, lens)
		var ov *Overlap[[]float32]
		var err error
		ov, err = comms[r].NewOverlap(got[r], lens, func() error {
			g, _, _ := libs[r].counts()
			befores[r] = append(befores[r], len(g)) // groups launched before this one
			return nil
		})
		if err != nil {
			return err
		}
		if r == 0 {
			plan = ov.Buckets()
		}
		for step := range 2 {
			if step == 1 { // the means again, from fresh gradients in the same memory
				for k, b := range overlapGrads(r, lens) {
					copy(got[r][k], b)
				}
			}
			ov.Begin()
			for k, i := range readyOrder {
				ov.Ready(i)
				if k == 3 && step == 0 {
					g, _, _ := libs[r].counts()
					early[r] = len(g)
				}
			}
			if err := ov.Finish(context.Background(), scaleHost(got[r])); err != nil {
				return err
			}
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("overlapped rank %d: %v", r, err)
		}
	}
	if len(plan) < 3 {
		t.Fatalf("plan %v: the test wants several buckets", plan)
	}
	var counts []int
	for range 2 {
		for _, b := range plan {
			for _, i := range b {
				counts = append(counts, lens[i])
			}
		}
	}
	for r := range n {
		if l := libs[r].launched(); !slices.Equal(l, counts) {
			t.Errorf("rank %d launched all-reduces of %v, want the plan %v's %v twice", r, l, plan, counts)
		}
		var groups []int
		for g := range 2 * len(plan) {
			groups = append(groups, g)
		}
		if !slices.Equal(befores[r], groups) {
			t.Errorf("rank %d: stream ordered before groups %v, want once before each (%v)", r, befores[r], groups)
		}
		if early[r] < 1 || early[r] >= len(plan) {
			t.Errorf("rank %d: %d of %d groups launched after 4 of 7 tensors, want some but not all", r, early[r], len(plan))
		}
		for k := range lens {
			if !slices.Equal(got[r][k], want[r][k]) {
				t.Errorf("rank %d tensor %d: overlapped %v, synchronous %v", r, k, got[r][k], want[r][k])
			}
		}
	}
}

// A rank that dies in the middle of its backward pass (its communicator
// aborted, as the process's exit does) ends the other's Finish through
// the watchdog with NCCL's asynchronous error and the job's fault naming
// it, long before the timeout; a tensor reported twice fails Finish.
func TestOverlapPeerDiesMidBackward(t *testing.T) {
	const n = 2
	_, stores := serveStore(t, n)
	dead := &dist.PeerError{Rank: 1, Addr: "10.0.0.2:4000", What: "closed its connection"}
	var mu sync.Mutex
	var fault error
	comms, libs := initAll(t, n, stores, Options{BucketBytes: 8 * 4, Timeout: time.Minute, Fault: func() error { mu.Lock(); defer mu.Unlock(); return fault }})
	lens := []int{3, 5, 2, 7}
	start := time.Now()
	errs := onRanks(n, func(r int) error {
		bufs := overlapGrads(r, lens)
		ov, err := comms[r].NewOverlap(bufs, lens, func() error { return nil })
		if err != nil {
			return err
		}
		ov.Begin()
		for _, i := range []int{3, 2, 1, 0} {
			if r == 1 && i == 1 {
				comms[1].fail(errors.New("killed"))
				mu.Lock()
				fault = dead
				mu.Unlock()
				return nil
			}
			ov.Ready(i)
		}
		return ov.Finish(context.Background(), scaleHost(bufs))
	})
	var pe *dist.PeerError
	if !errors.As(errs[0], &pe) || pe.Rank != 1 || !strings.HasPrefix(errs[0].Error(), "nccl: rank 0 of 2: NCCL overlapped all-reduce") {
		t.Fatalf("rank 0: %v, want the fault naming rank 1", errs[0])
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the dead peer took %v to end the wait", time.Since(start))
	}
	if _, aborts, _ := libs[0].counts(); aborts != 1 {
		t.Errorf("rank 0: %d aborts, want 1", aborts)
	}

	_, stores2 := serveStore(t, 1)
	one, _ := initAll(t, 1, stores2[:1], Options{})
	bufs := overlapGrads(0, lens)
	ov, err := one[0].NewOverlap(bufs, lens, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ov.Begin()
	ov.Ready(3)
	ov.Ready(3)
	if err := ov.Finish(context.Background(), scaleHost(bufs)); err == nil || !strings.Contains(err.Error(), "reported ready twice") {
		t.Errorf("a tensor reported twice: %v", err)
	}
}
