package data

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTask writes a pattern drawn from the sample's RNG, so any mixing of
// RNG state between samples, slots or workers changes the bytes. It sleeps
// a random (not seeded: timing only) while, so samples finish out of
// order.
type fakeTask struct {
	jitter  time.Duration
	fail    map[int]string // case -> "error" | "panic" | "block"
	block   chan struct{}  // closed to release "block" cases
	started chan int       // receives the case of a blocking sample, if set
	calls   atomic.Int64
	maxBusy atomic.Int64
	busy    atomic.Int64
}

func (f *fakeTask) run(w *worker, r *rand.Rand, smp Sample, img, lbl []float32) error {
	f.calls.Add(1)
	n := f.busy.Add(1)
	defer f.busy.Add(-1)
	for {
		m := f.maxBusy.Load()
		if n <= m || f.maxBusy.CompareAndSwap(m, n) {
			break
		}
	}
	switch f.fail[smp.Case] {
	case "error":
		return fmt.Errorf("read /data/case%03d.nii.gz: corrupt gzip stream", smp.Case)
	case "panic":
		var s []int
		_ = s[smp.Case] // index out of range
	case "block":
		if f.started != nil {
			f.started <- smp.Case
		}
		<-f.block
	}
	if f.jitter > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(f.jitter))))
	}
	for i := range img {
		img[i] = float32(r.Float64()) + float32(smp.Case)
	}
	fg := float32(0)
	if smp.ForceFG {
		fg = 1
	}
	for i := range lbl {
		lbl[i] = fg + float32(r.IntN(3))
	}
	return nil
}

func (f *fakeTask) describe(c int) string {
	return fmt.Sprintf("case%03d (/data/case%03d.nii.gz)", c, c)
}

// logBuf collects log output safely from many goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger() (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

func fakeSampler(ncases, batch, iters int) *caseSampler {
	cs := make([]int, ncases)
	for i := range cs {
		cs[i] = i
	}
	return &caseSampler{Cases: cs, Seed: 7, Batch: batch, Iterations: iters, Oversample: 0.33}
}

func fakeStream(t *testing.T, p *Pool, f *fakeTask, smp *caseSampler, epochs int, mod func(*streamOptions)) *BatchStream {
	t.Helper()
	o := streamOptions{name: "train", sampler: smp, task: f, epochs: epochs,
		depth: max(1, p.Workers()) * 2, channels: 2, patch: [3]int{3, 4, 5}}
	if mod != nil {
		mod(&o)
	}
	s, err := newStream(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// digestRun consumes the stream to EOF and hashes every batch byte, in
// order, with the batch metadata.
func digestRun(t *testing.T, s *BatchStream) (string, []*Batch) {
	t.Helper()
	h := sha256.New()
	var meta []*Batch
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		binary.Write(h, binary.LittleEndian, b.Image)
		binary.Write(h, binary.LittleEndian, b.Label)
		m := &Batch{Epoch: b.Epoch, Step: b.Step, Seq: b.Seq, N: b.N, LastInEpoch: b.LastInEpoch,
			Samples: append([]Sample(nil), b.Samples...)}
		meta = append(meta, m)
		b.Release()
	}
	return fmt.Sprintf("%x", h.Sum(nil)), meta
}

func TestStreamDeterministicAcrossWorkerCounts(t *testing.T) {
	var ref string
	var refMeta []*Batch
	for _, workers := range []int{1, 2, 8, 0} {
		p := newPool(workers, poolOptions{})
		f := &fakeTask{jitter: 2 * time.Millisecond}
		s := fakeStream(t, p, f, fakeSampler(5, 3, 4), 3, nil)
		d, meta := digestRun(t, s)
		s.Close()
		p.Close()
		if len(meta) != 12 {
			t.Fatalf("workers %d: %d batches, want 3 epochs × 4", workers, len(meta))
		}
		if ref == "" {
			ref, refMeta = d, meta
			continue
		}
		if d != ref {
			t.Errorf("workers %d: digest %s, workers 1 gave %s", workers, d, ref)
		}
		for i := range meta {
			if fmt.Sprint(meta[i].Samples) != fmt.Sprint(refMeta[i].Samples) {
				t.Errorf("workers %d batch %d: samples %v, want %v", workers, i, meta[i].Samples, refMeta[i].Samples)
			}
		}
	}
}

func TestStreamOrderAndEpochs(t *testing.T) {
	p := newPool(4, poolOptions{})
	defer p.Close()
	smp := fakeSampler(7, 2, 0) // one pass: 7 cases → batches of 2,2,2,1
	s := fakeStream(t, p, &fakeTask{jitter: 3 * time.Millisecond}, smp, 2, nil)
	defer s.Close()
	_, meta := digestRun(t, s)
	if len(meta) != 8 {
		t.Fatalf("%d batches, want 8", len(meta))
	}
	var want []Sample
	for e := 0; e < 2; e++ {
		want = append(want, smp.Epoch(e, nil)...)
	}
	k := 0
	for i, b := range meta {
		if b.Seq != int64(i) || b.Epoch != i/4 || b.Step != i%4 || b.LastInEpoch != (i%4 == 3) {
			t.Errorf("batch %d: seq %d epoch %d step %d last %v", i, b.Seq, b.Epoch, b.Step, b.LastInEpoch)
		}
		wantN := 2
		if i%4 == 3 {
			wantN = 1
		}
		if b.N != wantN {
			t.Errorf("batch %d: N %d, want %d", i, b.N, wantN)
		}
		for _, sm := range b.Samples {
			if sm != want[k] {
				t.Errorf("batch %d: sample %+v, want %+v", i, sm, want[k])
			}
			k++
		}
	}
}

func TestStreamInFlightBound(t *testing.T) {
	for _, workers := range []int{1, 3} {
		p := newPool(workers, poolOptions{})
		f := &fakeTask{}
		s := fakeStream(t, p, f, fakeSampler(4, 2, 10), 2, func(o *streamOptions) { o.depth = 3 })
		n := 0
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // a slow consumer lets the pipeline fill up
			b.Release()
			n++
		}
		if s.MaxInFlight() > 3 {
			t.Errorf("workers %d: %d batches in flight, bound 3", workers, s.MaxInFlight())
		}
		if s.MaxInFlight() < 3 {
			t.Errorf("workers %d: at most %d batches in flight with a slow consumer; prefetch should reach the depth 3", workers, s.MaxInFlight())
		}
		if int(f.maxBusy.Load()) > workers || p.MaxBusy() > workers {
			t.Errorf("workers %d: %d samples at once", workers, f.maxBusy.Load())
		}
		if n != 20 {
			t.Errorf("%d batches, want 20", n)
		}
		s.Close()
		p.Close()
	}
}

