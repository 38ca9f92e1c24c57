// The optimiser ops: the gradient norm's sums of squares, SGD and AdamW.

package core

import (
	"fmt"

	"github.com/voxtrain/voxtrain/kernels"
	"github.com/voxtrain/voxtrain/nn"
)

// SumSquares returns Σ t² for each tensor: two launches for all of them
// (kernels.SumSquaresList; two per tensor with Options.PerTensorOptimiser)
// and one download.
func (d *Device[B]) SumSquares(ts []nn.Tensor) []float64 {
	const op = "SumSquares"
	d.begin(op)
	out := make([]float64, len(ts))
	if len(ts) == 0 {
		return out
	}
	ptrs := make([]B, len(ts))
	sizes := make([]int, len(ts))
	need := 0
	for i, t := range ts {
		ct := d.f32(t)
		ptrs[i], sizes[i] = ct.ptr, ct.elems
		need = max(need, d.ops.FlatScratchBytes(ct.elems))
	}
	small, ok := d.need(op, &d.small, 8*len(ts))
	if !ok {
		return out
	}
	if d.opt.PerTensorOptimiser {
		sc, ok := d.need(op, &d.scratch, need)
		if !ok {
			return out
		}
		for i := range ts {
			d.check(op, d.ops.SumSquares(ptrs[i], d.machine.Offset(small, 8*i), sc, sizes[i]))
		}
	} else {
		table, l, ok := d.list(op, ptrs, 1, sizes)
		if !ok {
			return out
		}
		sc, ok := d.need(op, &d.scratch, l.ScratchBytes())
		if !ok {
			return out
		}
		d.check(op, d.ops.SumSquaresList(table, l, small, sc))
	}
	host := make([]byte, 8*len(ts))
	if d.read(op, host, small) {
		copy(out, f64s(host))
	}
	return out
}

// SGDUpdate applies one SGD step to every tensor in one launch
// (kernels.SGDUpdateList).
func (d *Device[B]) SGDUpdate(w, g, buf []nn.Tensor, a nn.SGDArgs) {
	const op = "SGDUpdate"
	d.begin(op)
	d.sameCount(op, len(w), len(g))
	if a.Momentum != 0 {
		d.sameCount(op, len(w), len(buf))
	}
	ptrs := make([]B, 0, 3*len(w))
	sizes := make([]int, len(w))
	for i := range w {
		wt := d.f32(w[i])
		var bp B // null without momentum: the kernel leaves buf alone
		if a.Momentum != 0 {
			bp = d.mustLen(op, buf[i], wt.elems)
		}
		ptrs = append(ptrs, wt.ptr, d.mustLen(op, g[i], wt.elems), bp)
		sizes[i] = wt.elems
	}
	if d.opt.PerTensorOptimiser {
		for i, n := range sizes {
			d.check(op, d.ops.SGDUpdate(ptrs[3*i], ptrs[3*i+1], ptrs[3*i+2], n, a))
		}
	} else if table, l, ok := d.list(op, ptrs, 3, sizes); ok {
		d.check(op, d.ops.SGDUpdateList(table, l, a))
	}
}

// AdamWUpdate applies one AdamW step to every tensor in one launch
// (kernels.AdamWUpdateList).
func (d *Device[B]) AdamWUpdate(w, g, m, v []nn.Tensor, a nn.AdamWArgs) {
	const op = "AdamWUpdate"
	d.begin(op)
	if a.Step < 1 {
		panic(fmt.Sprintf("%s.%s: step %d, want >= 1", d.prefix, op, a.Step))
	}
	for _, l := range [][]nn.Tensor{g, m, v} {
		d.sameCount(op, len(w), len(l))
	}
	ptrs := make([]B, 0, 4*len(w))
	sizes := make([]int, len(w))
	for i := range w {
		wt := d.f32(w[i])
		ptrs = append(ptrs, wt.ptr, d.mustLen(op, g[i], wt.elems), d.mustLen(op, m[i], wt.elems), d.mustLen(op, v[i], wt.elems))
		sizes[i] = wt.elems
	}
	if d.opt.PerTensorOptimiser {
		for i, n := range sizes {
			d.check(op, d.ops.AdamWUpdate(ptrs[4*i], ptrs[4*i+1], ptrs[4*i+2], ptrs[4*i+3], n, a))
		}
	} else if table, l, ok := d.list(op, ptrs, 4, sizes); ok {
		d.check(op, d.ops.AdamWUpdateList(table, l, a))
	}
}

// sameCount panics unless two tensor lists have the same length.
func (d *Device[B]) sameCount(op string, n, m int) {
	if n != m {
		panic(fmt.Sprintf("%s.%s: lists of %d and %d tensors", d.prefix, op, n, m))
	}
}

// maxListTables bounds the tensor-list tables kept on the device: a
// training step uses two or three (the gradients, the update's operands).
const maxListTables = 8

// listTable is one tensor-list table on the device.
type listTable[B comparable] struct {
	key string // the table's bytes
	buf buffer[B]
	l   kernels.TensorList
}

// list returns the device copy of the table of tensors ptrs (k operands
// each) of the given sizes, copying it in (stream-ordered) the first time;
// false after a failure, recorded as the device's error.
func (d *Device[B]) list(op string, ptrs []B, k int, sizes []int) (B, kernels.TensorList, bool) {
	var null B
	addrs := make([]uint64, len(ptrs))
	for i, p := range ptrs {
		addrs[i] = d.machine.Addr(p)
	}
	raw, l, err := kernels.ListTable(addrs, k, sizes, d.ops.ListChunk())
	if err != nil {
		panic(fmt.Sprintf("%s.%s: %v", d.prefix, op, err))
	}
	key := string(raw)
	for i := range d.lists {
		if d.lists[i].key == key {
			return d.lists[i].buf.ptr, d.lists[i].l, true
		}
	}
	if len(d.lists) == maxListTables {
		// The oldest goes back to the cache: later work on the stream
		// may reuse it once the launches issued so far are done with it.
		d.lists[0].buf.drop(&d.cache)
		d.lists = d.lists[1:]
	}
	var t listTable[B]
	p, err := t.buf.ensure(&d.cache, len(raw))
	if err != nil {
		d.fail(op, err)
		return null, l, false
	}
	if !d.write(op, p, raw) {
		t.buf.drop(&d.cache)
		return null, l, false
	}
	t.key, t.l = key, l
	d.lists = append(d.lists, t)
	return p, l, true
}
