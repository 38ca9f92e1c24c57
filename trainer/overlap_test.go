package trainer

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/nn"
)

// overlapRank is one rank of a small data-parallel training driven step
// by step: its own model (the same seed on every rank), learner, data.
type overlapRank struct {
	dev   nn.Device
	model *nn.UNet
	l     *nn.Learner
	rng   *rand.Rand
}

func newOverlapRank(t testing.TB, rank int) *overlapRank {
	return newRank(t, rank, []int{4, 8, 8}, [3]int{8, 8, 8})
}

// newRank is one rank's U-Net of features (deep supervision on, the same
// weights on every rank) with a learner for batches of one patch.
func newRank(t testing.TB, rank int, features []int, patch [3]int) *overlapRank {
	t.Helper()
	dev := cpu.New(cpu.Options{Threads: 1})
	mc := config.Default().Model
	mc.Features = features
	mc.DeepSupervision = true
	m, err := nn.NewUNet(dev, mc, 5)
	if err != nil {
		t.Fatal(err)
	}
	l, err := nn.NewLearner(m, 1, patch, config.Default().Loss, config.Default().Optim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Free(); m.Free() })
	return &overlapRank{dev: dev, model: m, l: l, rng: rand.New(rand.NewPCG(uint64(rank), 9))}
}

// step trains one step on a fresh random batch of this rank's.
func (o *overlapRank) step() error {
	x, y := o.dev.Alloc(o.l.WS.InputShape()), o.dev.Alloc(o.l.WS.LabelShape())
	defer o.dev.Free(x)
	defer o.dev.Free(y)
	xd, yd := x.(hostData).Data(), y.(hostData).Data()
	for i := range xd {
		xd[i] = float32(o.rng.NormFloat64())
		if xd[i] > 0.5 {
			yd[i] = 1
		}
	}
	_, err := o.l.Step(x, y, 0.01)
	return err
}

