//go:build cgo

package core_test

import (
	"fmt"
	"math"
	"sync"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/kernels/emu"
	"github.com/voxtrain/voxtrain/nn"
)

// fakeDNN is a dnn.Lib over emulated device memory. It checks every
// call's arguments as cuDNN does — descriptors of packed NDHWC tensors
// that fit their buffers, an output whose dimensions are the
// convolution's, filter and tensor channels that agree, a combination of
// data, compute and math types cuDNN supports, a workspace that covers the
// algorithm's need — answering CUDNN_STATUS_BAD_PARAM or _NOT_SUPPORTED
// as cuDNN would, and computes with the CPU device (bf16 operands widened
// exactly, a bf16 output rounded to nearest even).
//
// Its algorithms, the same for every pass, make every rule of the
// engine's choice observable: the fastest needs more workspace than any
// limit; the next runs on TF32 tensor cores (math type DefaultMath,
// whatever the descriptor asked: unfit for strict float32, and a bf16
// problem must then run with DefaultMath, not its descriptor's
// TensorOpMath, as with cuDNN); then one that is not deterministic, a
// deterministic one whose workspace grows with the problem, and a slow
// one with none.
type fakeDNN struct {
	cpu *cpu.Device

	mu    sync.Mutex
	finds map[dnn.Kind]int
	runs  map[int32]int // by algorithm
	// findsAfterRun counts the Finds made once a convolution had run:
	// algorithms timed inside a step rather than before it.
	findsAfterRun int
	// unsupported, when set, makes every algorithm fail for the problems
	// it returns true for (as cuDNN does for shapes it has no kernel for).
	unsupported func(*dnn.Problem) bool
}

type fakeAlgo struct {
	id   int32
	ms   float32
	det  bool
	work func(p *dnn.Problem) int
	tf32 bool // runs with DefaultMath whatever the descriptor says
}

var fakeAlgos = []fakeAlgo{
	{2, 0.5, true, func(*dnn.Problem) int { return 1 << 40 }, false},
	{4, 0.8, false, func(p *dnn.Problem) int { return 128 }, true},
	{3, 1.0, false, func(p *dnn.Problem) int { return 256 }, false},
	{1, 2.0, true, func(p *dnn.Problem) int { return 4 * p.Y.Elems() }, false},
	{0, 4.0, true, func(*dnn.Problem) int { return 0 }, false},
}

// math returns the math type a runs p with.
func (a fakeAlgo) math(p *dnn.Problem) dnn.MathType {
	if a.tf32 {
		return dnn.DefaultMath
	}
	return p.Conv.Math
}

func newFakeDNN() *fakeDNN {
	return &fakeDNN{cpu: cpu.New(cpu.Options{Threads: 1, ReferenceConv: true}), finds: map[dnn.Kind]int{}, runs: map[int32]int{}}
}

func (f *fakeDNN) Version() string { return "9.99.0-fake" }

func (f *fakeDNN) algo(id int32) (fakeAlgo, bool) {
	for _, a := range fakeAlgos {
		if a.id == id {
			return a, true
		}
	}
	return fakeAlgo{}, false
}

func (f *fakeDNN) Find(k dnn.Kind, p *dnn.Problem, x, w, y, ws *emu.Buffer, wsBytes int) ([]dnn.Perf, error) {
	if err := f.check(k, p, x, w, y, ws, wsBytes); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.finds[k]++
	if len(f.runs) > 0 {
		f.findsAfterRun++
	}
	f.mu.Unlock()
	var perfs []dnn.Perf
	for _, a := range fakeAlgos {
		pf := dnn.Perf{Algo: a.id, TimeMs: a.ms, Memory: int64(a.work(p)), Deterministic: a.det, Math: a.math(p)}
		switch {
		case f.unsupported != nil && f.unsupported(p):
			pf.Status, pf.TimeMs = 3000, -1 // CUDNN_STATUS_NOT_SUPPORTED
		case pf.Memory > int64(wsBytes):
			pf.Status, pf.TimeMs = 2, -1 // CUDNN_STATUS_ALLOC_FAILED
		}
		perfs = append(perfs, pf)
	}
	// cudnnFind*AlgorithmEx runs the pass while timing it: the output is
	// overwritten (with the result of the last algorithm tried).
	if err := f.compute(k, p, x, w, y); err != nil {
		return nil, err
	}
	return perfs, nil
}

