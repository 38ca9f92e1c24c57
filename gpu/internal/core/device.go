// Package core is the device-independent half of voxtrain's CUDA device:
// tensors, a caching allocator, and every nn.Device operation expressed as
// kernel launches (through kernels.Ops) and column-major SGEMMs, over a
// small Backend interface.
//
// Package gpu supplies the CUDA Backend (cuLaunchKernel, cuBLAS, cuMemAlloc,
// all on the compute stream) and adds what is stream-specific: streams,
// events, Upload and Download. The tests of this package supply a Backend
// that runs the very same kernels under kernels/emu's host emulation and a
// Go SGEMM, so all of the device's logic — argument plumbing, scratch
// sizing, the vol2col/GEMM/col2vol tiling of the convolutions, downloads and
// error reporting — is checked against package cpu on a machine without a
// GPU, even though package gpu itself can only be built there.
//
// Errors: shape mismatches and arguments kernels.Ops rejects are
// programming errors and panic, as on the CPU device; failures of the
// backend (a launch, a GEMM, an allocation, a copy) are recorded as the
// device's sticky error (Err) and the operation carries on as a no-op
// as far as possible — the caller checks Err once per step.
package core

import (
	"errors"
	"fmt"
	"sync"

	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// Backend is the machine below a Device. All work runs in the order it is
// issued, on one stream (the compute stream). B is the device pointer type;
// its zero value is the null pointer.
type Backend[B comparable] interface {
	// Launcher launches kernels on the compute stream.
	kernels.Launcher[B]
	// Gemm computes C = alpha·op(A)·op(B) + beta·C on column-major
	// matrices, as cublasSgemm: op(A) is m×k, op(B) k×n, C m×n.
	Gemm(transA, transB bool, m, n, k int, alpha float32, a B, lda int, b B, ldb int, beta float32, c B, ldc int) error
	// GemmBF16 is Gemm with A and B in bfloat16 (uint16 bit patterns) and
	// C in float32, accumulating in float32, as cublasGemmEx with
	// CUDA_R_16BF inputs, a CUDA_R_32F output and CUBLAS_COMPUTE_32F.
	GemmBF16(transA, transB bool, m, n, k int, alpha float32, a B, lda int, b B, ldb int, beta float32, c B, ldc int) error
	// Malloc returns bytes of device memory with undefined contents.
	Malloc(bytes int) (B, error)
	// MemFree releases memory from Malloc once no issued work uses it.
	MemFree(p B) error
	// Write copies src into device memory at dst, ordered after the work
	// issued before it; src may be reused as soon as Write returns.
	Write(dst B, src []byte) error
	// Read copies device memory at src into dst once all work issued
	// before it has completed.
	Read(dst []byte, src B) error
	// Op names the nn.Device operation whose work follows, for error
	// messages of work that fails later (asynchronously).
	Op(name string)
	// Addr returns p's device address (0 for the null pointer), as the
	// tables of tensor lists hold it (kernels.ListTable).
	Addr(p B) uint64
}

// Options configure a Device.
type Options struct {
	// Name is what Device.Name returns (the GPU's name, say).
	Name string
	// Prefix starts every panic and error message ("gpu").
	Prefix string
	// ConvWorkspace bounds the bytes of one vol2col tile (the column
	// matrix of a slab of output voxels fed to one GEMM). 0 means 256 MiB.
	ConvWorkspace int
	// Chunk and FlatChunk are kernels.Ops' reduction chunk sizes (0: the
	// defaults). Results depend on them, so keep them fixed.
	Chunk, FlatChunk int
	// BF16 computes the convolutions' GEMMs from bfloat16 copies of their
	// operands (weights, vol2col matrix, output gradient), accumulating in
	// float32 into float32 results: bf16 mixed precision. Weights,
	// activations, gradients and optimiser state stay float32 (the
	// master copy) unless BF16Activations (and BF16Gradients); every
	// other op computes in float32.
	// bf16 keeps float32's exponent range, so gradients need no loss
	// scaling.
	BF16 bool
	// BF16Activations, with BF16, stores the activations nn keeps (the
	// tensors of AllocActivation: convolution outputs, normalised and
	// activated block outputs, transposed-convolution outputs, concats)
	// as bfloat16, halving their memory, as PyTorch's autocast does.
	// Everything else stays float32: weights, norm statistics, logits,
	// losses, gradients (activation gradients too unless BF16Gradients)
	// and optimiser state. Without BF16 it has no effect.
	BF16Activations bool
	// BF16Gradients, with BF16 and BF16Activations, stores the gradients
	// of those activations (the tensors of AllocActivationGradient: the
	// workspace's gradient buffers) as bfloat16 too, as autocast does
	// (the gradient of a bf16 tensor is bf16); the loss gradients, the
	// parameters' gradients and the optimiser state stay float32.
	// Without both it has no effect.
	BF16Gradients bool
	// PerTensorOptimiser issues the optimiser's ops (SumSquares,
	// SGDUpdate, AdamWUpdate) one tensor at a time, two or three launches
	// per parameter, instead of the tensor-list kernels' three launches
	// for all of them: the escape hatch should the list kernels fail on a
	// GPU. The results are the same bits.
	PerTensorOptimiser bool
}

// DefaultConvWorkspace is the vol2col tile budget when Options leave it 0.
const DefaultConvWorkspace = 256 << 20

// Device implements the operations of nn.Device over a Backend (all of
// them but Name, Err, the streams, Upload and Download, which depend on
// the machine's streams and live in the package that wraps Device).
// Alloc, Free, View, MemoryInUse and Err are safe for concurrent use; the
// ops share scratch buffers and must be issued by one goroutine at a time
// (as nn issues them: from the training loop).
type Device[B comparable] struct {
	machine Backend[B] // the CUDA device, or the host emulation in tests
	ops     kernels.Ops[B]
	opt     Options
	prefix  string

	mu    sync.Mutex
	err   error
	cache cache[B]

	// Reused device buffers, grown on demand; only compute-stream work uses
	// them, so a later op may reuse one as soon as an earlier op issued
	// its last use. scratch holds the intermediates of reductions and the
	// soft skeleton, small the few values an op copies in from or out to
	// the host (loss sums, per-sample coefficients, a bad-label cell), and
	// convTile one tile of a convolution's vol2col matrix (in the bf16
	// convolutions, a tile of the float32 dcol or of the bf16 output
	// gradient).
	scratch, convTile, small buffer[B]
	// bf16 operands of the BF16 convolutions: a tile of the vol2col
	// matrix or of the output gradient, and the weights.
	convTileBF16, weightsBF16 buffer[B]

	// cuDNN (UseDNN): the engine, the precision, its workspace, and the
	// bf16 copies of a convolution's input and output activations.
	dnn        *dnn.Engine[B]
	dnnPrec    dnn.Precision
	dnnWork    buffer[B]
	dnnX, dnnY buffer[B]

	// float32 copies of bf16 operands, for the op mixes that compute in
	// float32 (see bf16act.go).
	wideA, wideB, wideC buffer[B]
	// col2volCarry holds the float32 partial sums that one tile of a bf16
	// backward-data leaves to the next (kernels.Col2VolBF16), in two
	// halves used in turn.
	col2volCarry buffer[B]

	// lists holds the device copies of tensor-list tables
	// (kernels.ListTable) by content, oldest first: the optimiser passes
	// the same lists at every step, so each is copied to the device once.
	lists []listTable[B]

	// op is the operation being issued (begin), for the messages of
	// operand type checks.
	op string
}

// Tensor is a Device's tensor: a shape, a device pointer and an element
// type, float32 or (AllocActivation, AllocActivationGradient in bf16
// mode) bfloat16.
type Tensor[B comparable] struct {
	shape nn.Shape
	ptr   B
	elems int        // elements
	bf16  bool       // bfloat16 elements (uint16 bit patterns), else float32
	root  *Tensor[B] // the allocation (itself unless a view)
	freed bool       // root only
	// Fence is for the wrapping package: package gpu keeps here the event
	// after which the tensor's zero fill is complete, for copies on other
	// streams.
	Fence nn.Event
}

// Shape returns the tensor's dimensions.
func (t *Tensor[B]) Shape() nn.Shape { return t.shape }

// Ptr returns the tensor's device pointer.
func (t *Tensor[B]) Ptr() B { return t.ptr }

// Len returns the number of elements.
func (t *Tensor[B]) Len() int { return t.elems }

// BF16 reports whether the tensor holds bfloat16 elements (the upper 16
// bits of float32s, as uint16s) rather than float32s.
func (t *Tensor[B]) BF16() bool { return t.bf16 }

// ElemBytes returns the bytes of one element: 2 for bf16, 4 for float32.
func (t *Tensor[B]) ElemBytes() int {
	if t.bf16 {
		return 2
	}
	return 4
}

// Root returns the allocation a view belongs to (t itself otherwise).
func (t *Tensor[B]) Root() *Tensor[B] { return t.root }

// New returns a Device over be.
func New[B comparable](be Backend[B], o Options) *Device[B] {
	if o.ConvWorkspace <= 0 {
		o.ConvWorkspace = DefaultConvWorkspace
	}
	// Tiles hold at most 2³¹−1 bytes' worth of floats per GEMM operand.
	o.ConvWorkspace = min(o.ConvWorkspace, 1<<30)
	if o.Prefix == "" {
		o.Prefix = "gpu"
	}
	d := &Device[B]{machine: be, opt: o, prefix: o.Prefix}
	d.ops = kernels.Ops[B]{Launcher: launcher[B]{d}, Chunk: o.Chunk, FlatChunk: o.FlatChunk}
	d.cache.machine = be
	return d
}

// Backend returns the device's backend.
func (d *Device[B]) Backend() Backend[B] { return d.machine }

// Name returns Options.Name.
func (d *Device[B]) Name() string { return d.opt.Name }

// Err returns the first backend error met, if any.
func (d *Device[B]) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// SetErr records err as the device's sticky error unless one is recorded.
func (d *Device[B]) SetErr(err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

// fail records a backend error of operation op.
func (d *Device[B]) fail(op string, err error) {
	if err != nil {
		d.SetErr(fmt.Errorf("%s.%s: %w", d.prefix, op, err))
	}
}

// launcher passes launches to the backend and turns its failures into the
// sticky error, so that an error kernels.Ops returns is always one of its
// own argument checks.
type launcher[B comparable] struct{ d *Device[B] }

func (l launcher[B]) Launch(k kernels.Kernel, grid kernels.Dim3, args ...any) error {
	if err := l.d.machine.Launch(k, grid, args...); err != nil {
		l.d.SetErr(fmt.Errorf("%s: launch %s: %w", l.d.prefix, k.Name, err))
	}
	return nil
}

func (l launcher[B]) Offset(b B, bytes int) B { return l.d.machine.Offset(b, bytes) }

// check panics on an argument error of kernels.Ops (a programming error
// or a tensor beyond the kernels' int32 indexing).
func (d *Device[B]) check(op string, err error) {
	if err != nil {
		panic(fmt.Sprintf("%s.%s: %v", d.prefix, op, err))
	}
}

// begin names op for the backend's asynchronous error messages and the
// operand type checks.
func (d *Device[B]) begin(op string) { d.op = op; d.machine.Op(op) }

// OutOfMemoryError is the panic value of Alloc when the device has no
// memory left for a tensor, even after releasing its cached blocks.
type OutOfMemoryError struct {
	Shape         nn.Shape
	Bytes         int64 // requested
	InUse, Cached int64 // tensor bytes in use, and held in the cache
	Err           error // the backend's error
}

// Error describes the failed allocation and the memory held at the time.
func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("out of device memory allocating %v (%.1f MiB) with %.1f MiB in tensors and %.1f MiB cached: %v",
		e.Shape, mib(e.Bytes), mib(e.InUse), mib(e.Cached), e.Err)
}

// Unwrap returns the backend's error.
func (e *OutOfMemoryError) Unwrap() error { return e.Err }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// Alloc returns a zero-filled float32 tensor. It panics with an
// *OutOfMemoryError when the backend has no memory for it.
func (d *Device[B]) Alloc(shape nn.Shape) nn.Tensor { return d.AllocTensor(shape) }

// AllocTensor is Alloc returning the concrete type.
func (d *Device[B]) AllocTensor(shape nn.Shape) *Tensor[B] { return d.alloc("Alloc", shape, false) }

// ActivationBytes returns the bytes per element of AllocActivation's
// tensors (nn.ActivationAllocator): 2 with Options.BF16 and
// BF16Activations, else 4.
func (d *Device[B]) ActivationBytes() int {
	if d.opt.BF16 && d.opt.BF16Activations {
		return 2
	}
	return 4
}

// AllocActivation returns a zero-filled tensor for an activation nn keeps
// (nn.ActivationAllocator): bfloat16 with Options.BF16 and
// BF16Activations, else float32 (as Alloc).
func (d *Device[B]) AllocActivation(shape nn.Shape) nn.Tensor {
	return d.alloc("AllocActivation", shape, d.ActivationBytes() == 2)
}

// ActivationGradientBytes returns the bytes per element of
// AllocActivationGradient's tensors (nn.ActivationGradientAllocator): 2
// with Options.BF16, BF16Activations and BF16Gradients, else 4.
func (d *Device[B]) ActivationGradientBytes() int {
	if d.ActivationBytes() == 2 && d.opt.BF16Gradients {
		return 2
	}
	return 4
}

// AllocActivationGradient returns a zero-filled tensor for the gradient of
// an activation (nn.ActivationGradientAllocator): bfloat16 with
// Options.BF16, BF16Activations and BF16Gradients, else float32 (as
// Alloc).
func (d *Device[B]) AllocActivationGradient(shape nn.Shape) nn.Tensor {
	return d.alloc("AllocActivationGradient", shape, d.ActivationGradientBytes() == 2)
}

// alloc allocates a zero-filled tensor of bf16 or float32 elements.
func (d *Device[B]) alloc(op string, shape nn.Shape, bf16 bool) *Tensor[B] {
	for _, s := range shape {
		if s < 0 {
			panic(fmt.Sprintf("%s.%s: negative dimension in %v", d.prefix, op, shape))
		}
	}
	n := shape.Len()
	t := &Tensor[B]{shape: shape.Clone(), elems: n, bf16: bf16}
	t.root = t
	bytes := t.bytes()
	p, err := d.cache.get(bytes, true)
	if err != nil {
		inUse, _, cached := d.cache.stats()
		panic(&OutOfMemoryError{Shape: shape.Clone(), Bytes: int64(bytes), InUse: inUse, Cached: cached, Err: err})
	}
	t.ptr = p
	// Not begin: Alloc may be called concurrently with the ops.
	d.machine.Op(op)
	// A bf16 tensor is zeroed as float32 words: ⌈n/2⌉ of them, inside its
	// block (blocks are whole multiples of 512 bytes).
	words := n
	if bf16 {
		words = (n + 1) / 2
	}
	d.check(op, d.ops.Fill(p, words, 0))
	return t
}

// bytes returns the bytes of the tensor's elements.
func (t *Tensor[B]) bytes() int { return t.ElemBytes() * t.elems }

// Free returns a tensor's memory to the cache; views are not freed.
func (d *Device[B]) Free(t nn.Tensor) {
	ct := d.Tensor(t)
	if ct.root != ct {
		return
	}
	ct.freed = true
	d.cache.put(ct.ptr, ct.bytes(), true)
}

// View returns a tensor of another shape sharing t's memory (and its
// element type).
func (d *Device[B]) View(t nn.Tensor, shape nn.Shape) nn.Tensor {
	ct := d.Tensor(t)
	if shape.Len() != ct.elems {
		panic(fmt.Sprintf("%s.View: cannot view %v as %v", d.prefix, ct.shape, shape))
	}
	return &Tensor[B]{shape: shape.Clone(), ptr: ct.ptr, elems: ct.elems, bf16: ct.bf16, root: ct.root}
}

// MemoryInUse returns the bytes of live tensors and their peak.
func (d *Device[B]) MemoryInUse() (cur, peak int64) {
	cur, peak, _ = d.cache.stats()
	return cur, peak
}

// PeakAllocated returns the peak bytes of device memory in use by
// tensors, the ops' buffers and workspaces together (each rounded up to
// its block): what PyTorch's torch.cuda.max_memory_allocated counts.
func (d *Device[B]) PeakAllocated() int64 { return d.cache.peakOut() }

// Reserved returns the bytes the device holds from the backend: live
// tensors and buffers rounded up to their blocks, plus cached blocks.
func (d *Device[B]) Reserved() int64 { return d.cache.reservedBytes() }

// ReleaseCached frees every cached block back to the backend.
func (d *Device[B]) ReleaseCached() error { return d.cache.release() }

// Close frees the device's own buffers and every cached block. Tensors
// still allocated stay allocated (the backend's context owns them).
func (d *Device[B]) Close() error {
	var errs []error
	for _, b := range []*buffer[B]{&d.scratch, &d.convTile, &d.small, &d.convTileBF16, &d.weightsBF16, &d.dnnWork, &d.dnnX, &d.dnnY, &d.wideA, &d.wideB, &d.wideC, &d.col2volCarry} {
		b.drop(&d.cache)
	}
	for i := range d.lists {
		d.lists[i].buf.drop(&d.cache)
	}
	d.lists = nil
	errs = append(errs, d.cache.release())
	return errors.Join(errs...)
}

// Tensor returns the device tensor behind t, of either element type,
// panicking on a foreign or freed tensor.
func (d *Device[B]) Tensor(t nn.Tensor) *Tensor[B] {
	ct, ok := t.(*Tensor[B])
	if !ok || ct == nil {
		panic(fmt.Sprintf("%s: tensor of type %T does not belong to this device", d.prefix, t))
	}
	if ct.root.freed {
		panic(fmt.Sprintf("%s: use of a freed tensor %v", d.prefix, ct.shape))
	}
	return ct
}

// f32 returns the float32 device tensor behind t, panicking (naming the
// op being issued) on a bf16 one: the ops that take bf16 operands say so
// and reach them through Tensor; every other use of a bf16 tensor is a
// programming error, as a shape mismatch is.
func (d *Device[B]) f32(t nn.Tensor) *Tensor[B] {
	ct := d.Tensor(t)
	if ct.bf16 {
		panic(fmt.Sprintf("%s.%s: tensor %v is bfloat16; the op takes float32 tensors there", d.prefix, d.op, ct.shape))
	}
	return ct
}

// ptr returns float32 tensor t's pointer, or the null pointer for a nil
// tensor.
func (d *Device[B]) ptr(t nn.Tensor) B {
	if t == nil {
		var null B
		return null
	}
	return d.f32(t).ptr
}

// mustLen returns float32 tensor t's pointer, panicking unless t has n
// elements.
func (d *Device[B]) mustLen(op string, t nn.Tensor, n int) B {
	ct := d.f32(t)
	if ct.elems != n {
		panic(fmt.Sprintf("%s.%s: tensor %v has %d elements, want %d", d.prefix, op, ct.shape, ct.elems, n))
	}
	return ct.ptr
}

// mustShape returns float32 tensor t's pointer, panicking unless t has
// shape s.
func (d *Device[B]) mustShape(op string, t nn.Tensor, s nn.Shape) B {
	d.f32(t)
	return d.shaped(op, t, s).ptr
}

// shaped returns the tensor behind t, of either element type, panicking
// unless it has shape s.
func (d *Device[B]) shaped(op string, t nn.Tensor, s nn.Shape) *Tensor[B] {
	ct := d.Tensor(t)
	if !ct.shape.Equal(s) {
		panic(fmt.Sprintf("%s.%s: tensor shape %v, want %v", d.prefix, op, ct.shape, s))
	}
	return ct
}

// dims5 returns the dimensions of a 5-D tensor, panicking otherwise.
func (d *Device[B]) dims5(op string, t nn.Tensor) (n, a, b, c, e int) {
	s := d.Tensor(t).shape
	if len(s) != 5 {
		panic(fmt.Sprintf("%s.%s: want a 5-D tensor, have shape %v", d.prefix, op, s))
	}
	return s[0], s[1], s[2], s[3], s[4]
}

// lastDim returns t's last dimension (its channels), panicking for a
// scalar shape.
func (d *Device[B]) lastDim(op string, t nn.Tensor) int {
	s := d.Tensor(t).shape
	if len(s) == 0 || s[len(s)-1] <= 0 {
		panic(fmt.Sprintf("%s.%s: tensor shape %v has no channel axis", d.prefix, op, s))
	}
	return s[len(s)-1]
}
