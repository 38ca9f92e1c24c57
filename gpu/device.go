//go:build cuda

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/gpu/internal/ranges"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
	"gorgonia.org/cu"
)

// Math selects how cuBLAS computes the convolutions' float32 GEMMs.
type Math int

const (
	// MathFP32 computes in float32 (CUBLAS_DEFAULT_MATH): the results
	// match the CPU device to float32 rounding.
	MathFP32 Math = iota
	// MathTF32 lets cuBLAS use TF32 tensor cores (Ampere and later):
	// inputs rounded to a 10-bit mantissa, float32 accumulation, several
	// times the FP32 throughput. PyTorch enables it for convolutions by
	// default (torch.backends.cudnn.allow_tf32).
	MathTF32
	// MathBF16 is bf16 mixed precision: the convolutions' GEMMs take
	// bfloat16 copies of their operands (8-bit mantissa) on tensor cores
	// and accumulate in float32 into float32 results; weights, activations,
	// gradients and optimiser state stay float32 (see core.Options.BF16).
	// bf16 has float32's exponent range, so no loss scaling is needed.
	MathBF16
)

func (m Math) String() string {
	switch m {
	case MathTF32:
		return "tf32"
	case MathBF16:
		return "bf16"
	}
	return "fp32"
}

// ParseMath parses "fp32", "tf32" or "bf16".
func ParseMath(s string) (Math, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "":
		return MathFP32, nil
	case "tf32":
		return MathTF32, nil
	case "bf16":
		return MathBF16, nil
	}
	return 0, fmt.Errorf("gpu: math mode %q, want fp32, tf32 or bf16", s)
}

// SyncEnv names the environment variable that, set to 1, makes the device
// synchronise after every kernel, GEMM and copy, so that a failure names
// the op and kernel that caused it (like CUDA_LAUNCH_BLOCKING; slow).
const SyncEnv = "VOXTRAIN_CUDA_SYNC"

// Options configure a Device.
type Options struct {
	// Ordinal is the GPU's index among the visible devices (see
	// CUDA_VISIBLE_DEVICES).
	Ordinal int
	// Math is the GEMMs' precision (default fp32).
	Math Math
	// ConvWorkspace bounds the bytes of one vol2col tile (0: 256 MiB).
	ConvWorkspace int
	// SyncEveryOp synchronises after every launch, GEMM and copy so that
	// failures name their op (also set by VOXTRAIN_CUDA_SYNC=1).
	SyncEveryOp bool
	// SpinWait makes host waits spin instead of sleeping
	// (CU_CTX_SCHED_SPIN): lower latency per synchronisation, but a CPU
	// core busy while the GPU works — which the data workers would
	// rather have. Default: blocking waits (CU_CTX_SCHED_BLOCKING_SYNC).
	SpinWait bool
}

// Info describes the GPU and the libraries a Device runs on.
type Info struct {
	Ordinal           int
	Name              string
	ComputeCapability [2]int
	SMs               int
	MemoryBytes       int64
	Driver            int // cuDriverGetVersion: 12040 = 12.4
	CuBLASPath        string
	CuBLASVersion     string
	Math              Math
	// Notes lists settings that could not be applied as asked.
	Notes []string
}

// Device is the CUDA implementation of nn.Device. Create it with New and
// Close it when done. Streams, events, uploads, downloads, Alloc and Free
// may be used from several goroutines; the ops share scratch buffers and
// are issued by one goroutine at a time (nn's training loop).
type Device struct {
	*core.Device[cu.DevicePtr]

	core    *core.Device[cu.DevicePtr]
	th      *thread
	dev     cu.Device
	compute *Stream
	blas    *cublas
	funcs   map[string]cu.Function
	mods    []cu.Module
	pinned  ranges.Set // pinned host allocations (PinnedAllocator)
	sync    bool       // synchronise after every piece of work (SyncEnv)
	spin    bool       // host waits spin (Options.SpinWait)
	info    Info
	name    string

	opMu sync.Mutex
	op   string // the nn.Device op whose work is being issued

	streams atomic.Int32
	closed  atomic.Bool
}

var _ nn.Device = (*Device)(nil)

// minDriver is the oldest driver (cuDriverGetVersion) that JIT-compiles
// the kernels' PTX (ISA 7.8, nvcc 11.8).
const minDriver = 11080

