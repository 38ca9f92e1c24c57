package feed_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/feed"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// download returns a CPU device tensor's contents (the CPU's compute
// stream is synchronous).
func download(t *testing.T, dev nn.Device, x nn.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Shape().Len())
	if err := dev.Download(dev.ComputeStream(), out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFeederOnCPUDevice runs the training loop over the real CPU device,
// whose copy stream is a goroutine: every step sees its own batch, and
// host buffers (scribbled over with NaN the moment they are released)
// never reach the device after release.
func TestFeederOnCPUDevice(t *testing.T) {
	const total = 16
	dev := cpu.New(cpu.Options{Threads: 2})
	ring := newFakeRing(3, total, 2, 1, [3]int{6, 5, 4}, 2)
	f := feed.New(dev, feed.Options{})
	steps := 0
	check := func(x, y nn.Tensor, seq int64) {
		if !holds(download(t, dev, x), seq, 0) || !holds(download(t, dev, y), seq, 1) {
			t.Errorf("step %d: the device buffers do not hold batch %d", seq, seq)
		}
		steps++
	}
	trainLoop(t, f, total, func() feed.HostBatch { return ring.next(nil, nil) }, check, func() {}, check)
	for _, v := range ring.violations {
		t.Error(v)
	}
	if steps != 2*total || len(ring.released) != total {
		t.Errorf("%d checks, %d releases; want %d, %d", steps, len(ring.released), 2*total, total)
	}
	st := f.Stats()
	t.Logf("cpu feeder: %d batches, %d bytes, most held %d, host waits %d (no timeline on the CPU: %d timed)", st.Batches, st.Bytes, st.MaxInFlight, st.HostWaits, st.Timed)
	if cur, _ := dev.MemoryInUse(); cur != 0 {
		t.Errorf("%d bytes of device buffers left after Close", cur)
	}
}

// TestFeederWithDataRing feeds batches from package data's real ring
// (workers decoding real NIfTI cases, buffers released through
// Batch.Release, which panics on a double release) to the CPU device, and
// checks each step's device input against a snapshot of its host batch.
func TestFeederWithDataRing(t *testing.T) {
	if testing.Short() {
		t.Skip("reads NIfTI cases; skipped with -short")
	}
	dir := testutil.DemoSubset(t, []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"})
	cfg := config.Default().Data
	cfg.Dataset, cfg.Fold, cfg.Workers = dir, -1, config.Workers{N: 2, Set: true}
	l, err := data.Open(cfg, data.Options{Seed: 5, Iterations: 6, Patch: [3]int{16, 16, 16}, Batch: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.Train(data.StreamOptions{Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	dev := cpu.New(cpu.Options{Threads: 2})
	f := feed.New(dev, feed.Options{})
	snaps := map[int64][2][]float32{}
	next := func() (*feed.Batch, bool) {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		fb, err := f.Upload(b)
		if err != nil {
			t.Fatal(err)
		}
		snaps[fb.Seq] = [2][]float32{slices.Clone(b.Image), slices.Clone(b.Label)}
		return fb, true
	}
	cur, ok := next()
	steps := 0
	for ok {
		nb, more := next()
		x, y := f.Acquire(cur)
		if !slices.Equal(download(t, dev, x), snaps[cur.Seq][0]) || !slices.Equal(download(t, dev, y), snaps[cur.Seq][1]) {
			t.Errorf("batch %d on the device differs from the host batch", cur.Seq)
		}
		f.Done(cur)
		f.Reap()
		delete(snaps, cur.Seq)
		steps++
		cur, ok = nb, more
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if steps != 6 {
		t.Errorf("%d steps, want 6", steps)
	}
	if st := f.Stats(); st.Released != 6 {
		t.Errorf("%d batches released to the ring, want 6", st.Released)
	}
}
