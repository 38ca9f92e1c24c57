//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <stdlib.h>
#include <cuda.h>

// gorgonia.org/cu wraps cuMemFreeHost but not cuMemHostAlloc; this is the
// one driver call voxtrain makes through cgo directly.
static CUresult vt_mem_host_alloc(void **p, size_t bytes, unsigned int flags)
{
	return cuMemHostAlloc(p, bytes, flags);
}

// vt_jit_log loads a PTX image with cuModuleLoadDataEx only to fetch the
// JIT compiler's error log into log (n bytes), after cuModuleLoadData
// failed: the driver explains there why it rejected the PTX.
static void vt_jit_log(const void *image, char *log, size_t n)
{
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)n};
	CUmodule m;
	log[0] = 0;
	if (cuModuleLoadDataEx(&m, image, 2, opts, vals) == CUDA_SUCCESS) {
		cuModuleUnload(m);
	}
	log[n - 1] = 0;
}

static const char *vt_error_name(CUresult r)
{
	const char *s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) {
		return "CUDA_ERROR_UNKNOWN_CODE";
	}
	return s;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// cuResultErr turns a CUresult from a direct cgo call into an error.
func cuResultErr(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %s (%d)", call, C.GoString(C.vt_error_name(r)), int(r))
}

// jitLog returns the driver's JIT error log for a PTX image it rejected,
// formatted to follow an error message ("" when there is none).
func jitLog(ptx []byte) string {
	const n = 8192
	img := C.CString(string(ptx)) // NUL-terminated, C memory
	defer C.free(unsafe.Pointer(img))
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	C.vt_jit_log(unsafe.Pointer(img), buf, n)
	if s := strings.TrimSpace(C.GoString(buf)); s != "" {
		return "; the driver's JIT log: " + s
	}
	return ""
}

// PinnedAllocator hands out page-locked host memory from cuMemHostAlloc as
// []float32, for the batch ring of package data (it satisfies
// data.Allocator): uploads from it are asynchronous DMA that overlaps
// compute, where uploads from ordinary (pageable) memory are staged
// through a driver buffer by the CPU first.
//
// The memory is portable (CU_MEMHOSTALLOC_PORTABLE: usable from any
// context). WriteCombined adds CU_MEMHOSTALLOC_WRITECOMBINED, which speeds
// up the GPU's reads over PCIe but makes the CPU's reads of the buffer
// very slow (uncached): use it only for buffers the CPU writes once and
// never reads back. voxtrain's augmentation reads the batch slots back
// (its intensity transforms work in place), so the trainer leaves it off.
//
// Pinned memory is a scarce system resource taken out of the page cache;
// allocate the ring once and Free every buffer.
type PinnedAllocator struct {
	dev           *Device
	WriteCombined bool
}

// PinnedAllocator returns an allocator of pinned host memory registered
// with d, so that d.Upload and d.Download recognise its buffers.
func (d *Device) PinnedAllocator(writeCombined bool) *PinnedAllocator {
	return &PinnedAllocator{dev: d, WriteCombined: writeCombined}
}

// HostAllocator returns the allocator of the data ring's batch buffers for
// this device: pinned, not write-combined (see PinnedAllocator). Its
// result type is spelled out, rather than data.Allocator, so that code
// built without the cuda tag (the trainer) can find it by a type
// assertion on nn.Device without importing this package:
//
//	type hostAllocDevice interface {
//		HostAllocator() interface {
//			Alloc(n int) ([]float32, error)
//			Free(buf []float32)
//		}
//	}
func (d *Device) HostAllocator() interface {
	Alloc(n int) ([]float32, error)
	Free(buf []float32)
} {
	return d.PinnedAllocator(false)
}

// Alloc returns n float32s of pinned host memory (not zeroed).
func (a *PinnedAllocator) Alloc(n int) ([]float32, error) {
	if n < 0 {
		return nil, fmt.Errorf("gpu: pinned alloc: negative size %d", n)
	}
	if n == 0 {
		return []float32{}, nil
	}
	flags := C.uint(C.CU_MEMHOSTALLOC_PORTABLE)
	if a.WriteCombined {
		flags |= C.CU_MEMHOSTALLOC_WRITECOMBINED
	}
	bytes := 4 * n
	var p unsafe.Pointer
	err := a.dev.thread.do(func() error {
		return cuResultErr(fmt.Sprintf("cuMemHostAlloc(%d bytes)", bytes), C.vt_mem_host_alloc(&p, C.size_t(bytes), flags))
	})
	if err != nil {
		return nil, fmt.Errorf("gpu: pinned host memory for a batch buffer: %w", err)
	}
	a.dev.pinned.Add(uintptr(p), bytes)
	return unsafe.Slice((*float32)(p), n), nil
}

// Free releases a buffer from Alloc.
func (a *PinnedAllocator) Free(buf []float32) {
	if len(buf) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(buf))
	if !a.dev.pinned.Remove(uintptr(p)) {
		panic(fmt.Sprintf("gpu: PinnedAllocator.Free of %p, which it did not allocate (or freed twice)", p))
	}
	a.dev.thread.post(func() string { return "gpu: free pinned host memory" }, func() error {
		return cuErr(fmt.Sprintf("cuMemFreeHost(%p)", p), cu.MemFreeHost(p))
	})
}
