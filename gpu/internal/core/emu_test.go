//go:build cgo

package core_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/voxtrain/voxtrain/gpu/internal/core"
	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/kernels/emu"
	"github.com/voxtrain/voxtrain/nn"
)

// emuBackend is a core.Backend that runs the kernels under kernels/emu's
// host emulation and the GEMMs in Go, checking every GEMM's arguments as
// cuBLAS would (leading dimensions, operands inside their buffers). Device
// memory is emu's: fresh allocations are NaN-filled and guarded.
type emuBackend struct {
	l emu.Launcher

	mu              sync.Mutex
	mallocs, frees  int
	writes          int // host-to-device copies
	live            int
	gemms           int
	op              string
	failMalloc      func(bytes int) bool // injected out-of-memory
	failLaunch      string               // kernel whose launches fail
	failLaunchCount int
	skipKernels     bool           // count launches without running them
	skipped         map[string]int // launches not run, by kernel
	casts           map[string]int // f32_to_bf16 and bf16_to_f32 launches, by "op kernel"
}

var _ core.Backend[*emu.Buffer] = (*emuBackend)(nil)

func (b *emuBackend) Launch(k kernels.Kernel, grid kernels.Dim3, args ...any) error {
	if k.Module == "cast" {
		b.mu.Lock()
		if b.casts == nil {
			b.casts = map[string]int{}
		}
		b.casts[b.op+" "+k.Name]++
		b.mu.Unlock()
	}
	if k.Name == b.failLaunch {
		b.failLaunchCount++
		return fmt.Errorf("injected failure of %s", k.Name)
	}
	if b.skipKernels {
		if b.skipped == nil {
			b.skipped = map[string]int{}
		}
		b.skipped[k.Name]++
		return nil
	}
	return b.l.Launch(k, grid, args...)
}

func (b *emuBackend) Offset(p *emu.Buffer, bytes int) *emu.Buffer { return b.l.Offset(p, bytes) }

func (b *emuBackend) Addr(p *emu.Buffer) uint64 { return p.Addr() }

func (b *emuBackend) Op(name string) { b.mu.Lock(); b.op = name; b.mu.Unlock() }

func (b *emuBackend) Malloc(bytes int) (*emu.Buffer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failMalloc != nil && b.failMalloc(bytes) {
		return nil, errors.New("CUDA_ERROR_OUT_OF_MEMORY (injected)")
	}
	b.mallocs++
	b.live++
	return emu.Alloc(bytes), nil
}

func (b *emuBackend) MemFree(p *emu.Buffer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frees++
	b.live--
	p.Free()
	return nil
}

func (b *emuBackend) Write(dst *emu.Buffer, src []byte) error {
	b.mu.Lock()
	b.writes++
	b.mu.Unlock()
	if len(src)%2 != 0 || len(src) > dst.Len() {
		return fmt.Errorf("write of %d bytes into a %d-byte buffer", len(src), dst.Len())
	}
	u := make([]uint16, len(src)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(src[2*i:])
	}
	dst.SetU16(u)
	return nil
}

func (b *emuBackend) Read(dst []byte, src *emu.Buffer) error {
	if len(dst)%2 != 0 || len(dst) > src.Len() {
		return fmt.Errorf("read of %d bytes from a %d-byte buffer", len(dst), src.Len())
	}
	u := src.U16()
	for i := 0; i < len(dst)/2; i++ {
		binary.LittleEndian.PutUint16(dst[2*i:], u[i])
	}
	return nil
}

// Gemm is cublasSgemm's contract in plain Go (float64 accumulation).
func (b *emuBackend) Gemm(ta, tb bool, m, n, k int, alpha float32, a *emu.Buffer, lda int, bb *emu.Buffer, ldb int, beta float32, c *emu.Buffer, ldc int) error {
	return b.gemm("cublasSgemm", 4, ta, tb, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc)
}

// GemmBF16 is cublasGemmEx's contract for bf16 A and B and a float32 C:
// the operands' bf16 values exactly, float64 accumulation.
func (b *emuBackend) GemmBF16(ta, tb bool, m, n, k int, alpha float32, a *emu.Buffer, lda int, bb *emu.Buffer, ldb int, beta float32, c *emu.Buffer, ldc int) error {
	return b.gemm("cublasGemmEx", 2, ta, tb, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc)
}

