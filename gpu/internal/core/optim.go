// The optimiser ops: the gradient norm's sums of squares, SGD and AdamW.

package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// SumSquares returns Σ t² for each tensor, with one download for all.
func (d *Device[B]) SumSquares(ts []nn.Tensor) []float64 {
	const op = "SumSquares"
	d.begin(op)
	out := make([]float64, len(ts))
	if len(ts) == 0 {
		return out
	}
	need := 0
	for _, t := range ts {
		need = max(need, d.ops.FlatScratchBytes(d.f32(t).elems))
	}
	small, ok := d.need(op, &d.small, 8*len(ts))
	if !ok {
		return out
	}
	sc, ok := d.need(op, &d.scratch, need)
	if !ok {
		return out
	}
	for i, t := range ts {
		ct := d.f32(t)
		d.check(op, d.ops.SumSquares(ct.ptr, d.machine.Offset(small, 8*i), sc, ct.elems))
	}
	host := make([]byte, 8*len(ts))
	if d.read(op, host, small) {
		copy(out, f64s(host))
	}
	return out
}

// SGDUpdate applies one SGD step.
func (d *Device[B]) SGDUpdate(w, g, buf nn.Tensor, a nn.SGDArgs) {
	const op = "SGDUpdate"
	d.begin(op)
	wt := d.f32(w)
	gp := d.mustLen(op, g, wt.elems)
	var bp B
	if a.Momentum != 0 {
		bp = d.mustLen(op, buf, wt.elems)
	}
	d.check(op, d.ops.SGDUpdate(wt.ptr, gp, bp, wt.elems, a))
}

// AdamWUpdate applies one AdamW step.
func (d *Device[B]) AdamWUpdate(w, g, m, v nn.Tensor, a nn.AdamWArgs) {
	const op = "AdamWUpdate"
	d.begin(op)
	if a.Step < 1 {
		panic(fmt.Sprintf("%s.%s: step %d, want >= 1", d.prefix, op, a.Step))
	}
	wt := d.f32(w)
	d.check(op, d.ops.AdamWUpdate(wt.ptr, d.mustLen(op, g, wt.elems), d.mustLen(op, m, wt.elems), d.mustLen(op, v, wt.elems), wt.elems, a))
}
