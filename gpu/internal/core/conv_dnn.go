package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/gpu/internal/dnn"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

// With UseDNN, the convolutions go to cuDNN (package dnn chooses each
// shape's algorithm) and the vol2col/GEMM path of conv.go computes only
// what cuDNN has no algorithm for. In fp32 and tf32 cuDNN reads and
// writes the float32 tensors themselves. In bf16 it reads and writes bf16
// activations and activation gradients (Options.BF16Activations,
// BF16Gradients) as they are; its float32 operands are bfloat16 copies —
// inputs rounded on the way in (as conv_bf16.go rounds the GEMMs'
// operands), an output widened to float32 on the way out.

// operand is a convolution's activation operand: its pointer and whether
// it holds bf16.
type operand[B comparable] struct {
	p    B
	bf16 bool
}

// opnd returns t as an operand.
func opnd[B comparable](t *Tensor[B]) operand[B] { return operand[B]{t.ptr, t.bf16} }

// UseDNN makes the device compute its convolutions with e in precision p
// (which must agree with Options.BF16). Pass nil to go back to the own
// convolutions.
func (d *Device[B]) UseDNN(e *dnn.Engine[B], p dnn.Precision) {
	if e != nil && (p == dnn.BF16) != d.opt.BF16 {
		panic("core.UseDNN: precision " + p.String() + " disagrees with Options.BF16")
	}
	d.dnn, d.dnnPrec = e, p
}

// DNN returns the cuDNN engine in use, or nil.
func (d *Device[B]) DNN() *dnn.Engine[B] { return d.dnn }

// convDNN computes pass k of g with cuDNN: x, w and y are the pass's
// tensors in dnn.Lib's places (w float32; x and y bf16 only in bf16
// precision). It returns false, having done nothing, when cuDNN is not in
// use or has no algorithm for the problem, neither for the whole batch
// nor sample by sample.
func (d *Device[B]) convDNN(op string, k dnn.Kind, g geom.Conv, x operand[B], w B, y operand[B]) bool {
	if d.dnn == nil {
		return false
	}
	bf16 := d.dnnPrec == dnn.BF16
	if !bf16 && (x.bf16 || y.bf16) {
		panic(fmt.Sprintf("%s.%s: bf16 operand with cuDNN in %s", d.prefix, op, d.dnnPrec))
	}
	p, err := dnn.NewProblem(g, d.dnnPrec)
	if err != nil || !d.dnnMayRun(k, g, &p) {
		return false
	}
	xs, ws, ys := x.p, w, y.p
	if bf16 {
		var ok bool
		if xs, ws, ys, ok = d.operandsBF16(op, k, g, x, w, y); !ok {
			return true // the failure is the device's error
		}
	}
	if !d.runDNN(op, k, g, &p, xs, ws, ys) {
		return false
	}
	if bf16 {
		switch {
		case k == dnn.Forward && !y.bf16:
			d.check(op, d.ops.BF16ToF32(ys, y.p, g.OutLen()))
		case k == dnn.BackwardData && !x.bf16:
			d.check(op, d.ops.BF16ToF32(xs, x.p, g.InLen()))
		case k == dnn.BackwardFilter:
			d.check(op, d.ops.BF16ToF32(ws, w, g.WeightLen()))
		}
	}
	return true
}

// dnnMayRun reports whether pass k of g may go to cuDNN, as a whole
// batch or sample by sample, as far as the choices known so far tell (so
// that a problem known to need the own convolution costs no bf16
// conversion).
func (d *Device[B]) dnnMayRun(k dnn.Kind, g geom.Conv, p *dnn.Problem) bool {
	if c, known := d.dnn.Lookup(k, p); !known || c.OK {
		return true
	}
	p1, ok := d.sampleProblem(g)
	if !ok {
		return false
	}
	c, known := d.dnn.Lookup(k, &p1)
	return !known || c.OK
}

// dnnUntimed reports whether the first use of pass k of g (problem p)
// would time algorithms: no choice is known for the whole batch, or the
// known one has no algorithm and none is known yet for one sample.
func (d *Device[B]) dnnUntimed(k dnn.Kind, g geom.Conv, p *dnn.Problem) bool {
	c, known := d.dnn.Lookup(k, p)
	if !known {
		return true
	}
	if c.OK {
		return false
	}
	p1, ok := d.sampleProblem(g)
	if !ok {
		return false
	}
	_, known = d.dnn.Lookup(k, &p1)
	return !known
}

