//go:build cuda

package gpu

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/gpu/internal/ranges"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
	"gorgonia.org/cu"
)

// SyncEnv names the environment variable that, set to 1, makes the device
// synchronise after every kernel, GEMM and copy, so that a failure names
// the op and kernel that caused it (like CUDA_LAUNCH_BLOCKING; slow).
const SyncEnv = "VOXTRAIN_CUDA_SYNC"

// BF16ActivationsEnv names the environment variable that, set to 0, keeps
// activations float32 in math mode bf16 (Options.FloatActivations).
const BF16ActivationsEnv = "VOXTRAIN_BF16_ACTIVATIONS"

// BF16GradientsEnv names the environment variable that, set to 0, keeps
// the gradients of bf16 activations float32 in math mode bf16
// (Options.FloatGradients).
const BF16GradientsEnv = "VOXTRAIN_BF16_GRADIENTS"

// OptimiserListsEnv names the environment variable that, set to 0, makes
// the optimiser launch its kernels one parameter at a time
// (core.Options.PerTensorOptimiser): the escape hatch should the
// tensor-list kernels fail on a GPU.
const OptimiserListsEnv = "VOXTRAIN_OPTIM_LISTS"

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
	// Conv picks who computes the convolutions: by default cuDNN where
	// found with tf32 and bf16 and the own ones in fp32 (the faster of
	// the two in each, docs/GPU.md); voxtrain's own; or cuDNN without
	// fallback.
	Conv Conv
	// FloatActivations keeps the activations nn stores (convolution
	// outputs, block outputs, concats) float32 in math mode bf16, where
	// by default they are bfloat16 (core.Options.BF16Activations): the
	// escape hatch, also set by VOXTRAIN_BF16_ACTIVATIONS=0. No effect
	// in the other modes, whose activations are float32.
	FloatActivations bool
	// FloatGradients keeps the gradients of those activations (the
	// workspace's gradient buffers) float32 where by default, with bf16
	// activations, they are bfloat16 too
	// (core.Options.BF16Gradients): the escape hatch, also set by
	// VOXTRAIN_BF16_GRADIENTS=0. No effect where activations are float32
	// (FloatActivations, other modes).
	FloatGradients bool
	// Deterministic admits only cuDNN algorithms that give the same bits
	// run after run (exact resume on a GPU); the own convolutions always
	// do.
	Deterministic bool
	// CuDNNWorkspace bounds the workspace of a cuDNN algorithm (0: 1 GiB).
	CuDNNWorkspace int
	// CuDNNCache is the file that keeps cuDNN's algorithm choices between
	// runs ("": dnn.DefaultCacheFile(), "off": none).
	CuDNNCache string
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
	// CuDNNPath and CuDNNVersion describe the cuDNN in use ("" when the
	// convolutions are voxtrain's own).
	CuDNNPath, CuDNNVersion string
	Math                    Math
	// Notes lists settings that could not be applied as asked.
	Notes []string
}

// Device is the CUDA implementation of nn.Device. Create it with New and
// Close it when done. Streams, events, uploads, downloads, Alloc and Free
// may be used from several goroutines; the ops share scratch buffers and
// are issued by one goroutine at a time (nn's training loop).
type Device struct {
	*core.Device[cu.DevicePtr]

	core     *core.Device[cu.DevicePtr]
	thread   *thread
	cuDevice cu.Device
	compute  *Stream
	blas     *cublas
	cudnn    *cudnn
	ownWhy   string // why the convolutions are the own ones where cuDNN was not even tried
	funcs    map[string]cu.Function
	modules  []cu.Module
	pinned   ranges.Set // pinned host allocations (PinnedAllocator)
	sync     bool       // synchronise after every piece of work (SyncEnv)
	spin     bool       // host waits spin (Options.SpinWait)
	info     Info
	name     string

	opMu sync.Mutex
	op   string // the nn.Device op whose work is being issued

	// NCCL, opened once by the first NCCLAvailable or JoinNCCL.
	ncclOnce sync.Once
	nccl     *ncclLib
	ncclErr  error

	streams atomic.Int32
	closed  atomic.Bool
}

var _ nn.Device = (*Device)(nil)