// algoFor returns algorithm algo if it runs p with math type m.
func (f *fakeDNN) algoFor(p *dnn.Problem, algo int32, m dnn.MathType) (fakeAlgo, error) {
	a, ok := f.algo(algo)
	if !ok || f.unsupported != nil && f.unsupported(p) {
		return a, fmt.Errorf("CUDNN_STATUS_NOT_SUPPORTED: algorithm %d", algo)
	}
	if m != a.math(p) {
		return a, fmt.Errorf("CUDNN_STATUS_BAD_PARAM: algorithm %d with math type %d; it runs with %d", algo, m, a.math(p))
	}
	return a, nil
}

func (f *fakeDNN) WorkspaceSize(k dnn.Kind, p *dnn.Problem, algo int32, m dnn.MathType) (int, error) {
	if err := f.checkProblem(p); err != nil {
		return 0, err
	}
	a, err := f.algoFor(p, algo, m)
	if err != nil {
		return 0, fmt.Errorf("%s pass: %w", k, err)
	}
	return a.work(p), nil
}

func (f *fakeDNN) Run(k dnn.Kind, p *dnn.Problem, algo int32, m dnn.MathType, beta float32, x, w, y, ws *emu.Buffer, wsBytes int) error {
	if err := f.check(k, p, x, w, y, ws, wsBytes); err != nil {
		return err
	}
	a, err := f.algoFor(p, algo, m)
	if err != nil {
		return fmt.Errorf("%s pass: %w", k, err)
	}
	if need := a.work(p); wsBytes < need {
		return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: algorithm %d needs %d bytes of workspace, given %d", algo, need, wsBytes)
	}
	if beta != 0 && beta != 1 {
		return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: beta %v (voxtrain passes 0 or 1)", beta)
	}
	f.mu.Lock()
	f.runs[algo]++
	f.mu.Unlock()
	return f.computeBeta(k, p, beta, x, w, y)
}

// checkProblem holds the descriptors to cuDNN's rules for an NHWC
// convolution.
func (f *fakeDNN) checkProblem(p *dnn.Problem) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: "+format, args...)
	}
	for _, t := range []struct {
		name string
		t    dnn.Tensor
	}{{"x", p.X}, {"y", p.Y}} {
		d, s := t.t.Dims, t.t.Strides
		for i := range d {
			if d[i] <= 0 {
				return bad("%s dimension %d is %d", t.name, i, d[i])
			}
		}
		// Packed channels-last: C fastest, then W, H, D, N.
		want := [5]int32{d[1] * d[2] * d[3] * d[4], 1, d[1] * d[3] * d[4], d[1] * d[4], d[1]}
		if s != want {
			return fmt.Errorf("CUDNN_STATUS_NOT_SUPPORTED: %s strides %v with NHWC filters, want packed NDHWC %v", t.name, s, want)
		}
		if t.t.Type != p.W.Type {
			return bad("%s is %s, the filter %s", t.name, t.t.Type, p.W.Type)
		}
	}
	if p.W.Format != dnn.FormatNHWC {
		return bad("filter format %d, voxtrain's weights are NHWC (%d)", p.W.Format, dnn.FormatNHWC)
	}
	c := p.Conv
	if c.Mode != dnn.CrossCorrelation {
		return bad("mode %d", c.Mode)
	}
	if p.W.Dims[1] != p.X.Dims[1] {
		return bad("filter has %d input channels, x %d", p.W.Dims[1], p.X.Dims[1])
	}
	if p.Y.Dims[0] != p.X.Dims[0] || p.Y.Dims[1] != p.W.Dims[0] {
		return bad("y is %v, want batch %d and %d channels", p.Y.Dims, p.X.Dims[0], p.W.Dims[0])
	}
	for i := 0; i < 3; i++ {
		if c.Stride[i] <= 0 || c.Dilation[i] <= 0 || c.Pad[i] < 0 {
			return bad("stride %v, dilation %v, padding %v", c.Stride, c.Dilation, c.Pad)
		}
		ext := (p.W.Dims[2+i]-1)*c.Dilation[i] + 1
		if out := (p.X.Dims[2+i]+2*c.Pad[i]-ext)/c.Stride[i] + 1; out != p.Y.Dims[2+i] {
			return bad("y's spatial dimension %d is %d, the convolution gives %d", i, p.Y.Dims[2+i], out)
		}
	}
	if c.Compute != dnn.Float {
		return fmt.Errorf("CUDNN_STATUS_NOT_SUPPORTED: compute type %s (voxtrain accumulates in float)", c.Compute)
	}
	switch p.W.Type {
	case dnn.Float:
		if c.Math != dnn.FMAMath && c.Math != dnn.DefaultMath {
			return bad("math type %d for float data", c.Math)
		}
	case dnn.BFloat16:
		if c.Math != dnn.TensorOpMath && c.Math != dnn.DefaultMath {
			return bad("math type %d for bfloat16 data", c.Math)
		}
	default:
		return fmt.Errorf("CUDNN_STATUS_NOT_SUPPORTED: data type %s", p.W.Type)
	}
	return nil
}

