package data

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Allocator supplies the host memory behind batch buffers. A stream asks
// for all of its buffers when it is made and frees them when it closes,
// so Alloc and Free are never on the per-batch path.
//
// The CPU device uses AlignedAllocator. The CUDA device supplies
// page-locked memory from cuMemHostAlloc, viewed as []float32 with
// unsafe.Slice, so its uploads can run asynchronously; such memory is not
// Go memory and must be freed explicitly, hence Free.
type Allocator interface {
	// Alloc returns n float32s that stay valid and unmoved until Free. The
	// contents need not be zeroed: every batch overwrites its samples.
	Alloc(n int) ([]float32, error)
	// Free releases a slice that Alloc returned, once.
	Free(buf []float32)
}

// AlignedAllocator allocates Go memory aligned to 64 bytes (a cache line,
// and the widest vector load). The zero value is ready to use.
type AlignedAllocator struct{}

// Alloc returns n float32s whose first element is 64-byte aligned.
func (AlignedAllocator) Alloc(n int) ([]float32, error) {
	if n < 0 {
		return nil, fmt.Errorf("alloc: negative size %d", n)
	}
	raw := make([]float32, n+16)
	off := int((64-uintptr(unsafe.Pointer(&raw[0]))%64)%64) / 4
	return raw[off : off+n : off+n], nil
}

// Free does nothing: the garbage collector reclaims Go memory.
func (AlignedAllocator) Free([]float32) {}

// Batch is one batch in a host buffer from a stream's ring. The consumer
// owns it from Next until Release; the buffer is then reused, so nothing
// may keep a reference to Image or Label after Release.
type Batch struct {
	// Image holds N×C×D×H×W float32 (NCDHW).
	Image []float32
	// Label holds N×D×H×W float32 class indices (NDHW).
	Label []float32
	// N is the number of samples (the batch size, or fewer for the last
	// batch of a one-pass epoch); C the image channels.
	N, C int
	// Patch is the spatial size (D, H, W).
	Patch [3]int
	// Epoch and Step (batch index within the epoch) locate the batch;
	// LastInEpoch marks the epoch's final batch.
	Epoch, Step int
	LastInEpoch bool
	// Seq is the batch's position in its stream, from 0.
	Seq int64
	// Samples describes each slot: after a skipped case was replaced,
	// Samples[i].Case is the case actually used.
	Samples []Sample
	// Unknown holds each slot's unknown classes, the Case.Unknown of the
	// case its patch was drawn from (a patch lies inside one case, so the
	// mask is exact for every voxel of the slot): for the loss
	// (nn.Criterion.SetUnknown). Valid with the batch, until Release.
	Unknown []uint8

	imgBuf, lblBuf []float32 // the whole buffer (capacity batch size)
	r              *ring
	held           atomic.Bool   // true between delivery and Release
	pending        atomic.Int32  // samples not yet written
	ready          chan struct{} // receives once when pending reaches 0
	mu             sync.Mutex
	err            error // first sample error (fail mode)
}

// HostArrays returns the batch's image and label arrays and sizes (what
// package feed uploads; see feed.HostBatch).
func (b *Batch) HostArrays() (image, label []float32, n, c int, patch [3]int) {
	return b.Image, b.Label, b.N, b.C, b.Patch
}

// ImageSlot returns sample i's image (C×D×H×W) inside the batch.
func (b *Batch) ImageSlot(i int) []float32 {
	n := b.C * b.Patch[0] * b.Patch[1] * b.Patch[2]
	return b.imgBuf[i*n : (i+1)*n : (i+1)*n]
}

// LabelSlot returns sample i's label (D×H×W) inside the batch.
func (b *Batch) LabelSlot(i int) []float32 {
	n := b.Patch[0] * b.Patch[1] * b.Patch[2]
	return b.lblBuf[i*n : (i+1)*n : (i+1)*n]
}

// Release gives the buffer back to its ring. A GPU consumer calls it only
// after the asynchronous copy out of it has completed. Releasing twice is
// a bug in the caller and panics.
func (b *Batch) Release() {
	if !b.held.CompareAndSwap(true, false) {
		panic("data: Batch.Release of a batch that is not held (released twice?)")
	}
	b.r.held.Add(-1)
	b.r.free <- b
}

// setErr records the first error of the batch's samples.
func (b *Batch) setErr(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

func (b *Batch) takeErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.err
	b.err = nil
	return err
}

// ring is a fixed set of batch buffers cycling between the stream (free),
// the workers (being filled) and the consumer (held until Release).
type ring struct {
	free  chan *Batch
	all   []*Batch
	alloc Allocator
	held  atomic.Int32 // delivered and not released
}

// deliver hands b to the consumer.
func (r *ring) deliver(b *Batch) {
	r.held.Add(1)
	b.held.Store(true)
}

func (r *ring) heldCount() int { return int(r.held.Load()) }

func newRing(alloc Allocator, count, batch, channels int, patch [3]int) (*ring, error) {
	vox := patch[0] * patch[1] * patch[2]
	r := &ring{free: make(chan *Batch, count), alloc: alloc}
	for i := 0; i < count; i++ {
		img, err := alloc.Alloc(batch * channels * vox)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("allocate batch buffer %d of %d: %w", i+1, count, err)
		}
		lbl, err := alloc.Alloc(batch * vox)
		if err != nil {
			alloc.Free(img)
			r.close()
			return nil, fmt.Errorf("allocate batch buffer %d of %d: %w", i+1, count, err)
		}
		b := &Batch{imgBuf: img, lblBuf: lbl, C: channels, Patch: patch, r: r,
			ready: make(chan struct{}, 1), Samples: make([]Sample, 0, batch), Unknown: make([]uint8, 0, batch)}
		r.all = append(r.all, b)
		r.free <- b
	}
	return r, nil
}

// close frees every buffer; the stream has made sure no worker and no
// consumer still uses one.
func (r *ring) close() {
	for _, b := range r.all {
		r.alloc.Free(b.imgBuf)
		r.alloc.Free(b.lblBuf)
		b.imgBuf, b.lblBuf, b.Image, b.Label = nil, nil, nil, nil
	}
	r.all = nil
}
