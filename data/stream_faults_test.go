package data

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func TestOnErrorFail(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		for _, workers := range []int{0, 2} {
			p := newPool(workers, poolOptions{})
			f := &fakeTask{fail: map[int]string{3: mode}}
			s := fakeStream(t, p, f, fakeSampler(5, 2, 0), 1, nil)
			var err error
			for err == nil {
				var b *Batch
				b, err = s.Next(context.Background())
				if err == nil {
					b.Release()
				}
			}
			if err == io.EOF || !strings.Contains(err.Error(), "case003") && !strings.Contains(err.Error(), "/data/case003.nii.gz") {
				t.Errorf("%s, workers %d: error %v does not name case 3's file", mode, workers, err)
			}
			if _, err2 := s.Next(context.Background()); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("%s: stream continued after failing: %v", mode, err2)
			}
			s.Close()
			p.Close()
		}
	}
}

func TestOnErrorSkip(t *testing.T) {
	var ref string
	for _, workers := range []int{1, 4, 0} {
		log, lb := testLogger()
		p := newPool(workers, poolOptions{Logger: log})
		f := &fakeTask{fail: map[int]string{2: "error", 4: "panic"}, jitter: time.Millisecond}
		smp := fakeSampler(6, 2, 6)
		s := fakeStream(t, p, f, smp, 2, func(o *streamOptions) { o.skip = true })
		d, meta := digestRun(t, s)
		s.Close()
		p.Close()
		if len(meta) != 12 {
			t.Fatalf("%d batches, want 12: the run must continue", len(meta))
		}
		for _, b := range meta {
			for _, sm := range b.Samples {
				if sm.Case == 2 || sm.Case == 4 {
					t.Fatalf("a quarantined case was delivered: %+v", sm)
				}
			}
		}
		out := lb.String()
		if c := strings.Count(out, `quarantined, replacing its samples" case="case002`); c != 1 {
			t.Errorf("case 2 logged %d times, want once:\n%s", c, out)
		}
		if c := strings.Count(out, `quarantined, replacing its samples" case="case004`); c != 1 {
			t.Errorf("case 4 logged %d times, want once:\n%s", c, out)
		}
		if ref == "" {
			ref = d
		} else if d != ref {
			t.Errorf("workers %d: replacements differ from workers 1", workers)
		}
	}
}

func TestSkipAllCasesBad(t *testing.T) {
	log, _ := testLogger()
	p := newPool(2, poolOptions{Logger: log})
	defer p.Close()
	f := &fakeTask{fail: map[int]string{0: "error", 1: "error"}}
	s := fakeStream(t, p, f, fakeSampler(2, 1, 3), 1, func(o *streamOptions) { o.skip = true })
	defer s.Close()
	_, err := s.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "every case is quarantined") {
		t.Fatalf("err %v", err)
	}
}

func TestWatchdogReportsSlowSample(t *testing.T) {
	for _, workers := range []int{0, 2} {
		log, lb := testLogger()
		p := newPool(workers, poolOptions{Logger: log, Watchdog: 30 * time.Millisecond})
		f := &fakeTask{fail: map[int]string{1: "block"}, block: make(chan struct{})}
		s := fakeStream(t, p, f, fakeSampler(3, 1, 0), 1, func(o *streamOptions) {
			o.sampler.Sequential = true
		})
		go func() {
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(lb.String(), "slow sample") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			close(f.block)
		}()
		_, meta := digestRun(t, s)
		s.Close()
		p.Close()
		out := lb.String()
		if len(meta) != 3 {
			t.Errorf("%d batches", len(meta))
		}
		for _, want := range []string{"slow sample", "/data/case001.nii.gz", "elapsed=", "worker="} {
			if !strings.Contains(out, want) {
				t.Errorf("workers %d: watchdog output lacks %q:\n%s", workers, want, out)
			}
		}
	}
}

func TestHardTimeout(t *testing.T) {
	log, _ := testLogger()
	p := newPool(2, poolOptions{Logger: log, Watchdog: -1, HardTimeout: 40 * time.Millisecond})
	f := &fakeTask{fail: map[int]string{0: "block"}, block: make(chan struct{})}
	s := fakeStream(t, p, f, fakeSampler(1, 1, 2), 1, nil)
	_, err := s.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "hard timeout") || !strings.Contains(err.Error(), "/data/case000.nii.gz") {
		t.Fatalf("Next: %v, want a hard-timeout error naming the file", err)
	}
	close(f.block) // the stuck sample ends; Close can then finish
	s.Close()
	p.Close()
}

// closesWithin runs f and fails the test if it has not returned after d
// (a hang: the goroutine is left behind).
func closesWithin(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v: it waits for a stuck sample", what, d)
	}
}

