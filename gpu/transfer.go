//go:build cuda

// Host↔device copies of tensors on a stream (Upload, Download).

package gpu

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/nn"
	"gorgonia.org/cu"
)

// hostPtr returns the address of a host slice and whether it lies in
// pinned memory from d's PinnedAllocator.
func (d *Device) hostPtr(b []float32) (unsafe.Pointer, bool) {
	p := unsafe.Pointer(unsafe.SliceData(b))
	return p, d.pinned.Contains(uintptr(p), 4*len(b))
}

// Upload copies src into dst on stream s with cuMemcpyHtoDAsync.
// Into a bf16 tensor (AllocActivation, AllocActivationGradient in math
// mode bf16) the values are rounded to bf16 on the host first, into
// pageable memory.
//
// From pinned memory (PinnedAllocator) the copy is DMA that runs while the
// host and the other streams go on; src must stay untouched until an event
// recorded on s afterwards completes. From pageable (ordinary Go) memory
// the driver first copies src into a staging buffer with the CPU, on the
// device's thread, when the call reaches it: correct, but slower and
// overlapping less. On a stream other than the compute stream, the copy
// waits for dst's zero fill (Alloc).
func (d *Device) Upload(s nn.Stream, dst nn.Tensor, src []float32) error {
	return d.transfer(s, dst, src, "Upload", func(host unsafe.Pointer, dev cu.DevicePtr, n int64, st cu.Stream) error {
		return cuErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(dev, host, n, st))
	})
}

// Download copies src into dst on stream s with cuMemcpyDtoHAsync; dst is
// valid once an event recorded on s afterwards has completed. Into
// pageable memory the driver's copy returns only when it is complete, so
// the device's thread waits for the stream to get there. From a bf16
// tensor the copy goes to pageable memory and is widened into dst on
// the device's thread right after it.
func (d *Device) Download(s nn.Stream, dst []float32, src nn.Tensor) error {
	return d.transfer(s, src, dst, "Download", func(host unsafe.Pointer, dev cu.DevicePtr, n int64, st cu.Stream) error {
		return cuErr("cuMemcpyDtoHAsync", cu.MemcpyDtoHAsync(host, dev, n, st))
	})
}

// transfer is Upload and Download (named by op): it checks that host and t
// have the same length, makes a copy on a stream other than the compute
// stream wait for t's zero fill (Alloc), and posts memcpy — the driver call
// that copies n bytes between host memory and t's — to the device's
// thread, keeping host alive until the driver has read or written it. A
// bf16 tensor's bytes go through a pageable host buffer of bf16 values:
// rounded from host before an upload, widened into host after a download
// (on the device's thread, where the copy into pageable memory has
// completed when the driver call returns).
func (d *Device) transfer(s nn.Stream, t nn.Tensor, host []float32, op string, memcpy func(host unsafe.Pointer, dev cu.DevicePtr, n int64, st cu.Stream) error) error {
	st, err := d.stream(s)
	if err != nil {
		return err
	}
	ct := d.core.Tensor(t)
	if len(host) != ct.Len() {
		return fmt.Errorf("%s: host buffer has %d floats, tensor %v needs %d", strings.ToLower(op), len(host), ct.Shape(), ct.Len())
	}
	if len(host) == 0 {
		return nil
	}
	if st != d.compute {
		if f := ct.Root().Fence; f != nil {
			st.Wait(f)
		}
	}
	p, pinned := d.hostPtr(host)
	kind := "pageable"
	if pinned {
		kind = "pinned"
	}
	n, ptr := int64(4*len(host)), ct.Ptr()
	var staged []byte // a bf16 tensor's bytes
	if ct.BF16() {
		kind, n = "pageable bf16", int64(2*len(host))
		if op == "Upload" {
			staged = core.EncodeHost(ct, host)
		} else {
			staged = make([]byte, n)
		}
		p = unsafe.Pointer(unsafe.SliceData(staged))
	}
	d.thread.post(func() string { return fmt.Sprintf("gpu.%s (%s, %d bytes, %s stream)", op, kind, n, st.name) }, func() error {
		if err := memcpy(p, ptr, n, st.cuStream); err != nil {
			return err
		}
		if staged != nil && op == "Download" {
			core.DecodeHost(ct, host, staged)
		}
		runtime.KeepAlive(host) // pageable Go memory: alive until the driver has staged or filled it
		runtime.KeepAlive(staged)
		return d.afterWork(st)
	})
	return nil
}