// The loss ops beyond nn.Device that core's device implements, and a
// Criterion asks for: the ignore label's and multi-label outputs'.
var (
	_ nn.IgnoreLossDevice     = (*Device)(nil)
	_ nn.MultiLabelLossDevice = (*Device)(nil)
)

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

	d := &Device{cuDevice: dev, funcs: map[string]cu.Function{}, info: info, spin: o.SpinWait,
		sync: o.SyncEveryOp || os.Getenv(SyncEnv) == "1"}
	bf16Act := o.Math == MathBF16 && !o.FloatActivations && os.Getenv(BF16ActivationsEnv) != "0"
	bf16Grad := bf16Act && !o.FloatGradients && os.Getenv(BF16GradientsEnv) != "0"
	d.core = core.New[cu.DevicePtr](backend{d}, core.Options{ConvWorkspace: o.ConvWorkspace, BF16: o.Math == MathBF16,
		BF16Activations: bf16Act, BF16Gradients: bf16Grad, PerTensorOptimiser: os.Getenv(OptimiserListsEnv) == "0"})
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
	d.thread = th
	fail := func(err error) (*Device, error) {
		d.thread.stop(func() {
			if d.cudnn != nil {
				_ = d.cudnn.close()
			}
			if d.blas != nil {
				_ = d.blas.close()
			}
			for _, m := range d.modules {
				_ = m.Unload()
			}
		})
		return nil, fmt.Errorf("gpu: %s: %w", info.Name, err)
	}
	if d.compute, err = d.newStream("compute"); err != nil {
		return fail(err)
	}
	if err := d.thread.do(d.loadModules); err != nil {
		return fail(err)
	}
	if err := d.thread.do(func() error {
		b, err := openCuBLAS(d.compute.cuStream, o.Math)
		d.blas = b
		return err
	}); err != nil {
		return fail(err)
	}
	d.info.CuBLASPath, d.info.CuBLASVersion = d.blas.path, d.blas.versionString()
	if err := d.openConv(o); err != nil {
		return fail(err)
	}
	d.name = d.describe()
	return d, nil
}

// openConv opens cuDNN unless o.Conv is ConvOwn and routes the
// convolutions through it; without cuDNN, ConvAuto notes where it looked
// and keeps the own convolutions, ConvCuDNN fails.
func (d *Device) openConv(o Options) error {
	if o.Conv != ConvAuto && o.Conv != ConvOwn && o.Conv != ConvCuDNN {
		return fmt.Errorf("convolutions %d, want ConvAuto, ConvOwn or ConvCuDNN", o.Conv)
	}
	if o.Conv == ConvOwn {
		return nil
	}
	if o.Conv == ConvAuto && o.Math == MathFP32 {
		// Measured on an H100 (docs/GPU.md): cuDNN's float32 NDHWC
		// kernels without tensor cores take 3.3× the own convolutions'
		// time on nnU-Net's network, and support none of its 128³ × 32
		// and × 64 channel forward passes.
		d.ownWhy = "fp32: faster than cuDNN's float32 kernels"
		return nil
	}
	l, err := openCuDNN(d)
	if err != nil {
		if o.Conv == ConvCuDNN {
			return fmt.Errorf("convolutions by cuDNN asked for (cudnn): %w; point %s at libcudnn.so.9 or its directory, or use the own convolutions (own)", err, CuDNNEnv)
		}
		d.info.Notes = append(d.info.Notes, fmt.Sprintf("%v: the convolutions are voxtrain's own (set %s to use cuDNN)", err, CuDNNEnv))
		return nil
	}
	d.cudnn = l
	cache := o.CuDNNCache
	switch cache {
	case "":
		cache = dnn.DefaultCacheFile()
	case "off":
		cache = ""
	}
	e := dnn.New[cu.DevicePtr](l, dnn.Options{WorkspaceLimit: o.CuDNNWorkspace, Deterministic: o.Deterministic,
		GPU: d.info.Name, CacheFile: cache})
	d.info.Notes = append(d.info.Notes, e.Notes()...)
	prec := dnn.FP32
	switch o.Math {
	case MathTF32:
		prec = dnn.TF32
	case MathBF16:
		prec = dnn.BF16
	}
	d.core.UseDNN(e, prec)
	d.info.CuDNNPath, d.info.CuDNNVersion = l.path, l.version
	return nil
}