// sampleProblem returns the problem of one sample of g's batch; false
// when g has one sample already or the problem does not fit cuDNN.
func (d *Device[B]) sampleProblem(g geom.Conv) (dnn.Problem, bool) {
	if g.N == 1 {
		return dnn.Problem{}, false
	}
	one := g
	one.N = 1
	p, err := dnn.NewProblem(one, d.dnnPrec)
	return p, err == nil
}

// runDNN runs pass k of g on the cuDNN-typed operands, timing algorithms
// at first use (planDNN): the whole batch in one call where cuDNN has an
// algorithm for it, else one sample at a time, the weight gradient
// accumulating over the samples in their order. It returns false, having
// written nothing, when neither works.
func (d *Device[B]) runDNN(op string, k dnn.Kind, g geom.Conv, p *dnn.Problem, x, w, y B) bool {
	run, c, perSample, ok := d.planDNN(op, k, g, p, x, w, y)
	if !ok {
		return false
	}
	if !perSample {
		d.runChoice(op, k, p, c, 0, x, w, y)
		return true
	}
	el := d.dnnPrec.ElemSize()
	for n := 0; n < g.N; n++ {
		xn := d.machine.Offset(x, n*el*g.InLen()/g.N)
		yn := d.machine.Offset(y, n*el*g.OutLen()/g.N)
		beta := float32(0)
		if k == dnn.BackwardFilter && n > 0 {
			beta = 1
		}
		d.runChoice(op, k, &run, c, beta, xn, w, yn)
	}
	return true
}

// planDNN returns how pass k of g (problem p) runs on cuDNN, timing
// algorithms on x, w and y at first use: p and its choice where cuDNN has
// an algorithm for the whole batch, else one sample's problem and choice
// (perSample) — cuDNN's NDHWC kernels refuse some large tensors whole
// that they take a sample at a time (docs/GPU.md); false when neither.
func (d *Device[B]) planDNN(op string, k dnn.Kind, g geom.Conv, p *dnn.Problem, x, w, y B) (run dnn.Problem, c dnn.Choice, perSample, ok bool) {
	if c, ok := d.choose(op, k, p, x, w, y); ok {
		return *p, c, false, true
	}
	p1, ok := d.sampleProblem(g)
	if !ok {
		return dnn.Problem{}, dnn.Choice{}, false, false
	}
	c, known := d.dnn.Lookup(k, &p1)
	if !known {
		// Said once, when found (not on every step).
		if c = d.findDNN(op, k, &p1, x, w, y); c.OK {
			d.dnn.Note(fmt.Sprintf("the %s pass of %s: cuDNN, one sample at a time", k, p))
		} else {
			d.dnn.Note(fmt.Sprintf("the %s pass of %s: voxtrain's own convolution (cuDNN has no algorithm for it, whole or per sample)", k, p))
		}
	}
	return p1, c, true, c.OK
}

// dnnKinds maps nn's convolution passes to cuDNN's.
var dnnKinds = map[nn.ConvKind]dnn.Kind{
	nn.ConvForward:        dnn.Forward,
	nn.ConvBackwardData:   dnn.BackwardData,
	nn.ConvBackwardWeight: dnn.BackwardFilter,
}

