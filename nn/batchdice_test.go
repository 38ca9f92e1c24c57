package nn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// fakeRanks is an all-reduce of float64 sums between goroutines standing
// for the ranks of a job: every rank's call waits for the others', and all
// get the sum in rank order. It counts each rank's calls.
type fakeRanks struct {
	in, out []chan []float64
	calls   []int
	done    chan struct{}
}

func newFakeRanks(n int) *fakeRanks {
	f := &fakeRanks{in: make([]chan []float64, n), out: make([]chan []float64, n), calls: make([]int, n), done: make(chan struct{})}
	for r := range n {
		f.in[r], f.out[r] = make(chan []float64), make(chan []float64, 1)
	}
	go func() {
		for {
			var total []float64
			for r := range n {
				var xs []float64
				select {
				case xs = <-f.in[r]:
				case <-f.done:
					return
				}
				if total == nil {
					total = make([]float64, len(xs))
				}
				for i := range xs {
					total[i] += xs[i]
				}
			}
			for r := range n {
				f.out[r] <- total
			}
		}
	}()
	return f
}

// sum is rank r's reducer for Criterion.SetBatchReducer.
func (f *fakeRanks) sum(r int) func([]float64) error {
	return func(xs []float64) error {
		f.calls[r]++
		f.in[r] <- append([]float64(nil), xs...)
		copy(xs, <-f.out[r])
		return nil
	}
}

