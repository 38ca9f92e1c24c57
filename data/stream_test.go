package data

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/internal/testutil"
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
			Samples: append([]Sample(nil), b.Samples...), Unknown: append([]uint8(nil), b.Unknown...)}
		meta = append(meta, m)
		b.Release()
	}
	return fmt.Sprintf("%x", h.Sum(nil)), meta
}

func TestStreamDeterministicAcrossWorkerCounts(t *testing.T) {
	var ref string
	var refMeta []*Batch
	// Cases 1 and 3 leave classes unknown: each slot's mask is its case's.
	unknown := []uint8{0, 0b10, 0, 0b101, 0}
	for _, workers := range []int{1, 2, 8, 0} {
		p := newPool(workers, poolOptions{})
		f := &fakeTask{jitter: 2 * time.Millisecond}
		s := fakeStream(t, p, f, fakeSampler(5, 3, 4), 3, func(o *streamOptions) { o.unknown = unknown })
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
			if fmt.Sprint(meta[i].Unknown) != fmt.Sprint(refMeta[i].Unknown) {
				t.Errorf("workers %d batch %d: unknown classes %v, want %v", workers, i, meta[i].Unknown, refMeta[i].Unknown)
			}
		}
		masked := 0
		for i, b := range meta {
			if len(b.Unknown) != b.N {
				t.Fatalf("workers %d batch %d: %d unknown masks for %d samples", workers, i, len(b.Unknown), b.N)
			}
			for k, sm := range b.Samples {
				if b.Unknown[k] != unknown[sm.Case] {
					t.Errorf("workers %d batch %d slot %d (case %d): unknown %b, want %b", workers, i, k, sm.Case, b.Unknown[k], unknown[sm.Case])
				}
				if b.Unknown[k] != 0 {
					masked++
				}
			}
		}
		if masked == 0 {
			t.Fatalf("workers %d: no slot drew a case with unknown classes", workers)
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

// TestSteadyStateAllocs shows that delivering and releasing a batch
// allocates nothing once the stream runs (testing.AllocsPerRun counts
// every goroutine's allocations, the workers' included).
func TestSteadyStateAllocs(t *testing.T) {
	testutil.SkipUnderRace(t, "the race detector allocates")
	for _, workers := range []int{0, 2} {
		p := newPool(workers, poolOptions{})
		s := fakeStream(t, p, &fakeTask{}, fakeSampler(8, 4, 1<<20), 0, nil)
		// Warm up first: the first epoch's sample list, goroutine stacks.
		if a := allocsPerBatch(t, s, 20, 200); a != 0 {
			t.Errorf("workers %d: %.2f allocations per batch, want 0", workers, a)
		}
		s.Close()
		p.Close()
	}
}