// PrepareConvs times cuDNN's algorithms for every pass no choice is known
// for yet (nn.ConvPreparer: NewWorkspace calls it before allocating a
// workspace), as the step would at first use — whole batch, else per
// sample — on scratch operands of the largest problem's size, in the
// search workspace findDNN borrows. All of it goes back to the driver
// afterwards, so the search adds nothing to the peak of a step, whose
// activations are all allocated by then. Passes cuDNN cannot describe are
// the step's to run with the own convolution, as without it; so are all
// of them when the scratch does not fit. The error is the device's sticky
// fault, if any.
func (d *Device[B]) PrepareConvs(passes []nn.ConvPass) error {
	if d.dnn == nil {
		return nil
	}
	const op = "PrepareConvs"
	type job struct {
		k dnn.Kind
		g geom.Conv
		p dnn.Problem
	}
	var jobs []job
	var nx, nw, ny int
	for _, ps := range passes {
		k, ok := dnnKinds[ps.Kind]
		if !ok {
			return fmt.Errorf("%s.%s: unknown convolution pass %v", d.prefix, op, ps.Kind)
		}
		p, err := dnn.NewProblem(ps.Geom, d.dnnPrec)
		if err != nil || !d.dnnUntimed(k, ps.Geom, &p) {
			continue
		}
		jobs = append(jobs, job{k, ps.Geom, p})
		nx, nw, ny = max(nx, ps.Geom.InLen()), max(nw, ps.Geom.WeightLen()), max(ny, ps.Geom.OutLen())
	}
	if len(jobs) == 0 {
		return d.Err()
	}
	el := d.dnnPrec.ElemSize()
	sizes := [3]int{el * nx, el * nw, el * ny} // x, w, y
	var bufs [3]B
	for i, n := range sizes {
		b, err := d.cache.get(n, false)
		if err != nil {
			for j := range i {
				d.cache.put(bufs[j], sizes[j], false)
			}
			// Too little memory even for the scratch: the step times
			// them at first use, as without preparation, and meets
			// the shortage itself if it is one.
			return d.Err()
		}
		bufs[i] = b
	}
	for _, j := range jobs {
		d.planDNN(op, j.k, j.g, &j.p, bufs[0], bufs[1], bufs[2])
	}
	for i, b := range bufs {
		d.cache.put(b, sizes[i], false)
	}
	// The scratch and the search workspace would otherwise stay reserved
	// on the free lists, in size classes the workspace may never use.
	if err := d.cache.release(); err != nil {
		return fmt.Errorf("%s.%s: %w", d.prefix, op, err)
	}
	return d.Err()
}

// choose returns the choice for pass k of p, timing the algorithms on
// the given operands if none is known yet; false when cuDNN has none.
func (d *Device[B]) choose(op string, k dnn.Kind, p *dnn.Problem, x, w, y B) (dnn.Choice, bool) {
	c, known := d.dnn.Lookup(k, p)
	if !known {
		c = d.findDNN(op, k, p, x, w, y)
	}
	return c, c.OK
}

// runChoice runs pass k of p with choice c in the device's cuDNN
// workspace.
func (d *Device[B]) runChoice(op string, k dnn.Kind, p *dnn.Problem, c dnn.Choice, beta float32, x, w, y B) {
	work, ok := d.need(op, &d.dnnWork, c.Workspace)
	if !ok {
		return
	}
	if err := d.dnn.Run(k, p, c, beta, x, w, y, work); err != nil {
		d.fail(op, err)
	}
}

// operandsBF16 returns bf16 operands for pass k's x, w and y: a bf16
// activation as it is, a float32 tensor's bf16 buffer holding it rounded
// when it is an input of the pass (its output is written there by cuDNN
// and widened by convDNN).
func (d *Device[B]) operandsBF16(op string, k dnn.Kind, g geom.Conv, x operand[B], w B, y operand[B]) (xh, wh, yh B, ok bool) {
	xh, yh = x.p, y.p
	if !x.bf16 {
		if xh, ok = d.need(op, &d.dnnX, 2*g.InLen()); !ok {
			return
		}
	}
	if wh, ok = d.need(op, &d.weightsBF16, 2*g.WeightLen()); !ok {
		return
	}
	if !y.bf16 {
		if yh, ok = d.need(op, &d.dnnY, 2*g.OutLen()); !ok {
			return
		}
	}
	if k != dnn.BackwardData && !x.bf16 {
		d.check(op, d.ops.F32ToBF16(x.p, xh, g.InLen()))
	}
	if k != dnn.BackwardFilter {
		d.check(op, d.ops.F32ToBF16(w, wh, g.WeightLen()))
	}
	if k != dnn.Forward && !y.bf16 {
		d.check(op, d.ops.F32ToBF16(y.p, yh, g.OutLen()))
	}
	return xh, wh, yh, true
}

// findDNN times cuDNN's algorithms for pass k of p in a workspace of the
// engine's limit (or the largest the device can spare, halving down to
// none), which goes back to the cache afterwards.
func (d *Device[B]) findDNN(op string, k dnn.Kind, p *dnn.Problem, x, w, y B) dnn.Choice {
	size := d.dnn.Options().WorkspaceLimit
	for {
		ws, err := d.cache.get(size, false)
		if err == nil {
			c := d.dnn.Find(k, p, x, w, y, ws, size)
			d.cache.put(ws, size, false)
			return c
		}
		if size < 1<<20 {
			var null B
			return d.dnn.Find(k, p, x, w, y, null, 0)
		}
		size /= 2
	}
}