// DNNNotes returns what the cuDNN engine noticed so far (problems it has
// no algorithm for, which the own convolutions compute), or nil.
func (d *Device) DNNNotes() []string {
	if e := d.core.DNN(); e != nil {
		return e.Notes()
	}
	return nil
}

// cudaVersion formats cuDriverGetVersion's number (12040 → "12.4").
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func (d *Device) describe() string {
	i := d.info
	s := fmt.Sprintf("cuda:%d %s (sm_%d%d, %d SMs, %.0f GiB; driver CUDA %s; cuBLAS %s, %s GEMMs",
		i.Ordinal, i.Name, i.ComputeCapability[0], i.ComputeCapability[1], i.SMs, float64(i.MemoryBytes)/(1<<30),
		cudaVersion(i.Driver), i.CuBLASVersion, i.Math)
	if i.CuDNNVersion != "" {
		s += fmt.Sprintf("; cuDNN %s convolutions", i.CuDNNVersion)
		if e := d.core.DNN(); e != nil && e.Options().Deterministic {
			s += ", deterministic"
		}
	} else if d.ownWhy != "" {
		s += "; own convolutions (" + d.ownWhy + ")"
	} else {
		s += "; own convolutions"
	}
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
		d.modules = append(d.modules, m)
	}
	for _, k := range kernels.All() {
		i := sort.SearchStrings(kernels.Modules(), k.Module)
		if i >= len(d.modules) || kernels.Modules()[i] != k.Module {
			return fmt.Errorf("kernel %s: no PTX module %q", k.Name, k.Module)
		}
		fn, err := d.modules[i].Function(k.Name)
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
	return cuErr("cuStreamSynchronize after it (synchronous debugging)", s.cuStream.Synchronize())
}

// Alloc returns a zero-filled tensor (its zero fill runs on the compute
// stream; uploads on other streams wait for it).
func (d *Device) Alloc(shape nn.Shape) nn.Tensor {
	t := d.core.AllocTensor(shape)
	t.Fence = d.compute.Record()
	return t
}

// AllocActivation returns a zero-filled activation tensor
// (nn.ActivationAllocator): bfloat16 in math mode bf16 unless
// Options.FloatActivations, else float32. Its zero fill is fenced as
// Alloc's.
func (d *Device) AllocActivation(shape nn.Shape) nn.Tensor {
	t := d.core.Tensor(d.core.AllocActivation(shape))
	t.Fence = d.compute.Record()
	return t
}

// AllocActivationGradient returns a zero-filled activation-gradient tensor
// (nn.ActivationGradientAllocator): bfloat16 where activations are
// (AllocActivation) unless Options.FloatGradients, else float32. Its zero
// fill is fenced as Alloc's.
func (d *Device) AllocActivationGradient(shape nn.Shape) nn.Tensor {
	t := d.core.Tensor(d.core.AllocActivationGradient(shape))
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

// MemInfo returns the free and total device memory the driver reports.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.thread.do(func() error {
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
	errs = append(errs, d.thread.do(func() error { return cuErr("cuStreamSynchronize(compute)", d.compute.cuStream.Synchronize()) }))
	if e := d.core.DNN(); e != nil {
		// A cache that cannot be written costs the next run a search,
		// not this run its result: warn, do not fail.
		if err := e.Save(); err != nil {
			fmt.Fprintf(os.Stderr, "gpu: %v\n", err)
		}
	}
	errs = append(errs, d.core.Close())
	if n := d.pinned.Len(); n > 0 {
		errs = append(errs, fmt.Errorf("gpu: Close with %d pinned host buffers not freed (released with the context)", n))
	}
	d.thread.stop(func() {
		if d.cudnn != nil {
			errs = append(errs, d.cudnn.close())
		}
		if d.blas != nil {
			errs = append(errs, d.blas.close())
		}
		for _, m := range d.modules {
			errs = append(errs, cuErr("cuModuleUnload", m.Unload()))
		}
		errs = append(errs, cuErr("cuStreamDestroy(compute)", d.compute.cuStream.Destroy()))
	})
	if err := d.core.Err(); err != nil {
		errs = append([]error{err}, errs...)
	}
	return errors.Join(errs...)
}