// New opens GPU o.Ordinal: its primary context on a locked OS thread, a
// compute stream, the kernels' PTX modules and cuBLAS.
func New(o Options) (*Device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu: cuDeviceGetCount: %w", err)
	}
	if o.Math != MathFP32 && o.Math != MathTF32 && o.Math != MathBF16 {
		return nil, fmt.Errorf("gpu: math mode %d, want MathFP32, MathTF32 or MathBF16", o.Math)
	}
	if o.Ordinal < 0 || o.Ordinal >= n {
		return nil, fmt.Errorf("gpu: device %d requested, %d visible (CUDA_VISIBLE_DEVICES=%q)", o.Ordinal, n, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	dev, err := cu.GetDevice(o.Ordinal)
	if err != nil {
		return nil, fmt.Errorf("gpu: cuDeviceGet(%d): %w", o.Ordinal, err)
	}
	info := Info{Ordinal: o.Ordinal, Driver: cu.Version(), Math: o.Math}
	if info.Name, err = dev.Name(); err != nil {
		return nil, fmt.Errorf("gpu: cuDeviceGetName: %w", err)
	}
	if info.ComputeCapability[0], info.ComputeCapability[1], err = dev.ComputeCapability(); err != nil {
		return nil, fmt.Errorf("gpu: %s: %w", info.Name, err)
	}
	if info.SMs, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return nil, fmt.Errorf("gpu: %s: cuDeviceGetAttribute(MULTIPROCESSOR_COUNT): %w", info.Name, err)
	}
	if info.MemoryBytes, err = dev.TotalMem(); err != nil {
		return nil, fmt.Errorf("gpu: %s: cuDeviceTotalMem: %w", info.Name, err)
	}
	if info.ComputeCapability[0] < 8 {
		return nil, fmt.Errorf("gpu: %s has compute capability %d.%d; voxtrain's kernels are PTX for compute_80 and need 8.0 (A100) or newer",
			info.Name, info.ComputeCapability[0], info.ComputeCapability[1])
	}
	if info.Driver < minDriver {
		return nil, fmt.Errorf("gpu: the NVIDIA driver supports CUDA %s; the kernels' PTX (ISA 7.8, CUDA 11.8) needs a driver for CUDA 11.8 or newer (R520+)", cudaVersion(info.Driver))
	}
	sched := cu.SchedBlockingSync
	if o.SpinWait {
		sched = cu.SchedSpin
	}
	// Fails if the primary context is already active with other flags
	// (another library got there first, on old drivers): not fatal.
	if err := dev.SetPrimaryCtxFlags(sched); err != nil {
		info.Notes = append(info.Notes, fmt.Sprintf("cuDevicePrimaryCtxSetFlags: %v (host waits use the context's existing scheduling)", err))
	}
	if os.Getenv("NVIDIA_TF32_OVERRIDE") == "0" && o.Math == MathTF32 {
		info.Notes = append(info.Notes, "NVIDIA_TF32_OVERRIDE=0 is set: cuBLAS computes in fp32 despite math mode tf32")
	}

	d := &Device{dev: dev, funcs: map[string]cu.Function{}, info: info, spin: o.SpinWait,
		sync: o.SyncEveryOp || os.Getenv(SyncEnv) == "1"}
	d.core = core.New[cu.DevicePtr](backend{d}, core.Options{ConvWorkspace: o.ConvWorkspace, BF16: o.Math == MathBF16})
	d.Device = d.core
	var ctx cu.CUContext
	retained := false
	init := func() error {
		var err error
		if ctx, err = dev.RetainPrimaryCtx(); err != nil {
			return cuErr("cuDevicePrimaryCtxRetain", err)
		}
		retained = true
		return cuErr("cuCtxSetCurrent", cu.SetCurrentContext(ctx))
	}
	fini := func() {
		if retained {
			_ = dev.ReleasePrimaryCtx()
		}
	}
	th, err := startThread(init, fini, d.core.SetErr)
	if err != nil {
		fini()
		return nil, fmt.Errorf("gpu: %s: %w", info.Name, err)
	}
	d.th = th
	fail := func(err error) (*Device, error) {
		d.th.stop(func() {
			if d.blas != nil {
				_ = d.blas.close()
			}
			for _, m := range d.mods {
				_ = m.Unload()
			}
		})
		return nil, fmt.Errorf("gpu: %s: %w", info.Name, err)
	}
	if d.compute, err = d.newStream("compute"); err != nil {
		return fail(err)
	}
	if err := d.th.do(d.loadModules); err != nil {
		return fail(err)
	}
	if err := d.th.do(func() error {
		b, err := openCuBLAS(d.compute.s, o.Math)
		d.blas = b
		return err
	}); err != nil {
		return fail(err)
	}
	d.info.CuBLASPath, d.info.CuBLASVersion = d.blas.path, d.blas.versionString()
	d.name = d.describe()
	return d, nil
}

