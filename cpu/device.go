// Package cpu implements nn.Device in pure Go (no cgo). It is voxtrain's
// numerical reference — every other device is tested against it — and a real
// backend for tests, CI, laptops and CPU validation.
//
// Convolutions run on the kernels of package cpu/kern (channels-last,
// vol2col-free GEMM kernels); everything else (instance norm fused with the
// activation, concatenation, softmax and the losses, optimisers, reductions)
// is written here, each fast op beside a plain reference in ref.go.
//
// Determinism: every reduction splits its range into chunks of a fixed size
// that does not depend on the thread count, sums each chunk in float64 and
// combines the partial sums in chunk order, so results are bit-identical for
// any Threads/GOMAXPROCS.
//
// Streams: the compute stream is synchronous — an op runs to completion on
// the calling goroutine before it returns — and a stream from NewStream runs
// its work in order on a goroutine of its own, so an Upload of the next batch
// overlaps the current step. Waiting on an event from the compute stream
// blocks the caller, which gives the same ordering as a device-side wait.
package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/voxtrain/voxtrain/internal/procstat"

	"github.com/voxtrain/voxtrain/cpu/kern"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

// Device is the CPU implementation of nn.Device. Create it with New.
type Device struct {
	threads int
	eng     kern.Engine
	refConv bool
	compute syncStream

	mu        sync.Mutex
	inUse     int64
	peakInUse int64
}

// Options configure a CPU device.
type Options struct {
	// Threads is the number of goroutines an op may use; 0 means GOMAXPROCS.
	Threads int
	// ReferenceConv runs convolutions on kern's plain reference kernels
	// (single-threaded, float64 accumulation) instead of the fast ones:
	// slow, but the tightest numerical reference, for gradient checks and
	// for validating other devices and kernels.
	ReferenceConv bool
}

// New returns a CPU device.
func New(o Options) *Device {
	t := o.Threads
	if t <= 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return &Device{threads: t, eng: kern.Engine{Threads: t}, refConv: o.ReferenceConv}
}

// MemoryAvailable is the machine's memory available to new allocations
// (nn.MemoryReporter).
func (d *Device) MemoryAvailable() (int64, bool) { return procstat.MemAvailable() }

// Threads returns the number of goroutines ops use.
func (d *Device) Threads() int { return d.threads }

// Name describes the device.
func (d *Device) Name() string {
	if d.refConv {
		return fmt.Sprintf("cpu (%d threads, reference convolutions)", d.threads)
	}
	return fmt.Sprintf("cpu (%d threads)", d.threads)
}

// Err always returns nil: CPU ops fail synchronously (by panicking on
// programming errors or returning errors), never asynchronously.
func (d *Device) Err() error { return nil }

// Tensor is the CPU device's tensor: a shape and a float32 slice.
type Tensor struct {
	shape nn.Shape
	data  []float32
	view  bool
}

// Shape returns the tensor's dimensions.
func (t *Tensor) Shape() nn.Shape { return t.shape }

// Data returns the tensor's memory (for tests and host-side tools; the
// device's ops are the normal way in).
func (t *Tensor) Data() []float32 { return t.data }

// NewTensor wraps host memory as a device tensor without copying; data must
// have shape.Len() elements. It is not counted by MemoryInUse.
func NewTensor(shape nn.Shape, data []float32) *Tensor {
	if shape.Len() != len(data) {
		panic(fmt.Sprintf("cpu.NewTensor: shape %v needs %d elements, have %d", shape, shape.Len(), len(data)))
	}
	return &Tensor{shape: shape.Clone(), data: data, view: true}
}

// Alloc returns a zero-filled tensor.
func (d *Device) Alloc(shape nn.Shape) nn.Tensor {
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("cpu.Alloc: negative dimension in %v", shape))
		}
	}
	n := shape.Len()
	t := &Tensor{shape: shape.Clone(), data: make([]float32, n)}
	d.mu.Lock()
	d.inUse += int64(n) * 4
	if d.inUse > d.peakInUse {
		d.peakInUse = d.inUse
	}
	d.mu.Unlock()
	return t
}

// Free releases t; using it afterwards panics.
func (d *Device) Free(t nn.Tensor) {
	ct := cpuTensor(t)
	if ct.view || ct.data == nil {
		ct.data = nil
		return
	}
	d.mu.Lock()
	d.inUse -= int64(len(ct.data)) * 4
	d.mu.Unlock()
	ct.data = nil
}

// View returns a tensor of another shape sharing t's memory.
func (d *Device) View(t nn.Tensor, shape nn.Shape) nn.Tensor {
	ct := cpuTensor(t)
	if shape.Len() != len(ct.data) {
		panic(fmt.Sprintf("cpu.View: cannot view %v as %v", ct.shape, shape))
	}
	return &Tensor{shape: shape.Clone(), data: ct.data, view: true}
}

