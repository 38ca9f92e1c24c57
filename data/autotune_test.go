package data

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAutoWorkers(t *testing.T) {
	log, lb := testLogger()
	p := newPool(4, poolOptions{Logger: log})
	defer p.Close()
	// Samples take ~2 ms; a batch of 2 is ~4 ms of work; the consumer's
	// step is 30 ms, so one worker has far more than 20 % headroom.
	f := &fakeTask{}
	slow := &sleepTask{fakeTask: f, d: 2 * time.Millisecond}
	s := fakeStream(t, p, nil, fakeSampler(4, 2, 20), 1, func(o *streamOptions) { o.task = slow; o.auto = true })
	defer s.Close()
	for i := 0; i < 10; i++ {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		b.Release()
	}
	if p.Active() != 1 {
		t.Errorf("auto chose %d workers, want 1", p.Active())
	}
	if !strings.Contains(lb.String(), "workers auto") {
		t.Errorf("choice not logged: %s", lb.String())
	}
}

type sleepTask struct {
	*fakeTask
	d time.Duration
}

func (s *sleepTask) run(w *worker, r *rand.Rand, smp Sample, img, lbl []float32) error {
	time.Sleep(s.d)
	return s.fakeTask.run(w, r, smp, img, lbl)
}

func TestAutoWorkersAddsWhenStarved(t *testing.T) {
	log, lb := testLogger()
	p := newPool(4, poolOptions{Logger: log})
	defer p.Close()
	pt := &phaseTask{fakeTask: &fakeTask{}, n: 20, fast: time.Millisecond, slow: 25 * time.Millisecond}
	s := fakeStream(t, p, nil, fakeSampler(4, 2, 1000), 1, func(o *streamOptions) { o.task = pt; o.auto = true })
	defer s.Close()
	for i := 0; i < 90; i++ {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Millisecond)
		b.Release()
	}
	// 2 samples of 25 ms per 15 ms step need 4 workers; the first decision
	// (1 ms samples) was 1.
	if p.Active() < 3 {
		t.Errorf("auto stayed at %d workers while the consumer starved:\n%s", p.Active(), lb.String())
	}
	if !strings.Contains(lb.String(), "adding a worker") {
		t.Errorf("no log of the added workers:\n%s", lb.String())
	}
}

// phaseTask sleeps short for the first n samples, then long: samples
// that get slower after the auto decision (a busier machine).
type phaseTask struct {
	*fakeTask
	n          int64
	fast, slow time.Duration
	count      atomic.Int64
}

func (p *phaseTask) run(w *worker, r *rand.Rand, smp Sample, img, lbl []float32) error {
	if p.count.Add(1) <= p.n {
		time.Sleep(p.fast)
	} else {
		time.Sleep(p.slow)
	}
	return p.fakeTask.run(w, r, smp, img, lbl)
}