// TestBatchDiceOverRanks: ranks each computing the loss of their share of
// a batch, their batch Dice sums reduced over the ranks, get the single
// process's Dice of the whole batch, a mean loss equal to its loss, and
// logit gradients ranks times its gradient on their samples (the job
// averages the ranks' parameter gradients): softmax (with and without
// the background class) and multi-label, three outputs of deep
// supervision of which two weigh, so two reductions per rank. Without the
// reducer each rank's Dice is its own batch's, which differs.
func TestBatchDiceOverRanks(t *testing.T) {
	const ranks, b = 2, 2 // per rank; the single process takes ranks·b
	for _, tc := range []struct {
		name    string
		cfg     config.Loss
		classes int
		labels  int // labels are drawn from [0, labels)
		// ignore255 sets every 5th voxel to 255 (dice_bce's ignore byte).
		ignore255 bool
		// unknown, per sample of the whole batch, the classes its crop
		// does not annotate (nil: none; the criteria then AllowUnknown).
		unknown []uint8
	}{
		{"dice_ce", loss("dice_ce", func(l *config.Loss) { l.BatchDice = true }), 3, 3, false, nil},
		{"dice with background", loss("dice", func(l *config.Loss) { l.BatchDice, l.DoBackground = true, true }), 3, 3, false, nil},
		{"dice_bce", loss("dice_bce", func(l *config.Loss) { l.BatchDice = true }), 2, 4, false, nil},
		// With an ignore label the ranks keep different numbers of voxels:
		// the cross-entropy's mean must be over the global batch's kept
		// voxels, with per-sample and with batch Dice.
		{"dice_ce, ignore label", loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = new(int); *l.IgnoreLabel = 3 }), 3, 4, false, nil},
		{"dice_ce, ignore label, batch Dice", loss("dice_ce", func(l *config.Loss) { l.BatchDice, l.IgnoreLabel = true, new(int); *l.IgnoreLabel = 3 }), 3, 4, false, nil},
		{"dice_bce, ignore", loss("dice_bce", func(l *config.Loss) { l.IgnoreLabel = new(int); *l.IgnoreLabel = 255 }), 2, 4, true, nil},
		// Unknown classes: the ranks know different numbers of (sample,
		// class) pairs, so the BCE's count and the per-sample Dice's mean
		// are the global batch's only when summed over the ranks; with
		// batch Dice class 1 is unknown in all of rank 0's samples.
		{"dice_bce, unknown classes", loss("dice_bce", nil), 3, 8, false, []uint8{0b010, 0b011, 0, 0b100}},
		{"dice_bce, unknown classes, batch Dice, ignore", loss("dice_bce", func(l *config.Loss) { l.BatchDice, l.IgnoreLabel = true, new(int); *l.IgnoreLabel = 255 }), 3, 8, true, []uint8{0b010, 0b110, 0, 0b001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := cpu.New(cpu.Options{Threads: 1})
			rng := rand.New(rand.NewPCG(11, 4))
			shapes := func(n int) []nn.Shape {
				return []nn.Shape{{n, 8, 8, 8, tc.classes}, {n, 4, 4, 4, tc.classes}, {n, 2, 2, 2, tc.classes}}
			}
			all := shapes(ranks * b)
			z := make([][]float32, len(all))
			for i, s := range all {
				z[i] = randn(rng, s.Len(), 1.5)
			}
			lab := randomLabels(rng, ranks*b, 8, 8, 8, tc.labels)
			if tc.ignore255 {
				for i := range lab {
					if i%5 == 0 {
						lab[i] = 255
					}
				}
			}
			if tc.cfg.Ignore() >= 0 {
				// Uneven shares of ignored voxels: most in rank 0's samples.
				for i := range lab[:len(lab)/4] {
					if i%2 == 0 {
						lab[i] = float32(tc.cfg.Ignore())
					}
				}
			}

			// compute evaluates a criterion on samples [lo, lo+n) and
			// returns its loss and gradients.
			compute := func(crit *nn.Criterion, lo, n int) (nn.LossValue, [][]float32) {
				outs := make([]nn.Tensor, len(all))
				for i, s := range shapes(n) {
					per := s.Len() / n
					outs[i] = upload(t, dev, s, z[i][lo*per:(lo+n)*per])
				}
				per := 8 * 8 * 8
				if tc.unknown != nil {
					crit.SetUnknown(tc.unknown[lo : lo+n])
				}
				v, err := crit.Compute(outs, upload(t, dev, nn.Shape{n, 8, 8, 8}, lab[lo*per:(lo+n)*per]))
				if err != nil {
					t.Error(err)
					return v, nil
				}
				var g [][]float32
				for _, d := range crit.Grads() {
					g = append(g, download(t, dev, d))
				}
				return v, g
			}
			newCrit := func(n int) *nn.Criterion {
				c, err := nn.NewCriterion(dev, tc.cfg, shapes(n))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Free)
				if tc.unknown != nil {
					if err := c.AllowUnknown(); err != nil {
						t.Fatal(err)
					}
				}
				return c
			}
			want, wantG := compute(newCrit(ranks*b), 0, ranks*b)

			f := newFakeRanks(ranks)
			defer close(f.done)
			got := make([]nn.LossValue, ranks)
			gotG := make([][][]float32, ranks)
			alone := make([]nn.LossValue, ranks)
			var wg sync.WaitGroup
			for r := range ranks {
				crit, solo := newCrit(b), newCrit(b)
				crit.SetBatchReducer(ranks, f.sum(r))
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[r], gotG[r] = compute(crit, r*b, b)
					alone[r], _ = compute(solo, r*b, b)
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}

			near := func(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }
			var mean float64
			// Per output of non-zero weight (two): the kept-voxel count with
			// an ignore label, the Dice sums with batch Dice.
			calls := 0
			// With unknown classes the count always, and the per-sample
			// Dice's known pairs without batch Dice.
			if tc.cfg.Ignore() >= 0 || tc.unknown != nil {
				calls += 2
			}
			if tc.cfg.BatchDice || tc.unknown != nil {
				calls += 2
			}
			var meanCE, aloneCE float64
			for r := range ranks {
				if f.calls[r] != calls {
					t.Errorf("rank %d reduced %d times, want %d", r, f.calls[r], calls)
				}
				if tc.cfg.BatchDice && !near(got[r].Dice, want.Dice, 1e-9) {
					t.Errorf("rank %d: Dice %v, want the whole batch's %v", r, got[r].Dice, want.Dice)
				}
				if tc.cfg.BatchDice && near(alone[r].Dice, want.Dice, 1e-4) {
					t.Errorf("rank %d without the reducer: Dice %v, the whole batch's %v: the test cannot tell them apart", r, alone[r].Dice, want.Dice)
				}
				mean += got[r].Total / ranks
				meanCE += (got[r].CE + got[r].BCE) / ranks
				aloneCE += (alone[r].CE + alone[r].BCE) / ranks
			}
			if wantCE := want.CE + want.BCE; !near(meanCE, wantCE, 1e-9) {
				t.Errorf("mean of the ranks' cross-entropies %v, want the whole batch's %v", meanCE, wantCE)
			} else if (tc.cfg.Ignore() >= 0 || tc.unknown != nil) && near(aloneCE, wantCE, 1e-4) {
				t.Errorf("without the reducer the ranks' cross-entropies average to %v, the whole batch's %v: the test cannot tell them apart", aloneCE, wantCE)
			}
			if !near(mean, want.Total, 1e-9) {
				t.Errorf("mean of the ranks' losses %v, want the whole batch's %v", mean, want.Total)
			}
			for i := range all {
				per := len(wantG[i]) / (ranks * b)
				var worst, scale float64
				for r := range ranks {
					for k, g := range gotG[r][i] {
						w := float64(wantG[i][r*b*per+k])
						worst = max(worst, math.Abs(float64(g)/ranks-w))
						scale = max(scale, math.Abs(w))
					}
				}
				if scale == 0 && i < 2 {
					t.Fatalf("output %d: zero gradient", i)
				}
				if worst > 1e-5*scale {
					t.Errorf("output %d: gradients / ranks differ from the whole batch's by up to %.3g (largest %.3g)", i, worst, scale)
				}
			}
		})
	}
}

// A reducer's error fails Compute, saying where.
func TestBatchDiceReducerError(t *testing.T) {
	dev := cpu.New(cpu.Options{Threads: 1})
	s := nn.Shape{1, 4, 4, 4, 2}
	crit, err := nn.NewCriterion(dev, loss("dice_ce", func(l *config.Loss) { l.BatchDice = true }), []nn.Shape{s})
	if err != nil {
		t.Fatal(err)
	}
	defer crit.Free()
	boom := errors.New("rank 1 closed its connection")
	crit.SetBatchReducer(2, func([]float64) error { return boom })
	rng := rand.New(rand.NewPCG(1, 2))
	_, err = crit.Compute([]nn.Tensor{upload(t, dev, s, randn(rng, s.Len(), 1))}, upload(t, dev, s[:4], randomLabels(rng, 1, 4, 4, 4, 2)))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "batch Dice") {
		t.Fatalf("Compute: %v", err)
	}
}