// cudaVersion formats cuDriverGetVersion's number (12040 → "12.4").
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func (d *Device) describe() string {
	i := d.info
	s := fmt.Sprintf("cuda:%d %s (sm_%d%d, %d SMs, %.0f GiB; driver CUDA %s; cuBLAS %s, %s GEMMs",
		i.Ordinal, i.Name, i.ComputeCapability[0], i.ComputeCapability[1], i.SMs, float64(i.MemoryBytes)/(1<<30),
		cudaVersion(i.Driver), i.CuBLASVersion, i.Math)
	if d.sync {
		s += ", synchronous debugging"
	}
	return s + ")"
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Name describes the device: "cuda:0 NVIDIA A100-SXM4-80GB (sm_80, ...)".
func (d *Device) Name() string { return d.name }

// loadModules loads every PTX module of package kernels and looks up its
// kernels (on the device's thread).
func (d *Device) loadModules() error {
	for _, mod := range kernels.Modules() {
		ptx, err := kernels.PTX(mod)
		if err != nil {
			return err
		}
		m, err := cu.LoadData(string(ptx))
		if err != nil {
			return fmt.Errorf("cuModuleLoadData(%s.ptx): %w%s", mod, err, jitLog(ptx))
		}
		d.mods = append(d.mods, m)
	}
	for _, k := range kernels.All() {
		i := sort.SearchStrings(kernels.Modules(), k.Module)
		if i >= len(d.mods) || kernels.Modules()[i] != k.Module {
			return fmt.Errorf("kernel %s: no PTX module %q", k.Name, k.Module)
		}
		fn, err := d.mods[i].Function(k.Name)
		if err != nil {
			return fmt.Errorf("cuModuleGetFunction(%s, %s): %w", k.Module, k.Name, err)
		}
		d.funcs[k.Name] = fn
	}
	return nil
}

// setOp records the nn.Device op being issued (backend.Op).
func (d *Device) setOp(name string) {
	d.opMu.Lock()
	d.op = name
	d.opMu.Unlock()
}

func (d *Device) curOp() string {
	d.opMu.Lock()
	defer d.opMu.Unlock()
	return d.op
}

// afterWork, in synchronous debugging, waits for the compute stream so a
// failure is pinned on the work just issued.
func (d *Device) afterWork(s *Stream) error {
	if !d.sync {
		return nil
	}
	return cuErr("cuStreamSynchronize after it (synchronous debugging)", s.s.Synchronize())
}

// Alloc returns a zero-filled tensor (its zero fill runs on the compute
// stream; uploads on other streams wait for it).
func (d *Device) Alloc(shape nn.Shape) nn.Tensor {
	t := d.core.AllocTensor(shape)
	t.Fence = d.compute.Record()
	return t
}

// ComputeStream returns the stream every op runs on.
func (d *Device) ComputeStream() nn.Stream { return d.compute }

// NewStream returns a new stream for copies that overlap compute. If the
// driver cannot create one, the failure becomes the device's error and
// the compute stream is returned (correct, without the overlap).
func (d *Device) NewStream() nn.Stream {
	s, err := d.newStream(fmt.Sprintf("stream %d", d.streams.Add(1)))
	if err != nil {
		d.core.SetErr(fmt.Errorf("gpu.NewStream: %w", err))
		return d.compute
	}
	return s
}

// NewCopyStream is NewStream returning the concrete type (RecordTimed).
func (d *Device) NewCopyStream() (*Stream, error) {
	return d.newStream(fmt.Sprintf("stream %d", d.streams.Add(1)))
}

// Compute returns the compute stream as its concrete type.
func (d *Device) Compute() *Stream { return d.compute }

// hostPtr returns the address of a host slice and whether it lies in
// pinned memory from d's PinnedAllocator.
func (d *Device) hostPtr(b []float32) (unsafe.Pointer, bool) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return p, d.pinned.Contains(uintptr(p), 4*len(b))
}