// MemoryInUse returns the bytes allocated by Alloc and not freed, and the peak.
func (d *Device) MemoryInUse() (cur, peak int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inUse, d.peakInUse
}

// cpuTensor returns the CPU tensor behind t, panicking on a foreign tensor.
func cpuTensor(t nn.Tensor) *Tensor {
	ct, ok := t.(*Tensor)
	if !ok {
		panic(fmt.Sprintf("cpu: tensor of type %T does not belong to the CPU device", t))
	}
	if ct.data == nil && ct.shape.Len() != 0 {
		panic("cpu: use of a freed tensor")
	}
	return ct
}

// mustLen panics unless t has n elements.
func mustLen(op string, t nn.Tensor, n int) []float32 {
	x := cpuTensor(t).data
	if len(x) != n {
		panic(fmt.Sprintf("cpu.%s: tensor %v has %d elements, want %d", op, t.Shape(), len(x), n))
	}
	return x
}

// mustShape panics unless t has shape s.
func mustShape(op string, t nn.Tensor, s nn.Shape) []float32 {
	ct := cpuTensor(t)
	if !ct.shape.Equal(s) {
		panic(fmt.Sprintf("cpu.%s: tensor shape %v, want %v", op, ct.shape, s))
	}
	return ct.data
}

// ComputeStream returns the synchronous compute stream.
func (d *Device) ComputeStream() nn.Stream { return &d.compute }

// NewStream returns an asynchronous stream backed by a goroutine that runs
// while it has work.
func (d *Device) NewStream() nn.Stream { return &asyncStream{} }

// Upload copies src into dst on stream s.
func (d *Device) Upload(s nn.Stream, dst nn.Tensor, src []float32) error {
	ct := cpuTensor(dst)
	if len(src) != len(ct.data) {
		return fmt.Errorf("upload: host buffer has %d floats, tensor %v needs %d", len(src), ct.shape, len(ct.data))
	}
	return enqueue(s, func() { copy(ct.data, src) })
}

// Download copies src into dst on stream s.
func (d *Device) Download(s nn.Stream, dst []float32, src nn.Tensor) error {
	ct := cpuTensor(src)
	if len(dst) != len(ct.data) {
		return fmt.Errorf("download: host buffer has %d floats, tensor %v needs %d", len(dst), ct.shape, len(ct.data))
	}
	return enqueue(s, func() { copy(dst, ct.data) })
}

// Conv3DForward computes y = conv(x, w) + b.
func (d *Device) Conv3DForward(g geom.Conv, x, w, b, y nn.Tensor) {
	checkGeom("Conv3DForward", g)
	xs := mustShape("Conv3DForward", x, g.InShape())
	ws := mustShape("Conv3DForward", w, g.WeightShape())
	ys := mustShape("Conv3DForward", y, g.OutShape())
	var bs []float32
	if b != nil {
		bs = mustLen("Conv3DForward", b, g.OutC)
	}
	if d.refConv {
		kern.Conv3DForwardRef(g, xs, ws, bs, ys)
		return
	}
	d.eng.Conv3DForward(g, xs, ws, bs, ys)
}

// Conv3DBackwardData computes dx from dy.
func (d *Device) Conv3DBackwardData(g geom.Conv, dy, w, dx nn.Tensor) {
	checkGeom("Conv3DBackwardData", g)
	dys := mustShape("Conv3DBackwardData", dy, g.OutShape())
	ws := mustShape("Conv3DBackwardData", w, g.WeightShape())
	dxs := mustShape("Conv3DBackwardData", dx, g.InShape())
	if d.refConv {
		kern.Conv3DBackwardDataRef(g, dys, ws, dxs)
		return
	}
	d.eng.Conv3DBackwardData(g, dys, ws, dxs)
}

// Conv3DBackwardWeight computes dw and db.
func (d *Device) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db nn.Tensor) {
	checkGeom("Conv3DBackwardWeight", g)
	xs := mustShape("Conv3DBackwardWeight", x, g.InShape())
	dys := mustShape("Conv3DBackwardWeight", dy, g.OutShape())
	dws := mustShape("Conv3DBackwardWeight", dw, g.WeightShape())
	var dbs []float32
	if db != nil {
		dbs = mustLen("Conv3DBackwardWeight", db, g.OutC)
	}
	if d.refConv {
		kern.Conv3DBackwardWeightRef(g, xs, dys, dws, dbs)
		return
	}
	d.eng.Conv3DBackwardWeight(g, xs, dys, dws, dbs)
}

func checkGeom(op string, g geom.Conv) {
	if err := g.Validate(); err != nil {
		panic(fmt.Sprintf("cpu.%s: %v", op, err))
	}
}

var _ nn.Device = (*Device)(nil)
