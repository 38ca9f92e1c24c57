//go:build cgo

package emu

/*
#cgo CXXFLAGS: -std=c++20 -O2
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include <string.h>
#include "emu.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/voxtrain/voxtrain/kernels"
)

// guard is the bytes of canary on each side of a Buffer.
const guard = 64

// Fill patterns: fresh memory (NaN in float32 and float64) and guards.
const (
	poison    = 0xFF
	guardByte = 0xA5
)

// Buffer is emulated device memory: a C allocation (a device pointer
// outlives the cgo call that passes it, and cgo forbids C keeping Go
// memory), or a view into one made by Launcher.Offset. Create it with Alloc or one of the From*
// helpers; Free it when done.
type Buffer struct {
	ptr     unsafe.Pointer // first data byte
	size    int            // data bytes
	root    *Buffer        // the allocation a view belongs to (itself for an allocation)
	base    unsafe.Pointer // the allocation's C pointer (root only)
	freed   bool
	cleanup runtime.Cleanup
}

// Alloc returns an uninitialised buffer of the given size in bytes (filled
// with 0xFF, NaN for floats).
func Alloc(bytes int) *Buffer {
	if bytes < 0 {
		panic(fmt.Sprintf("emu.Alloc: negative size %d", bytes))
	}
	base := C.malloc(C.size_t(bytes + 2*guard))
	if base == nil {
		panic(fmt.Sprintf("emu.Alloc: cannot allocate %d bytes", bytes))
	}
	C.memset(base, guardByte, guard)
	p := unsafe.Add(base, guard)
	C.memset(p, poison, C.size_t(bytes))
	C.memset(unsafe.Add(p, bytes), guardByte, guard)
	b := &Buffer{ptr: p, size: bytes, base: base}
	b.root = b
	b.cleanup = runtime.AddCleanup(b, func(p unsafe.Pointer) { C.free(p) }, base)
	return b
}

// Free releases an allocation; a view cannot be freed.
func (b *Buffer) Free() {
	if b.root != b {
		panic("emu: Free of a view")
	}
	if b.freed {
		panic("emu: double Free")
	}
	b.freed = true
	b.cleanup.Stop()
	C.free(b.base)
}

// Len returns the buffer's size in bytes.
func (b *Buffer) Len() int { return b.size }

// Addr returns the buffer's address (0 for nil), what a table of device
// pointers holds for the kernels that read one (kernels.TensorList): the
// emulated kernels dereference it on the host.
func (b *Buffer) Addr() uint64 {
	if b == nil {
		return 0
	}
	b.live()
	return uint64(uintptr(b.ptr))
}

func (b *Buffer) live() {
	if b.root.freed {
		panic("emu: use of a freed buffer")
	}
}

// bytes returns the buffer's memory (valid until Free).
func (b *Buffer) bytes() []byte {
	b.live()
	return unsafe.Slice((*byte)(b.ptr), b.size)
}

// guardsIntact reports whether the allocation's guard bytes are untouched.
func (b *Buffer) guardsIntact() bool {
	r := b.root
	if r.freed {
		return true
	}
	before := unsafe.Slice((*byte)(r.base), guard)
	after := unsafe.Slice((*byte)(unsafe.Add(r.ptr, r.size)), guard)
	for i := 0; i < guard; i++ {
		if before[i] != guardByte || after[i] != guardByte {
			return false
		}
	}
	return true
}

// view returns the buffer's memory as a slice of T (valid until Free).
func view[T any](b *Buffer) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if b.size%sz != 0 {
		panic(fmt.Sprintf("emu: buffer of %d bytes is not a whole number of %d-byte elements", b.size, sz))
	}
	b.live()
	return unsafe.Slice((*T)(b.ptr), b.size/sz)
}

// FromF32 returns a new buffer holding a copy of x.
func FromF32(x []float32) *Buffer { b := Alloc(4 * len(x)); copy(view[float32](b), x); return b }

// FromF64 returns a new buffer holding a copy of x.
func FromF64(x []float64) *Buffer { b := Alloc(8 * len(x)); copy(view[float64](b), x); return b }

// FromU16 returns a new buffer holding a copy of x.
func FromU16(x []uint16) *Buffer { b := Alloc(2 * len(x)); copy(view[uint16](b), x); return b }

// F32 returns a copy of the buffer's contents as float32s.
func (b *Buffer) F32() []float32 { return append([]float32(nil), view[float32](b)...) }

// F64 returns a copy of the buffer's contents as float64s.
func (b *Buffer) F64() []float64 { return append([]float64(nil), view[float64](b)...) }

// I32 returns a copy of the buffer's contents as int32s.
func (b *Buffer) I32() []int32 { return append([]int32(nil), view[int32](b)...) }

// U16 returns a copy of the buffer's contents as uint16s.
func (b *Buffer) U16() []uint16 { return append([]uint16(nil), view[uint16](b)...) }

// U64 returns a copy of the buffer's contents as uint64s.
func (b *Buffer) U64() []uint64 { return append([]uint64(nil), view[uint64](b)...) }

// SetF32 copies x into the start of the buffer.
func (b *Buffer) SetF32(x []float32) {
	if 4*len(x) > b.size {
		panic(fmt.Sprintf("emu: %d floats do not fit in %d bytes", len(x), b.size))
	}
	copy(view[float32](b), x)
}

// SetU16 copies x into the start of the buffer.
func (b *Buffer) SetU16(x []uint16) {
	if 2*len(x) > b.size {
		panic(fmt.Sprintf("emu: %d uint16s do not fit in %d bytes", len(x), b.size))
	}
	copy(view[uint16](b), x)
}

// Launcher runs kernels in the emulation. The zero value is ready to use;
// it is safe for concurrent use (launches run one at a time, like work on
// a single stream).
type Launcher struct {
	mu       sync.Mutex
	launched map[string]int
}

var _ kernels.Launcher[*Buffer] = (*Launcher)(nil)

// Offset returns a view of b starting bytes into it.
func (l *Launcher) Offset(b *Buffer, bytes int) *Buffer {
	if b == nil {
		panic("emu: Offset of a null buffer")
	}
	if bytes < 0 || bytes > b.size {
		panic(fmt.Sprintf("emu: offset %d outside a buffer of %d bytes", bytes, b.size))
	}
	return &Buffer{ptr: unsafe.Add(b.ptr, bytes), size: b.size - bytes, root: b.root}
}

// Launch runs kernel k on grid (blocks of kernels.Block threads) and
// returns when it has finished. A nil *Buffer is a null pointer.
func (l *Launcher) Launch(k kernels.Kernel, grid kernels.Dim3, args ...any) error {
	params := make([]byte, len(args))
	var bufs []*Buffer
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			params[i] = 'p'
			if v != nil {
				v.live()
				bufs = append(bufs, v)
			}
		case int32:
			params[i] = 'i'
		case float32:
			params[i] = 'f'
		case float64:
			params[i] = 'd'
		default:
			return fmt.Errorf("emu: kernel %s: argument %d has type %T, want *emu.Buffer, int32, float32 or float64", k.Name, i, a)
		}
	}
	if string(params) != k.Params {
		return fmt.Errorf("emu: kernel %s launched with parameters %q, its table entry says %q", k.Name, params, k.Params)
	}
	gy, gz := max(grid.Y, 1), max(grid.Z, 1)
	if grid.X <= 0 {
		return fmt.Errorf("emu: kernel %s: grid %+v has no blocks", k.Name, grid)
	}

	n := max(len(args), 1)
	vals := C.malloc(C.size_t(8 * n))
	ptrs := C.malloc(C.size_t(unsafe.Sizeof(uintptr(0))) * C.size_t(n))
	cname, cparams := C.CString(k.Name), C.CString(string(params))
	errbuf := (*C.char)(C.malloc(512))
	defer func() {
		C.free(vals)
		C.free(ptrs)
		C.free(unsafe.Pointer(cname))
		C.free(unsafe.Pointer(cparams))
		C.free(unsafe.Pointer(errbuf))
	}()
	slots := unsafe.Slice((*unsafe.Pointer)(ptrs), n)
	for i, a := range args {
		slot := unsafe.Add(vals, 8*i)
		slots[i] = slot
		switch v := a.(type) {
		case *Buffer:
			var p unsafe.Pointer
			if v != nil {
				p = v.ptr
			}
			*(*unsafe.Pointer)(slot) = p
		case int32:
			*(*int32)(slot) = v
		case float32:
			*(*float32)(slot) = v
		case float64:
			*(*float64)(slot) = v
		}
	}
	rc := C.emu_launch(cname, cparams, C.uint(grid.X), C.uint(gy), C.uint(gz), C.uint(kernels.Block), 1, 1,
		(*unsafe.Pointer)(ptrs), errbuf, 512)
	l.mu.Lock()
	if l.launched == nil {
		l.launched = map[string]int{}
	}
	l.launched[k.Name]++
	l.mu.Unlock()
	if rc != 0 {
		return fmt.Errorf("emu: %s", C.GoString(errbuf))
	}
	for _, b := range bufs {
		if !b.guardsIntact() {
			return fmt.Errorf("emu: kernel %s wrote outside a buffer argument (%d bytes)", k.Name, b.size)
		}
	}
	return nil
}

// Launched returns how many times each kernel was launched.
func (l *Launcher) Launched() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.launched))
	for k, v := range l.launched {
		out[k] = v
	}
	return out
}

// Registered returns the kernels compiled into the emulation, name ->
// parameter kinds (as kernels.Kernel.Params), sorted by name in names.
func Registered() (names []string, params map[string]string) {
	params = map[string]string{}
	for i := 0; i < int(C.emu_kernel_count()); i++ {
		name := C.GoString(C.emu_kernel_name(C.int(i)))
		params[name] = C.GoString(C.emu_kernel_params(C.int(i)))
		names = append(names, name)
	}
	sort.Strings(names)
	return names, params
}