func (o *overlapRank) weights(t *testing.T) []nn.HostTensor {
	w, err := nn.ExportParams(o.dev, o.model.Params())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// spySync wraps a hostSync to see the step from outside: how many buckets
// had started before the backward pass's last layer, and a hook in the
// pass.
type spySync struct {
	*hostSync
	beforeLast []int       // per step: buckets launched before the last Ready
	onReady    func(n int) // called after each Ready with the count so far
	ready      int
	prev       int // buckets launched before the latest Ready
}

func (s *spySync) Begin() {
	s.hostSync.Begin()
	s.prev = 0
}

func (s *spySync) Ready(ps []*nn.Param) {
	s.prev = s.tracker.Launched()
	s.hostSync.Ready(ps)
	s.ready++
	if s.onReady != nil {
		s.onReady(s.ready)
	}
}

func (s *spySync) Finish() error {
	s.beforeLast = append(s.beforeLast, s.prev)
	return s.hostSync.Finish()
}

// Two ranks training with the overlapped reduction end with the weights
// of the synchronous one, bit for bit (the same buckets, in the same
// order, through the same calls); every rank launches every bucket once
// per step in the same order, the first ones while backward still runs.
func TestOverlappedReductionIsTheSynchronousOneBitForBit(t *testing.T) {
	const n, steps, bucketBytes = 2, 3, 4 << 10
	train := func(overlap bool) (weights [][]nn.HostTensor, launches [][]int, early [][]int, buckets int) {
		comms := startJob(t, n)
		defer func() {
			for _, c := range comms {
				go c.Close()
			}
		}()
		weights, launches, early = make([][]nn.HostTensor, n), make([][]int, n), make([][]int, n)
		ranks := make([]*overlapRank, n)
		spies := make([]*spySync, n)
		for r := range n {
			ranks[r] = newOverlapRank(t, r)
			j := &job{comm: comms[r], ctx: context.Background(), bucketBytes: bucketBytes}
			if !overlap {
				ranks[r].l.ReduceGrads = func(ps []*nn.Param) error { return j.reduceGrads(ranks[r].dev, ps) }
				continue
			}
			gs, err := j.gradSync(ranks[r].model.Params(), true)
			if err != nil {
				t.Fatal(err)
			}
			hs := gs.(*hostSync)
			buckets = len(hs.tracker.Buckets())
			hs.onBucket = func(k int) { launches[r] = append(launches[r], k) }
			spies[r] = &spySync{hostSync: hs}
			ranks[r].l.Sync = spies[r]
		}
		for r, err := range onRanksErr(n, func(r int) error {
			for range steps {
				if err := ranks[r].step(); err != nil {
					return err
				}
			}
			return nil
		}) {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		for r := range n {
			weights[r] = ranks[r].weights(t)
			if spies[r] != nil {
				early[r] = spies[r].beforeLast
			}
		}
		return weights, launches, early, buckets
	}
	want, _, _, _ := train(false)
	got, launches, early, buckets := train(true)
	if buckets < 3 {
		t.Fatalf("%d buckets: the test wants several", buckets)
	}
	for r := range n {
		for i := range want[r] {
			if !slices.Equal(got[r][i].Data, want[r][i].Data) {
				t.Fatalf("rank %d: %s after %d overlapped steps differs from the synchronous path's", r, want[r][i].Name, steps)
			}
			if !slices.Equal(got[r][i].Data, got[0][i].Data) {
				t.Fatalf("rank %d's %s differs from rank 0's", r, want[r][i].Name)
			}
		}
		var order []int
		for range steps {
			for k := range buckets {
				order = append(order, k)
			}
		}
		if !slices.Equal(launches[r], order) {
			t.Errorf("rank %d launched buckets %v, want 0…%d once per step", r, launches[r], buckets-1)
		}
		// The last layers' buckets are complete long before the first
		// layer's gradients: they start while backward runs.
		if len(early[r]) != steps || slices.Min(early[r]) < 1 || slices.Max(early[r]) >= buckets {
			t.Errorf("rank %d: buckets launched before each backward pass's last layer %v, want between 1 and %d", r, early[r], buckets-1)
		}
	}
}

// A rank that dies during the backward pass ends the others' step with
// dist's *PeerError naming it, and no background goroutine outlives the
// step, on either rank.
func TestDeadRankDuringBackwardEndsTheStepNamingIt(t *testing.T) {
	const n = 2
	comms := startJob(t, n)
	defer func() {
		for _, c := range comms {
			go c.Close()
		}
	}()
	ranks := make([]*overlapRank, n)
	for r := range n {
		ranks[r] = newOverlapRank(t, r)
		j := &job{comm: comms[r], ctx: context.Background(), bucketBytes: 4 << 10}
		gs, err := j.gradSync(ranks[r].model.Params(), true)
		if err != nil {
			t.Fatal(err)
		}
		spy := &spySync{hostSync: gs.(*hostSync)}
		if r == 1 {
			// Rank 1 leaves the job in the middle of its backward pass.
			spy.onReady = func(k int) {
				if k == 4 {
					comms[1].Close()
				}
			}
		}
		ranks[r].l.Sync = spy
	}
	errs := onRanksErr(n, func(r int) error { return ranks[r].step() })
	var pe *dist.PeerError
	if !errors.As(errs[0], &pe) || pe.Rank != 1 || !strings.HasPrefix(errs[0].Error(), "train step: gradients: rank 1 ") {
		t.Errorf("rank 0: %v, want the step failed by dist's PeerError naming rank 1", errs[0])
	}
	if errs[1] == nil {
		t.Error("rank 1: its step succeeded after it left the job")
	}
	// The background goroutines have ended (Finish waited for them): no
	// stack is left in hostSync.reduce. A goroutine that has just handed
	// over its result may still be returning; allow it a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "(*hostSync).reduce") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a hostSync.reduce goroutine outlived its step:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A job of one process, overlap switched off, and a device's own reducer
// keep the synchronous path; VOXTRAIN_DIST_OVERLAP takes 0 and 1 only.
func TestGradSyncChoice(t *testing.T) {
	var nilJob *job
	if s, err := nilJob.gradSync(nil, true); s != nil || err != nil {
		t.Errorf("one process: %v %v", s, err)
	}
	one := &job{comm: dist.Single{}, ctx: context.Background()}
	if s, _ := one.gradSync(nil, true); s != nil {
		t.Error("a job of one rank overlaps")
	}
	two := &job{comm: &fakeNCCL{Comm: sizeTwo{}}, ctx: context.Background()}
	if s, _ := two.gradSync(nil, true); s != nil {
		t.Error("a device reducer without NewGradSync got the host path")
	}
	host := &job{comm: sizeTwo{}, ctx: context.Background()}
	p := &nn.Param{Name: "w", G: cpu.New(cpu.Options{Threads: 1}).Alloc(nn.Shape{3})}
	if s, err := host.gradSync([]*nn.Param{p}, true); err != nil || s == nil {
		t.Errorf("host gradients: %v %v, want the overlapped path", s, err)
	}
	if s, _ := host.gradSync([]*nn.Param{p}, false); s != nil {
		t.Error("overlap off: got an overlapped reduction")
	}
	env := func(v string) func(string) string { return func(string) string { return v } }
	for v, want := range map[string]bool{"": true, "1": true, "0": false} {
		if got, err := distOverlap(env(v)); got != want || err != nil {
			t.Errorf("%q: %v %v", v, got, err)
		}
	}
	if _, err := distOverlap(env("yes")); err == nil || !strings.Contains(err.Error(), `VOXTRAIN_DIST_OVERLAP="yes": want 1`) {
		t.Errorf("yes: %v", err)
	}
}

// sizeTwo is a communicator of two ranks that is never called.
type sizeTwo struct{ dist.Single }

func (sizeTwo) Size() int { return 2 }

// BenchmarkTwoRankStep times one training step of two ranks (goroutines,
// one CPU thread each, over localhost TCP) with the gradients reduced
// after the backward pass and overlapped with it (docs/BENCHMARKS.md).
func BenchmarkTwoRankStep(b *testing.B) {
	for _, tc := range []struct {
		name        string
		overlap     bool
		bucketBytes int
	}{
		{"sync/25MiB", false, 0}, {"overlap/25MiB", true, 0},
		{"sync/4MiB", false, 4 << 20}, {"overlap/4MiB", true, 4 << 20},
	} {
		overlap := tc.overlap
		b.Run(tc.name, func(b *testing.B) {
			const n = 2
			comms := startJob(b, n)
			defer func() {
				for _, c := range comms {
					go c.Close()
				}
			}()
			ranks := make([]*overlapRank, n)
			for r := range n {
				// 4.1 M parameters (16.6 MB of gradients: one bucket
				// at DDP's 25 MiB, five at 4 MiB), a 32³ patch.
				ranks[r] = newRank(b, r, []int{16, 32, 64, 128, 160}, [3]int{32, 32, 32})
				j := &job{comm: comms[r], ctx: context.Background(), bucketBytes: tc.bucketBytes}
				if overlap {
					gs, err := j.gradSync(ranks[r].model.Params(), true)
					if err != nil {
						b.Fatal(err)
					}
					ranks[r].l.Sync = gs
				} else {
					ranks[r].l.ReduceGrads = func(ps []*nn.Param) error { return j.reduceGrads(ranks[r].dev, ps) }
				}
			}
			b.ResetTimer()
			for r, err := range onRanksErr(n, func(r int) error {
				for range b.N {
					if err := ranks[r].step(); err != nil {
						return err
					}
				}
				return nil
			}) {
				if err != nil {
					b.Fatalf("rank %d: %v", r, err)
				}
			}
		})
	}
}
