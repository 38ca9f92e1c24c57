//go:build cuda

// Host↔device copies of tensors on a stream (Upload, Download).

package gpu

import (
	"fmt"
	"runtime"
	"unsafe"

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
	d.thread.post(func() string { return fmt.Sprintf("gpu.Upload (%s, %d bytes, %s stream)", kind, n, st.name) }, func() error {
		if err := cu.MemcpyHtoDAsync(ptr, p, n, st.cuStream); err != nil {
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
	d.thread.post(func() string { return fmt.Sprintf("gpu.Download (%s, %d bytes, %s stream)", kind, n, st.name) }, func() error {
		if err := cu.MemcpyDtoHAsync(p, ptr, n, st.cuStream); err != nil {
			return cuErr("cuMemcpyDtoHAsync", err)
		}
		runtime.KeepAlive(dst)
		return d.afterWork(st)
	})
	return nil
}
