package feed_test

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/feed"
	"github.com/voxtrain/voxtrain/nn"
)

// fakeRing is a batch ring like package data's: a fixed set of host
// buffers cycling free → filled by a producer goroutine → held by the
// consumer → released. It records every misuse: a buffer handed out while
// held, released twice or while its copy may still run, or more buffers
// held than the budget. On release a buffer is refilled at once with the
// next batch (as data's workers do), so a copy still reading it would
// carry the wrong batch to the device.
type fakeRing struct {
	n, c    int
	patch   [3]int
	maxHeld int
	free    chan *ringBuf
	ready   chan *ringBuf

	mu         sync.Mutex
	held       int
	maxSeen    int
	violations []string
	released   []release
}

type ringBuf struct {
	id         int
	img, lbl   []float32
	state      string // free, filling, ready, held
	seq        int64
	everyIssue int
}

type release struct {
	seq  int64
	host time.Duration // host virtual clock at release
}

func newFakeRing(buffers, total, n, c int, patch [3]int, maxHeld int) *fakeRing {
	v := patch[0] * patch[1] * patch[2]
	r := &fakeRing{n: n, c: c, patch: patch, maxHeld: maxHeld, free: make(chan *ringBuf, buffers), ready: make(chan *ringBuf, buffers)}
	for i := 0; i < buffers; i++ {
		r.free <- &ringBuf{id: i, img: make([]float32, n*c*v), lbl: make([]float32, n*v), state: "free"}
	}
	go func() {
		for seq := int64(0); seq < int64(total); seq++ {
			b := <-r.free
			r.mu.Lock()
			if b.state != "free" {
				r.violations = append(r.violations, fmt.Sprintf("buffer %d refilled in state %s", b.id, b.state))
			}
			b.state, b.seq = "filling", seq
			r.mu.Unlock()
			for i := range b.img {
				b.img[i] = pattern(seq, 0)
			}
			for i := range b.lbl {
				b.lbl[i] = pattern(seq, 1)
			}
			r.mu.Lock()
			b.state = "ready"
			r.mu.Unlock()
			r.ready <- b
		}
	}()
	return r
}

// next hands out the next batch (in order) as a feed.Arrays whose Release
// checks it is released once, after its copy (copyDone).
func (r *fakeRing) next(copyDone func(seq int64) bool, hostNow func() time.Duration) feed.HostBatch {
	b := <-r.ready
	r.mu.Lock()
	if b.state != "ready" {
		r.violations = append(r.violations, fmt.Sprintf("buffer %d handed out in state %s", b.id, b.state))
	}
	b.state = "held"
	r.held++
	r.maxSeen = max(r.maxSeen, r.held)
	if r.held > r.maxHeld {
		r.violations = append(r.violations, fmt.Sprintf("consumer holds %d buffers, budget %d", r.held, r.maxHeld))
	}
	seq := b.seq
	r.mu.Unlock()
	return &feed.Arrays{Image: b.img, Label: b.lbl, N: r.n, C: r.c, Patch: r.patch, OnRelease: func() {
		r.mu.Lock()
		if b.state != "held" || b.seq != seq {
			r.violations = append(r.violations, fmt.Sprintf("batch %d released twice (buffer %d in state %s)", seq, b.id, b.state))
			r.mu.Unlock()
			return
		}
		if copyDone != nil && !copyDone(seq) {
			r.violations = append(r.violations, fmt.Sprintf("batch %d released before its copy completed", seq))
		}
		b.state = "free"
		r.held--
		var now time.Duration
		if hostNow != nil {
			now = hostNow()
		}
		r.released = append(r.released, release{seq, now})
		r.mu.Unlock()
		// Scribble over the buffer at once: a copy still reading it
		// would take NaNs to the device.
		for i := range b.img {
			b.img[i] = float32(math.NaN())
		}
		r.free <- b
	}}
}