// TestStreamPrefetchAcrossEpochs checks that the next epoch's batches are
// made while the consumer still holds the last batch of the current one.
func TestStreamPrefetchAcrossEpochs(t *testing.T) {
	p := newPool(2, poolOptions{})
	defer p.Close()
	f := &fakeTask{}
	s := fakeStream(t, p, f, fakeSampler(4, 2, 2), 2, func(o *streamOptions) { o.depth = 2 })
	defer s.Close()
	ctx := context.Background()
	b0, _ := s.Next(ctx)
	b0.Release()
	b1, _ := s.Next(ctx) // last of epoch 0
	if !b1.LastInEpoch {
		t.Fatal("batch 1 should end epoch 0")
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c := f.calls.Load(); c != 8 {
		t.Fatalf("%d samples made while the consumer holds epoch 0's last batch; want 8 (epoch 1 prefetched)", c)
	}
	b1.Release()
	b2, err := s.Next(ctx)
	if err != nil || b2.Epoch != 1 || b2.Step != 0 {
		t.Fatalf("next batch epoch %d step %d err %v", b2.Epoch, b2.Step, err)
	}
	b2.Release()
}

func goroutinesSettle(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > want {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, want, buf)
	}
}

func TestCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, workers := range []int{0, 1, 4} {
		p := newPool(workers, poolOptions{Watchdog: time.Second})
		f := &fakeTask{jitter: time.Millisecond}
		train := fakeStream(t, p, f, fakeSampler(6, 2, 5), 0, nil)
		val := fakeStream(t, p, f, fakeSampler(3, 1, 0), 0, func(o *streamOptions) { o.name = "val"; o.salt = 1 })
		for i := 0; i < 3; i++ {
			b, err := train.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
			v, err := val.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			v.Release()
		}
		// Close the pool with both streams still open and prefetching.
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := train.Next(context.Background()); !errors.Is(err, errClosed) {
			t.Errorf("Next after Close: %v, want errClosed", err)
		}
		if err := p.do(context.Background(), func(*worker) error { return nil }); !errors.Is(err, errClosed) {
			t.Errorf("do after Close: %v, want errClosed", err)
		}
	}
	goroutinesSettle(t, before)
}

func TestNextCancellation(t *testing.T) {
	p := newPool(1, poolOptions{})
	defer p.Close()
	f := &fakeTask{fail: map[int]string{}, block: make(chan struct{})}
	smp := fakeSampler(1, 1, 3)
	f.fail[0] = "block"
	s := fakeStream(t, p, f, smp, 1, nil)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with an ended context: %v", err)
	}
	close(f.block)
	for i := 0; i < 3; i++ {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if b.Seq != int64(i) {
			t.Errorf("after a cancelled Next, got seq %d, want %d", b.Seq, i)
		}
		b.Release()
	}
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Errorf("end: %v, want EOF", err)
	}
}

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