// TestHardTimeoutAbandonsStuckSample: a sample that never returns (a read
// blocked for good) fails its stream at the hard timeout, and closing the
// stream and the pool abandons its worker at once instead of waiting for
// it; the pool keeps its workers (a new stream is served by two), and the
// stuck goroutine, once its read returns, writes only into buffers that
// were left to it and exits.
func TestHardTimeoutAbandonsStuckSample(t *testing.T) {
	log, lb := testLogger()
	p := newPool(2, poolOptions{Logger: log, Watchdog: -1, HardTimeout: 40 * time.Millisecond, CloseGrace: time.Hour})
	f := &fakeTask{fail: map[int]string{0: "block"}, block: make(chan struct{})}
	defer close(f.block) // the stuck read returns at last, after everything was closed
	s := fakeStream(t, p, f, fakeSampler(1, 1, 2), 1, nil)
	_, err := s.Next(context.Background())
	if err == nil || !strings.Contains(err.Error(), "hard timeout") || !strings.Contains(err.Error(), "/data/case000.nii.gz") {
		t.Fatalf("Next: %v, want a hard-timeout error naming the file", err)
	}
	closesWithin(t, "BatchStream.Close", 5*time.Second, func() { s.Close() })
	if out := lb.String(); !strings.Contains(out, "abandoning a stuck worker") || !strings.Contains(out, "case000") {
		t.Errorf("no report of the abandoned worker naming the case:\n%s", out)
	}
	if p.Workers() != 2 {
		t.Errorf("%d workers after abandoning one, want 2", p.Workers())
	}
	g := &fakeTask{}
	s2 := fakeStream(t, p, g, fakeSampler(4, 2, 0), 1, nil)
	if _, meta := digestRun(t, s2); len(meta) != 2 {
		t.Errorf("a new stream on the pool delivered %d batches, want 2", len(meta))
	}
	s2.Close()
	closesWithin(t, "Pool.Close", 5*time.Second, func() { p.Close() })
}

// TestCloseAbandonsStuckSampleAfterGrace: without a hard timeout, a
// consumer that stops (a signal cancels its context) gets its Next back,
// and Close returns after the close grace although a sample is still
// stuck.
func TestCloseAbandonsStuckSampleAfterGrace(t *testing.T) {
	for _, workers := range []int{1, 3} {
		log, lb := testLogger()
		p := newPool(workers, poolOptions{Logger: log, Watchdog: -1, CloseGrace: 50 * time.Millisecond})
		f := &fakeTask{fail: map[int]string{1: "block"}, block: make(chan struct{})}
		s := fakeStream(t, p, f, fakeSampler(3, 1, 0), 1, func(o *streamOptions) { o.sampler.Sequential = true })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var err error
		for err == nil {
			var b *Batch
			if b, err = s.Next(ctx); err == nil {
				b.Release()
				time.AfterFunc(100*time.Millisecond, cancel) // the signal arrives while sample 1 is stuck
			}
		}
		if err != context.Canceled {
			t.Errorf("workers %d: Next after the cancel: %v", workers, err)
		}
		closesWithin(t, "BatchStream.Close", 5*time.Second, func() { s.Close() })
		closesWithin(t, "Pool.Close", 5*time.Second, func() { p.Close() })
		if !strings.Contains(lb.String(), "abandoning a stuck worker") {
			t.Errorf("workers %d: no report of the abandoned worker:\n%s", workers, lb.String())
		}
		close(f.block)
	}
}

// TestCloseAbandonsAtHardTimeout: a sample that started just before Close
// (not yet past the hard timeout, so the stream has not failed) holds
// Close only until its own hard timeout, not for the whole close grace.
func TestCloseAbandonsAtHardTimeout(t *testing.T) {
	log, lb := testLogger()
	p := newPool(2, poolOptions{Logger: log, Watchdog: -1, HardTimeout: 300 * time.Millisecond, CloseGrace: time.Hour})
	f := &fakeTask{fail: map[int]string{0: "block"}, block: make(chan struct{}), started: make(chan int, 4)}
	defer close(f.block)
	s := fakeStream(t, p, f, fakeSampler(1, 1, 1), 1, nil)
	<-f.started
	start := time.Now()
	closesWithin(t, "BatchStream.Close", 5*time.Second, func() { s.Close() })
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("Close returned after %v, before the sample's hard timeout", el)
	}
	if out := lb.String(); !strings.Contains(out, "past the hard timeout") {
		t.Errorf("no report of the sample abandoned at its hard timeout:\n%s", out)
	}
	closesWithin(t, "Pool.Close", 5*time.Second, func() { p.Close() })
}