// Upload copies src into dst on stream s with cuMemcpyHtoDAsync.
//
// From pinned memory (PinnedAllocator) the copy is DMA that runs while the
// host and the other streams go on; src must stay untouched until an event
// recorded on s afterwards completes. From pageable (ordinary Go) memory
// the driver first copies src into a staging buffer with the CPU, on the
// device's thread, when the call reaches it: correct, but slower and
// overlapping less. On a stream other than the compute stream, the copy
// waits for dst's zero fill (Alloc).
func (d *Device) Upload(s nn.Stream, dst nn.Tensor, src []float32) error {
	st, err := d.stream(s)
	if err != nil {
		return err
	}
	t := d.core.T(dst)
	if len(src) != t.Len() {
		return fmt.Errorf("upload: host buffer has %d floats, tensor %v needs %d", len(src), t.Shape(), t.Len())
	}
	if len(src) == 0 {
		return nil
	}
	if st != d.compute {
		if f := t.Root().Fence; f != nil {
			st.Wait(f)
		}
	}
	p, pinned := d.hostPtr(src)
	kind := "pageable"
	if pinned {
		kind = "pinned"
	}
	n, ptr := int64(4*len(src)), t.Ptr()
	d.th.post(func() string { return fmt.Sprintf("gpu.Upload (%s, %d bytes, %s stream)", kind, n, st.name) }, func() error {
		if err := cu.MemcpyHtoDAsync(ptr, p, n, st.s); err != nil {
			return cuErr("cuMemcpyHtoDAsync", err)
		}
		runtime.KeepAlive(src) // pageable Go memory: alive until staged
		return d.afterWork(st)
	})
	return nil
}

// Download copies src into dst on stream s with cuMemcpyDtoHAsync; dst is
// valid once an event recorded on s afterwards has completed. Into
// pageable memory the driver's copy returns only when it is complete, so
// the device's thread waits for the stream to get there.
func (d *Device) Download(s nn.Stream, dst []float32, src nn.Tensor) error {
	st, err := d.stream(s)
	if err != nil {
		return err
	}
	t := d.core.T(src)
	if len(dst) != t.Len() {
		return fmt.Errorf("download: host buffer has %d floats, tensor %v needs %d", len(dst), t.Shape(), t.Len())
	}
	if len(dst) == 0 {
		return nil
	}
	if st != d.compute {
		if f := t.Root().Fence; f != nil {
			st.Wait(f)
		}
	}
	p, pinned := d.hostPtr(dst)
	kind := "pageable"
	if pinned {
		kind = "pinned"
	}
	n, ptr := int64(4*len(dst)), t.Ptr()
	d.th.post(func() string { return fmt.Sprintf("gpu.Download (%s, %d bytes, %s stream)", kind, n, st.name) }, func() error {
		if err := cu.MemcpyDtoHAsync(p, ptr, n, st.s); err != nil {
			return cuErr("cuMemcpyDtoHAsync", err)
		}
		runtime.KeepAlive(dst)
		return d.afterWork(st)
	})
	return nil
}

// MemInfo returns the free and total device memory the driver reports.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.th.do(func() error {
		var err error
		free, total, err = cu.MemInfo()
		return cuErr("cuMemGetInfo", err)
	})
	return free, total, err
}

// Close waits for the device's work, releases its memory, cuBLAS handle,
// modules and streams, and its hold on the primary context. Tensors and
// pinned buffers must not be used afterwards. The first error met is
// returned (the device's sticky error included).
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	errs = append(errs, d.th.do(func() error { return cuErr("cuStreamSynchronize(compute)", d.compute.s.Synchronize()) }))
	errs = append(errs, d.core.Close())
	if n := d.pinned.Len(); n > 0 {
		errs = append(errs, fmt.Errorf("gpu: Close with %d pinned host buffers not freed (released with the context)", n))
	}
	d.th.stop(func() {
		if d.blas != nil {
			errs = append(errs, d.blas.close())
		}
		for _, m := range d.mods {
			errs = append(errs, cuErr("cuModuleUnload", m.Unload()))
		}
		errs = append(errs, cuErr("cuStreamDestroy(compute)", d.compute.s.Destroy()))
	})
	if err := d.core.Err(); err != nil {
		errs = append([]error{err}, errs...)
	}
	return errors.Join(errs...)
}

// backend is the CUDA core.Backend: everything runs on the compute stream,
// issued through the device's thread.
type backend struct{ d *Device }

var _ core.Backend[cu.DevicePtr] = backend{}

func (b backend) Op(name string) { b.d.setOp(name) }

func (b backend) Offset(p cu.DevicePtr, bytes int) cu.DevicePtr { return p + cu.DevicePtr(bytes) }