func TestConsumerHoldingEveryBuffer(t *testing.T) {
	p := newPool(1, poolOptions{})
	defer p.Close()
	s := fakeStream(t, p, &fakeTask{}, fakeSampler(2, 1, 100), 1, func(o *streamOptions) { o.depth = 1; o.held = 1 })
	defer s.Close()
	var held []*Batch
	var err error
	for i := 0; i < 3 && err == nil; i++ {
		var b *Batch
		b, err = s.Next(context.Background())
		if err == nil {
			held = append(held, b)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "holds all") {
		t.Fatalf("holding %d batches: err %v", len(held), err)
	}
	for _, b := range held {
		b.Release()
	}
	if b, err := s.Next(context.Background()); err != nil {
		t.Fatalf("after releasing: %v", err)
	} else {
		b.Release()
	}
	defer func() {
		if recover() == nil {
			t.Error("double Release did not panic")
		}
	}()
	held[0].Release()
}

func TestResumeMatchesContinuation(t *testing.T) {
	p := newPool(2, poolOptions{})
	defer p.Close()
	full := fakeStream(t, p, &fakeTask{}, fakeSampler(5, 2, 3), 3, nil)
	dFull, mFull := digestRun(t, full)
	full.Close()
	_ = dFull
	part := fakeStream(t, p, &fakeTask{}, fakeSampler(5, 2, 3), 2, func(o *streamOptions) {
		o.startEpoch, o.startStep = 1, 1
	})
	defer part.Close()
	_, mPart := digestRun(t, part)
	// Resumed at epoch 1 step 1: batches 4.. of the full run (3 per epoch).
	if len(mPart) != len(mFull)-4 {
		t.Fatalf("%d batches resumed, want %d", len(mPart), len(mFull)-4)
	}
	for i, b := range mPart {
		f := mFull[i+4]
		if b.Epoch != f.Epoch || b.Step != f.Step || fmt.Sprint(b.Samples) != fmt.Sprint(f.Samples) {
			t.Errorf("resumed batch %d = epoch %d step %d %v, full run has epoch %d step %d %v",
				i, b.Epoch, b.Step, b.Samples, f.Epoch, f.Step, f.Samples)
		}
	}
}

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

// TestSteadyStateAllocs shows that delivering and releasing a batch
// allocates nothing once the stream runs (testing.AllocsPerRun counts
// every goroutine's allocations, the workers' included).
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, workers := range []int{0, 2} {
		p := newPool(workers, poolOptions{})
		s := fakeStream(t, p, &fakeTask{}, fakeSampler(8, 4, 1<<20), 0, nil)
		ctx := context.Background()
		for i := 0; i < 20; i++ { // warm up: first epoch's sample list, goroutine stacks
			b, _ := s.Next(ctx)
			b.Release()
		}
		a := testing.AllocsPerRun(200, func() {
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
		})
		if a != 0 {
			t.Errorf("workers %d: %.2f allocations per batch, want 0", workers, a)
		}
		s.Close()
		p.Close()
	}
}

func TestSamplerEpochs(t *testing.T) {
	s := &caseSampler{Cases: []int{10, 11, 12, 13, 14}, Seed: 3, Batch: 3, Oversample: 0.33}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	e0 := s.Epoch(0, nil)
	e1 := s.Epoch(1, nil)
	if len(e0) != 5 {
		t.Fatalf("one pass has %d samples", len(e0))
	}
	seen := map[int]bool{}
	for _, x := range e0 {
		seen[x.Case] = true
	}
	if len(seen) != 5 {
		t.Errorf("one pass does not visit every case once: %v", e0)
	}
	if fmt.Sprint(e0) == fmt.Sprint(e1) {
		t.Errorf("epochs 0 and 1 have the same order")
	}
	if fmt.Sprint(s.Epoch(1, nil)) != fmt.Sprint(e1) {
		t.Errorf("epoch 1 not reproducible")
	}
	// Batches of 3 and 2: round(3×0.33)=1 and round(2×0.33)=1 fg slot, the last.
	for i, x := range e0 {
		want := i == 2 || i == 4
		if x.ForceFG != want {
			t.Errorf("sample %d ForceFG %v, want %v", i, x.ForceFG, want)
		}
	}
	s2 := &caseSampler{Cases: []int{0, 1}, Batch: 2, Oversample: 0.5, Iterations: 3}
	s2.Check()
	for i, x := range s2.Epoch(0, nil) {
		if x.ForceFG != (i%2 == 1) {
			t.Errorf("oversample 0.5, batch 2: slot %d ForceFG %v", i, x.ForceFG)
		}
	}
}

func TestSamplerWeights(t *testing.T) {
	s := &caseSampler{Cases: []int{0, 1, 2, 3}, Weights: []float64{1, 0, 3, 0}, Seed: 1, Batch: 4, Iterations: 2500}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, x := range s.Epoch(0, nil) {
		count[x.Case]++
	}
	if count[1] != 0 || count[3] != 0 {
		t.Errorf("zero-weight cases drawn: %v", count)
	}
	ratio := float64(count[2]) / float64(count[0])
	if math.Abs(ratio-3) > 0.3 {
		t.Errorf("weight 3:1 drew %v (ratio %.2f)", count, ratio)
	}
	for a := 1; a < 50; a++ {
		if c := s.Replacement(0, 5, a); c != 0 && c != 2 {
			t.Errorf("replacement drew zero-weight case %d", c)
		}
	}
	if (&caseSampler{Cases: []int{0}, Weights: []float64{0}, Batch: 1}).Check() == nil {
		t.Error("all-zero weights accepted")
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