// gemm is a GEMM over float32 (elem 4) or bf16 (elem 2) operands A and B.
func (b *emuBackend) gemm(call string, elem int, ta, tb bool, m, n, k int, alpha float32, a *emu.Buffer, lda int, bb *emu.Buffer, ldb int, beta float32, c *emu.Buffer, ldc int) error {
	b.mu.Lock()
	b.gemms++
	b.mu.Unlock()
	rowsA, rowsB := m, k
	if ta {
		rowsA = k
	}
	if tb {
		rowsB = n
	}
	colsA, colsB := k, n
	if ta {
		colsA = m
	}
	if tb {
		colsB = k
	}
	if m < 0 || n < 0 || k < 0 || lda < max(1, rowsA) || ldb < max(1, rowsB) || ldc < max(1, m) {
		return fmt.Errorf("%s: invalid value m=%d n=%d k=%d lda=%d ldb=%d ldc=%d (trans %v %v)", call, m, n, k, lda, ldb, ldc, ta, tb)
	}
	if m == 0 || n == 0 {
		return nil
	}
	need := func(name string, buf *emu.Buffer, elem, ld, cols, rows int) ([]float32, error) {
		if cols == 0 {
			return nil, nil
		}
		last := ld*(cols-1) + rows
		if buf == nil || elem*last > buf.Len() {
			size := 0
			if buf != nil {
				size = buf.Len()
			}
			return nil, fmt.Errorf("%s: %s (%d×%d, ld %d) reaches %d bytes past a %d-byte buffer", call, name, rows, cols, ld, elem*last, size)
		}
		if elem == 2 { // bf16: the upper half of a float32
			h := buf.U16()[:last]
			v := make([]float32, last)
			for i, x := range h {
				v[i] = math.Float32frombits(uint32(x) << 16)
			}
			return v, nil
		}
		return buf.F32()[:last], nil
	}
	av, err := need("A", a, elem, lda, colsA, rowsA)
	if err != nil {
		return err
	}
	bv, err := need("B", bb, elem, ldb, colsB, rowsB)
	if err != nil {
		return err
	}
	cv, err := need("C", c, 4, ldc, n, m)
	if err != nil {
		return err
	}
	at := func(i, l int) float64 {
		if ta {
			return float64(av[l+i*lda])
		}
		return float64(av[i+l*lda])
	}
	bt := func(l, j int) float64 {
		if tb {
			return float64(bv[j+l*ldb])
		}
		return float64(bv[l+j*ldb])
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for l := 0; l < k; l++ {
				s += at(i, l) * bt(l, j)
			}
			v := float64(alpha) * s
			if beta != 0 { // beta 0: C is not read (it may hold NaNs)
				v += float64(beta) * float64(cv[i+j*ldc])
			}
			cv[i+j*ldc] = float32(v)
		}
	}
	c.SetF32(cv)
	return nil
}

// emuDevice is a complete nn.Device: core's operations over emuBackend,
// with synchronous streams (the emulation runs every launch to the end).
type emuDevice struct {
	*core.Device[*emu.Buffer]
	be *emuBackend
}

var _ nn.Device = (*emuDevice)(nil)

func newEmuDevice(o core.Options) *emuDevice {
	be := &emuBackend{}
	if o.Name == "" {
		o.Name = "emulated CUDA device"
	}
	return &emuDevice{Device: core.New[*emu.Buffer](be, o), be: be}
}

type syncStream struct{}

type doneEvent struct{}

func (doneEvent) Synchronize() {}
func (doneEvent) Done() bool   { return true }

func (syncStream) Record() nn.Event { return doneEvent{} }
func (syncStream) Wait(nn.Event)    {}
func (syncStream) Synchronize()     {}

func (d *emuDevice) ComputeStream() nn.Stream { return syncStream{} }
func (d *emuDevice) NewStream() nn.Stream     { return syncStream{} }

// Upload and Download convert a bf16 tensor's values on the host, as
// package gpu does.
func (d *emuDevice) Upload(s nn.Stream, dst nn.Tensor, src []float32) error {
	t := d.Tensor(dst)
	if len(src) != t.Len() {
		return fmt.Errorf("upload: host buffer has %d floats, tensor %v needs %d", len(src), t.Shape(), t.Len())
	}
	return d.be.Write(t.Ptr(), core.EncodeHost(t, src))
}

func (d *emuDevice) Download(s nn.Stream, dst []float32, src nn.Tensor) error {
	t := d.Tensor(src)
	if len(dst) != t.Len() {
		return fmt.Errorf("download: host buffer has %d floats, tensor %v needs %d", len(dst), t.Shape(), t.Len())
	}
	b := make([]byte, t.ElemBytes()*len(dst))
	if err := d.be.Read(b, t.Ptr()); err != nil {
		return err
	}
	core.DecodeHost(t, dst, b)
	return nil
}
