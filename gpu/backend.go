//go:build cuda

// The core.Backend of the CUDA device: kernel launches, cuBLAS GEMMs,
// device memory and the small copies core's ops make, all on the compute
// stream through the device's thread.

package gpu

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/kernels"
	"gorgonia.org/cu"
)

// backend is the CUDA core.Backend: everything runs on the compute stream,
// issued through the device's thread.
type backend struct{ d *Device }

var _ core.Backend[cu.DevicePtr] = backend{}

func (b backend) Op(name string) { b.d.setOp(name) }

func (b backend) Offset(p cu.DevicePtr, bytes int) cu.DevicePtr { return p + cu.DevicePtr(bytes) }

func (b backend) Addr(p cu.DevicePtr) uint64 { return uint64(p) }

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
	d.thread.post(func() string {
		return fmt.Sprintf("gpu.%s: kernel %s on grid (%d, %d, %d)", op, k.Name, gx, gy, gz)
	}, func() error {
		if err := fn.Launch(gx, gy, gz, kernels.Block, 1, 1, 0, d.compute.cuStream, ptrs); err != nil {
			return cuErr("cuLaunchKernel", err)
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// Gemm queues cublasSgemm_v2 on the compute stream.
func (b backend) Gemm(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	return b.gemm("cublasSgemm", b.d.blas.sgemm, ta, tb, m, n, k, alpha, a, lda, bp, ldb, beta, c, ldc)
}

// GemmBF16 queues cublasGemmEx (bf16 A and B, float32 C) on the compute
// stream.
func (b backend) GemmBF16(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	return b.gemm("cublasGemmEx(bf16)", b.d.blas.gemmBF16, ta, tb, m, n, k, alpha, a, lda, bp, ldb, beta, c, ldc)
}

// gemm checks that the dimensions fit cuBLAS's int and queues call, the
// cuBLAS function named name, on the compute stream.
func (b backend) gemm(name string, call func(ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error,
	ta, tb bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bp cu.DevicePtr, ldb int, beta float32, c cu.DevicePtr, ldc int) error {
	d := b.d
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("GEMM dimension %d outside cuBLAS's int range", v)
		}
	}
	op := d.curOp()
	d.thread.post(func() string { return fmt.Sprintf("gpu.%s: %s m=%d n=%d k=%d", op, name, m, n, k) }, func() error {
		if err := call(ta, tb, m, n, k, alpha, a, lda, bp, ldb, beta, c, ldc); err != nil {
			return err
		}
		return d.afterWork(d.compute)
	})
	return nil
}

// Malloc allocates device memory (cuMemAlloc).
func (b backend) Malloc(n int) (cu.DevicePtr, error) {
	var p cu.DevicePtr
	err := b.d.thread.do(func() error {
		var err error
		p, err = cu.MemAlloc(int64(n))
		return cuErr(fmt.Sprintf("cuMemAlloc(%d bytes)", n), err)
	})
	return p, err
}

// MemFree frees device memory (cuMemFree; it waits for work using it).
func (b backend) MemFree(p cu.DevicePtr) error {
	return b.d.thread.do(func() error { return cuErr("cuMemFree", cu.MemFree(p)) })
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
	d.thread.post(func() string { return fmt.Sprintf("gpu.%s: copy %d bytes of arguments to the device", op, len(buf)) }, func() error {
		err := cu.MemcpyHtoDAsync(dst, unsafe.Pointer(&buf[0]), int64(len(buf)), d.compute.cuStream)
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
	err := d.thread.do(func() error {
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, int64(len(dst)), d.compute.cuStream); err != nil {
			return cuErr("cuMemcpyDtoHAsync", err)
		}
		return cuErr("cuStreamSynchronize(compute)", d.compute.cuStream.Synchronize())
	})
	return wrapAsync(err)
}