// Launch queues a kernel on the compute stream. Arguments are checked
// against the kernel table now, so a mismatch is reported by the call that
// made it; the launch's own failure surfaces as the device's error.
func (b backend) Launch(k kernels.Kernel, grid kernels.Dim3, args ...any) error {
	d := b.d
	fn, ok := d.funcs[k.Name]
	if !ok {
		return fmt.Errorf("kernel %s is not loaded", k.Name)
	}
	if len(args) != len(k.Params) {
		return fmt.Errorf("kernel %s: %d arguments, its table entry has %d (%s)", k.Name, len(args), len(k.Params), k.Params)
	}
	// Each argument in an 8-byte slot: cu.Function.Launch copies 8 bytes
	// per argument, and the driver reads the parameter's size from the
	// kernel (4 bytes of the slot, little-endian, for int32 and float32).
	vals := make([]uint64, len(args))
	for i, a := range args {
		var kind byte
		switch v := a.(type) {
		case cu.DevicePtr:
			kind, vals[i] = 'p', uint64(v)
		case int32:
			kind, vals[i] = 'i', uint64(uint32(v))
		case float32:
			kind, vals[i] = 'f', uint64(math.Float32bits(v))
		case float64:
			kind, vals[i] = 'd', math.Float64bits(v)
		default:
			return fmt.Errorf("kernel %s: argument %d has type %T", k.Name, i, a)
		}
		if kind != k.Params[i] {
			return fmt.Errorf("kernel %s: argument %d is %c, its table entry says %c (%s)", k.Name, i, kind, k.Params[i], k.Params)
		}
	}
	ptrs := make([]unsafe.Pointer, len(vals))
	for i := range vals {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	gx, gy, gz := grid.X, max(grid.Y, 1), max(grid.Z, 1)
	if gx <= 0 {
		return fmt.Errorf("kernel %s: grid %+v has no blocks", k.Name, grid)
	}
	op := d.curOp()
	d.th.post(func() string {
		return fmt.Sprintf("gpu.%s: kernel %s on grid (%d, %d, %d)", op, k.Name, gx, gy, gz)
	}, func() error {
		if err := fn.Launch(gx, gy, gz, kernels.Block, 1, 1, 0, d.compute.s, ptrs); err != nil {
			return cuErr("cuLaunchKernel", err)
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// Gemm queues cublasSgemm_v2 on the compute stream.
func (b backend) Gemm(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	d := b.d
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("GEMM dimension %d outside cuBLAS's int range", v)
		}
	}
	op := d.curOp()
	d.th.post(func() string { return fmt.Sprintf("gpu.%s: cublasSgemm m=%d n=%d k=%d", op, m, n, k) }, func() error {
		if err := d.blas.sgemm(ta, tb, m, n, k, alpha, a, lda, bp, ldb, beta, c, ldc); err != nil {
			return err
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// GemmBF16 queues cublasGemmEx (bf16 A and B, float32 C) on the compute
// stream.
func (b backend) GemmBF16(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	d := b.d
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("GEMM dimension %d outside cuBLAS's int range", v)
		}
	}
	op := d.curOp()
	d.th.post(func() string { return fmt.Sprintf("gpu.%s: cublasGemmEx(bf16) m=%d n=%d k=%d", op, m, n, k) }, func() error {
		if err := d.blas.gemmBF16(ta, tb, m, n, k, alpha, a, lda, bp, ldb, beta, c, ldc); err != nil {
			return err
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// Malloc allocates device memory (cuMemAlloc).
func (b backend) Malloc(n int) (cu.DevicePtr, error) {
	var p cu.DevicePtr
	err := b.d.th.do(func() error {
		var err error
		p, err = cu.MemAlloc(int64(n))
		return cuErr(fmt.Sprintf("cuMemAlloc(%d bytes)", n), err)
	})
	return p, err
}

// MemFree frees device memory (cuMemFree; it waits for work using it).
func (b backend) MemFree(p cu.DevicePtr) error {
	return b.d.th.do(func() error { return cuErr("cuMemFree", cu.MemFree(p)) })
}

// Write queues a copy of src to the device on the compute stream (from a
// private copy of src, which the driver stages when the call runs).
func (b backend) Write(dst cu.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	d := b.d
	buf := bytes.Clone(src)
	op := d.curOp()
	d.th.post(func() string { return fmt.Sprintf("gpu.%s: copy %d bytes of arguments to the device", op, len(buf)) }, func() error {
		err := cu.MemcpyHtoDAsync(dst, unsafe.Pointer(&buf[0]), int64(len(buf)), d.compute.s)
		runtime.KeepAlive(buf)
		if err != nil {
			return cuErr("cuMemcpyHtoDAsync", err)
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// Read copies device memory to the host after the compute stream's work
// so far, and waits for it. A failure of earlier queued work surfaces
// here.
func (b backend) Read(dst []byte, src cu.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	d := b.d
	err := d.th.do(func() error {
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, int64(len(dst)), d.compute.s); err != nil {
			return cuErr("cuMemcpyDtoHAsync", err)
		}
		return cuErr("cuStreamSynchronize(compute)", d.compute.s.Synchronize())
	})
	return wrapAsync(err)
}
