package data

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// rankBatches runs a sharded stream of rank r of n over 2 epochs (starting
// at epoch e0 step s0) and returns each batch's samples and bytes.
func rankBatches(t *testing.T, smp caseSampler, n, r, workers, e0, s0 int) (samples [][]Sample, imgs [][]float32) {
	t.Helper()
	smp.Ranks, smp.Rank = n, r
	p := newPool(workers, poolOptions{})
	defer p.Close()
	s := fakeStream(t, p, &fakeTask{}, &smp, 2, func(o *streamOptions) { o.startEpoch, o.startStep = e0, s0 })
	defer s.Close()
	for {
		b, err := s.Next(context.Background())
		if err != nil {
			break
		}
		samples = append(samples, slices.Clone(b.Samples))
		imgs = append(imgs, slices.Clone(b.Image))
		b.Release()
	}
	return samples, imgs
}

// N ranks with batch b take, step by step, exactly the samples (cases,
// indices, foreground slots, patch bytes) one process with batch N×b
// takes: rank r its contiguous share [r×b, (r+1)×b) of each global batch.
// A resume at step s0 on any of those world sizes continues the same
// sequence.
func TestShardedStreamsMakeTheGlobalBatch(t *testing.T) {
	base := *fakeSampler(9, 0, 5) // 5 steps per epoch
	for _, c := range []struct{ ranks, batch, workers, s0 int }{{2, 3, 2, 0}, {3, 2, 0, 0}, {6, 1, 1, 0}, {2, 3, 1, 2}, {3, 2, 2, 4}} {
		one := base
		one.Batch = 6
		wantS, wantI := rankBatches(t, one, 1, 0, 1, 0, c.s0)
		if len(wantS) != 10-c.s0 {
			t.Fatalf("one process: %d batches", len(wantS))
		}
		smp := base
		smp.Batch = c.batch
		var got [][][]Sample
		var gotI [][][]float32
		for r := range c.ranks {
			s, im := rankBatches(t, smp, c.ranks, r, c.workers, 0, c.s0)
			if len(s) != len(wantS) {
				t.Fatalf("%d ranks × %d: rank %d got %d batches, want %d", c.ranks, c.batch, r, len(s), len(wantS))
			}
			got, gotI = append(got, s), append(gotI, im)
		}
		for step := range wantS {
			var cat []Sample
			var catI []float32
			for r := range c.ranks {
				cat = append(cat, got[r][step]...)
				catI = append(catI, gotI[r][step]...)
			}
			if !slices.Equal(cat, wantS[step]) {
				t.Errorf("%d ranks × %d from step %d, batch %d: ranks' samples %v, one process %v", c.ranks, c.batch, c.s0, step, cat, wantS[step])
			}
			if !slices.Equal(catI, wantI[step]) {
				t.Errorf("%d ranks × %d, batch %d: the ranks' patches differ from one process's", c.ranks, c.batch, step)
			}
		}
	}
	// Oversampling is per global batch position: round(6 × 0.33) = 2,
	// the last two of each global batch, whatever rank holds them.
	one := base
	one.Batch = 6
	for _, b := range one.Epoch(0, nil)[:6] {
		if b.ForceFG != (b.Index%6 >= 4) {
			t.Errorf("sample %d: ForceFG %v", b.Index, b.ForceFG)
		}
	}
}

// A one-pass epoch whose last global batch the ranks cannot share evenly
// is refused, naming the key to set.
func TestShardedOnePassMustDivide(t *testing.T) {
	smp := *fakeSampler(7, 2, 0)
	smp.Ranks, smp.Rank = 2, 1
	err := smp.Check()
	if err == nil || !strings.Contains(err.Error(), "partial batch of 3") || !strings.Contains(err.Error(), "train.iterations_per_epoch") {
		t.Errorf("Check: %v", err)
	}
	smp = *fakeSampler(8, 2, 0)
	smp.Ranks, smp.Rank = 2, 1
	if err := smp.Check(); err != nil || smp.Batches() != 2 {
		t.Errorf("8 cases, 2 ranks × 2: %v, %d batches", err, smp.Batches())
	}
}