// check is checkProblem plus the buffers: each holds its tensor, the
// workspace its stated size.
func (f *fakeDNN) check(k dnn.Kind, p *dnn.Problem, x, w, y, ws *emu.Buffer, wsBytes int) error {
	if err := f.checkProblem(p); err != nil {
		return err
	}
	el := p.W.Type.Size()
	for _, b := range []struct {
		name  string
		buf   *emu.Buffer
		elems int
	}{{"x", x, p.X.Elems()}, {"w", w, p.W.Elems()}, {"y", y, p.Y.Elems()}} {
		if b.buf == nil {
			return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: %s pass: %s is null", k, b.name)
		}
		if b.buf.Len() < el*b.elems {
			return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: %s pass: %s's %d elements of %d bytes overrun a %d-byte buffer", k, b.name, b.elems, el, b.buf.Len())
		}
	}
	if wsBytes < 0 || wsBytes > 0 && (ws == nil || ws.Len() < wsBytes) {
		return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: workspace of %d bytes in a smaller buffer", wsBytes)
	}
	return nil
}

// geometry recovers the convolution from the descriptors.
func geometry(p *dnn.Problem) geom.Conv {
	x, w, c := p.X.Dims, p.W.Dims, p.Conv
	return geom.Conv{N: int(x[0]), InC: int(x[1]), InD: int(x[2]), InH: int(x[3]), InW: int(x[4]), OutC: int(w[0]),
		KD: int(w[2]), KH: int(w[3]), KW: int(w[4]), SD: int(c.Stride[0]), SH: int(c.Stride[1]), SW: int(c.Stride[2]),
		PD: int(c.Pad[0]), PH: int(c.Pad[1]), PW: int(c.Pad[2])}
}

// compute runs the pass on the CPU device and writes its output.
func (f *fakeDNN) compute(k dnn.Kind, p *dnn.Problem, x, w, y *emu.Buffer) error {
	return f.computeBeta(k, p, 0, x, w, y)
}

// computeBeta runs the pass on the CPU device and writes result +
// beta·output to the output (rounded once, as cuDNN's epilogue does).
func (f *fakeDNN) computeBeta(k dnn.Kind, p *dnn.Problem, beta float32, x, w, y *emu.Buffer) error {
	g := geometry(p)
	load := func(b *emu.Buffer, shape []int) *cpu.Tensor {
		n := nn.Shape(shape).Len()
		v := make([]float32, n)
		if p.W.Type == dnn.BFloat16 {
			for i, h := range b.U16()[:n] {
				v[i] = math.Float32frombits(uint32(h) << 16)
			}
		} else {
			copy(v, b.F32()[:n])
		}
		return cpu.NewTensor(shape, v)
	}
	alloc := func(shape []int) *cpu.Tensor { return cpu.NewTensor(shape, make([]float32, nn.Shape(shape).Len())) }
	store := func(b *emu.Buffer, t *cpu.Tensor) {
		v := t.Data()
		if beta != 0 {
			old := load(b, t.Shape()).Data()
			for i := range v {
				v[i] += beta * old[i]
			}
		}
		if p.W.Type == dnn.BFloat16 {
			h := make([]uint16, len(v))
			for i, x := range v {
				h[i] = bf16Round(x)
			}
			b.SetU16(h)
			return
		}
		b.SetF32(v)
	}
	switch k {
	case dnn.Forward:
		out := alloc(g.OutShape())
		f.cpu.Conv3DForward(g, load(x, g.InShape()), load(w, g.WeightShape()), nil, out)
		store(y, out)
	case dnn.BackwardData:
		out := alloc(g.InShape())
		f.cpu.Conv3DBackwardData(g, load(y, g.OutShape()), load(w, g.WeightShape()), out)
		store(x, out)
	case dnn.BackwardFilter:
		out := alloc(g.WeightShape())
		f.cpu.Conv3DBackwardWeight(g, load(x, g.InShape()), load(y, g.OutShape()), out, nil)
		store(w, out)
	default:
		return fmt.Errorf("CUDNN_STATUS_BAD_PARAM: pass %d", k)
	}
	return nil
}

// bf16Round rounds to the nearest bfloat16, ties to even (NaN stays NaN),
// as cuDNN's bf16 outputs are.
func bf16Round(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return uint16(u>>16) | 0x40
	}
	lower, upper := u&0xffff, u>>16
	if lower > 0x8000 || lower == 0x8000 && upper&1 == 1 {
		upper++
	}
	return uint16(upper)
}