// trainLoop is the trainer's loop over the Feeder: upload batch i+1, run
// step i (forward, loss read back, backward), Done, Reap.
//
// With acquireFirst the loop acquires batch i before uploading i+1 (the
// upload is then issued at once and only the slot's "free" event keeps it
// off the buffer step i-1 may still read).
func trainLoop(t *testing.T, f *feed.Feeder, total int, next func() feed.HostBatch, fwd func(x, y nn.Tensor, seq int64), sync func(), bwd func(x, y nn.Tensor, seq int64), acquireFirst ...bool) {
	t.Helper()
	cur, err := f.Upload(next())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		var nb *feed.Batch
		var x, y nn.Tensor
		if len(acquireFirst) > 0 && acquireFirst[0] {
			x, y = f.Acquire(cur)
		}
		if i+1 < total {
			if nb, err = f.Upload(next()); err != nil {
				t.Fatal(err)
			}
		}
		if x == nil {
			x, y = f.Acquire(cur)
		}
		fwd(x, y, cur.Seq)
		sync() // the loss comes back to the host
		bwd(x, y, cur.Seq)
		f.Done(cur)
		f.Reap()
		cur = nb
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// runSim trains total batches through a Feeder on the simulated device.
func runSim(t *testing.T, d *simDevice, total int, acquireFirst ...bool) (*feed.Feeder, *fakeRing) {
	t.Helper()
	patch := [3]int{4, 4, 8}
	ring := newFakeRing(4, total, 2, 1, patch, 2)
	f := feed.New(d, feed.Options{})
	var mu sync.Mutex
	copyEnd := map[int64]time.Duration{}
	copyDone := func(seq int64) bool {
		// The batch's two copies (image, label) have run and ended on the
		// virtual clock no later than the host's.
		d.logMu.Lock()
		defer d.logMu.Unlock()
		n := 0
		for _, c := range d.copies {
			if c.seq == seq {
				n++
				mu.Lock()
				copyEnd[seq] = max(copyEnd[seq], c.end)
				mu.Unlock()
			}
		}
		return n == 2 && copyEnd[seq] <= d.hostNow()
	}
	trainLoop(t, f, total, func() feed.HostBatch { return ring.next(copyDone, d.hostNow) },
		func(x, y nn.Tensor, seq int64) { d.stepHalf("fwd", x, y, seq) },
		func() { d.compute.Synchronize() },
		func(x, y nn.Tensor, seq int64) { d.stepHalf("bwd", x, y, seq) }, acquireFirst...)
	return f, ring
}

// checkInvariants fails t on any recorded violation and checks, on the
// virtual timeline, that every copy into a device buffer started after
// every earlier step that read the buffer had ended, and that every step
// started after its batch's copies.
func checkInvariants(t *testing.T, d *simDevice, ring *fakeRing, total int) {
	t.Helper()
	ring.mu.Lock()
	defer ring.mu.Unlock()
	for _, v := range append(d.violations, ring.violations...) {
		t.Error(v)
	}
	if len(ring.released) != total {
		t.Errorf("%d host buffers released, want %d", len(ring.released), total)
	}
	for i, r := range ring.released {
		if r.seq != int64(i) {
			t.Errorf("release %d is batch %d: releases out of order", i, r.seq)
			break
		}
	}
	if ring.maxSeen > ring.maxHeld {
		t.Errorf("consumer held up to %d buffers, budget %d", ring.maxSeen, ring.maxHeld)
	}
	copyEnd := map[int64]time.Duration{}
	for _, c := range d.copies {
		copyEnd[c.seq] = max(copyEnd[c.seq], c.end)
		for _, s := range d.steps {
			if s.tensor == c.tensor && s.seq < c.seq && c.start < s.end {
				t.Errorf("copy of batch %d into tensor %d starts at %v, before step %d (%s) reading it ends at %v", c.seq, c.tensor, c.start, s.seq, s.kind, s.end)
			}
		}
	}
	for _, s := range d.steps {
		if s.start < copyEnd[s.seq] {
			t.Errorf("step %d (%s) starts at %v, before its batch's copy ends at %v", s.seq, s.kind, s.start, copyEnd[s.seq])
		}
	}
	for _, r := range ring.released {
		if r.host < copyEnd[r.seq] {
			t.Errorf("batch %d released at host time %v, before its copy ended at %v", r.seq, r.host, copyEnd[r.seq])
		}
	}
	if len(d.steps) != 2*total {
		t.Errorf("%d step halves ran, want %d", len(d.steps), 2*total)
	}
}

// copySpan returns batch seq's copy (image and label) as one interval,
// and step seq's (forward start to backward end).
func spans(d *simDevice) (copies, steps map[int64][2]time.Duration) {
	copies, steps = map[int64][2]time.Duration{}, map[int64][2]time.Duration{}
	merge := func(m map[int64][2]time.Duration, seq int64, s, e time.Duration) {
		if v, ok := m[seq]; ok {
			m[seq] = [2]time.Duration{min(v[0], s), max(v[1], e)}
		} else {
			m[seq] = [2]time.Duration{s, e}
		}
	}
	for _, c := range d.copies {
		merge(copies, c.seq, c.start, c.end)
	}
	for _, s := range d.steps {
		merge(steps, s.seq, s.start, s.end)
	}
	return copies, steps
}

// timeline draws the virtual timeline (one row per batch) for the log.
func timeline(d *simDevice, total int) string {
	copies, steps := spans(d)
	end := time.Duration(0)
	for _, s := range steps {
		end = max(end, s[1])
	}
	const width = 72
	col := func(x time.Duration) int { return int(float64(width) * float64(x) / float64(end)) }
	var b strings.Builder
	fmt.Fprintf(&b, "virtual timeline, %v per column (c: host-to-device copy, S: step)\n", end/width)
	seqs := make([]int64, 0, total)
	for s := range steps {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs[:min(len(seqs), 8)] {
		row := []byte(strings.Repeat(" ", width+1))
		for x := col(copies[s][0]); x < max(col(copies[s][1]), col(copies[s][0])+1) && x <= width; x++ {
			row[x] = 'c'
		}
		for x := col(steps[s][0]); x < col(steps[s][1]) && x <= width; x++ {
			row[x] = 'S'
		}
		fmt.Fprintf(&b, "  batch %2d |%s|\n", s, row)
	}
	return b.String()
}

// TestPinnedRingOverlap is the pinned-ring test of the CUDA issue, on
// emulated copy and compute streams: with copies shorter than steps, the
// copy of batch i+1 runs entirely inside step i, host buffers go back to
// the ring only after their copy completed, in order, and no buffer (host
// or device) is used by two parties at once. Under -race the real
// execution is checked for unsynchronised access too.
func TestPinnedRingOverlap(t *testing.T) {
	const total = 20
	// 4 MB/s against 2 + 3 ms steps: a batch (2×1×4×4×8 image + labels,
	// 2 KiB) copies in 0.5 ms, a tenth of a step.
	d := newSim(4e6, 2*time.Millisecond, 3*time.Millisecond)
	f, ring := runSim(t, d, total)
	checkInvariants(t, d, ring, total)
	t.Log(timeline(d, total))

	copies, steps := spans(d)
	for i := int64(0); i+1 < total; i++ {
		c, s := copies[i+1], steps[i]
		if !(c[0] >= s[0] && c[1] <= s[1]) {
			t.Errorf("copy of batch %d [%v, %v] is not inside step %d [%v, %v]", i+1, c[0], c[1], i, s[0], s[1])
		}
	}
	st := f.Stats()
	t.Logf("feeder: %d batches, %d timed copies, copy time %v, hidden under steps %v (%.1f%%), step time %v, host waits %d (%v), most host buffers held %d",
		st.Batches, st.Timed, st.CopyTime, st.HiddenCopy, 100*st.HiddenShare(), st.StepTime, st.HostWaits, st.HostWaited, st.MaxInFlight)
	if st.Timed != total-1 {
		t.Errorf("%d copies timed, want %d (all but the first, which nothing can hide)", st.Timed, total-1)
	}
	if st.HiddenShare() < 0.95 {
		t.Errorf("share of copy time hidden under compute %.3f, want >= 0.95", st.HiddenShare())
	}
	if st.Released != total || f.Pending() != 0 {
		t.Errorf("released %d of %d, %d pending", st.Released, total, f.Pending())
	}
}

// TestSlowCopies: copies longer than steps cannot hide; the timeline is
// still correct and the measured hidden share is what the virtual clock
// dictates: a 7.5 ms copy under a 5 ms step is two thirds hidden.
func TestSlowCopies(t *testing.T) {
	const total = 12
	// A batch (image 1 KiB + labels 1 KiB) copies in 7.5 ms.
	d := newSim(2048/7.5e-3, 2*time.Millisecond, 3*time.Millisecond)
	f, ring := runSim(t, d, total)
	checkInvariants(t, d, ring, total)
	t.Log(timeline(d, total))
	st := f.Stats()
	t.Logf("feeder: copy time %v, hidden %v (%.1f%%), host waits %d", st.CopyTime, st.HiddenCopy, 100*st.HiddenShare(), st.HostWaits)
	if math.Abs(st.HiddenShare()-2.0/3) > 0.01 {
		t.Errorf("hidden share %.4f, want 2/3", st.HiddenShare())
	}
}

// TestUploadAfterAcquire: a loop that acquires batch i before uploading
// i+1 issues each copy at once, while the previous step's backward may
// still read the slot: the copy must wait for the slot's "free" event.
func TestUploadAfterAcquire(t *testing.T) {
	const total = 12
	d := newSim(4e6, 2*time.Millisecond, 3*time.Millisecond)
	f, ring := runSim(t, d, total, true)
	checkInvariants(t, d, ring, total)
	t.Log(timeline(d, total))
	st := f.Stats()
	t.Logf("feeder: copy time %v, hidden %v (%.1f%%)", st.CopyTime, st.HiddenCopy, 100*st.HiddenShare())
	if st.HiddenShare() < 0.95 {
		t.Errorf("hidden share %.3f, want >= 0.95", st.HiddenShare())
	}
}

// TestFeederMisuse: sizes are checked, and uploading more batches than
// slots without Done is an error, not a silent overwrite.
func TestFeederMisuse(t *testing.T) {
	d := newSim(1e9, time.Millisecond, time.Millisecond)
	f := feed.New(d, feed.Options{})
	h := func() feed.HostBatch {
		return &feed.Arrays{Image: make([]float32, 2*8), Label: make([]float32, 2*8), N: 2, C: 1, Patch: [3]int{2, 2, 2}}
	}
	bad := h()
	bad.(*feed.Arrays).Label = bad.(*feed.Arrays).Label[:5]
	if _, err := f.Upload(bad); err == nil || !strings.Contains(err.Error(), "label has 5 floats") {
		t.Errorf("short label: %v", err)
	}
	b0, err := f.Upload(h())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Upload(h()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Upload(h()); err == nil || !strings.Contains(err.Error(), "call Done") {
		t.Errorf("third upload into 2 busy slots: %v", err)
	}
	f.Acquire(b0)
	f.Done(b0)
	if _, err := f.Upload(h()); err != nil {
		t.Errorf("upload after Done: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Done twice did not panic")
			}
		}()
		f.Done(b0)
	}()
}
