// Launch recipes of the tensor-list kernels: the gradient norm's sums of
// squares and the optimiser updates of every parameter in a launch or two,
// as PyTorch's multi-tensor apply, instead of two or three launches per
// parameter (a U-Net has dozens to hundreds of them).

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// TensorList describes a table of tensors that the _list kernels read from
// device memory (laid out by ListTable): K operands (device addresses) per
// tensor, N tensors, cut into Chunks chunks of at most Chunk elements, each
// chunk within one tensor.
type TensorList struct {
	K, N, Chunks, Chunk int
}

// Byte offsets of the table's parts: the addresses (uint64, N·K), the sizes
// (int32, N), the chunks (int32 pairs: tensor, first element) and each
// tensor's first chunk (int32, N+1).
func (l TensorList) sizesOff() int  { return 8 * l.N * l.K }
func (l TensorList) chunksOff() int { return l.sizesOff() + 4*l.N }
func (l TensorList) firstOff() int  { return l.chunksOff() + 8*l.Chunks }

// Bytes returns the table's size in bytes.
func (l TensorList) Bytes() int { return l.firstOff() + 4*(l.N+1) }

// ScratchBytes returns the scratch SumSquaresList needs.
func (l TensorList) ScratchBytes() int { return 8 * max(1, l.Chunks) }

// ListChunk returns the elements per chunk of the lists these Ops take:
// the flat reductions' chunk, so that SumSquaresList's per-tensor sums are
// bit-identical to SumSquares'.
func (o Ops[B]) ListChunk() int { return o.flatChunk() }

// ListTable lays out the table of tensors of the given sizes with k
// operands each (addrs[t·k+j]: operand j of tensor t; 0 for a null
// operand), cut into chunks of chunk elements.
func ListTable(addrs []uint64, k int, sizes []int, chunk int) ([]byte, TensorList, error) {
	if k < 1 || chunk < 1 || len(addrs) != k*len(sizes) {
		return nil, TensorList{}, fmt.Errorf("kernels.ListTable: %d addresses for %d tensors of %d operands (chunk %d)", len(addrs), len(sizes), k, chunk)
	}
	l := TensorList{K: k, N: len(sizes), Chunk: chunk}
	for t, n := range sizes {
		if n < 0 || n > math.MaxInt32 {
			return nil, TensorList{}, fmt.Errorf("kernels.ListTable: tensor %d has %d elements, outside the kernels' int32 indexing", t, n)
		}
		l.Chunks += (n + chunk - 1) / chunk
	}
	if l.Chunks > math.MaxInt32/2 {
		return nil, TensorList{}, fmt.Errorf("kernels.ListTable: %d chunks", l.Chunks)
	}
	b := make([]byte, l.Bytes())
	for i, a := range addrs {
		binary.LittleEndian.PutUint64(b[8*i:], a)
	}
	q := 0
	for t, n := range sizes {
		binary.LittleEndian.PutUint32(b[l.sizesOff()+4*t:], uint32(n))
		binary.LittleEndian.PutUint32(b[l.firstOff()+4*t:], uint32(q))
		for lo := 0; lo < n; lo += chunk {
			binary.LittleEndian.PutUint32(b[l.chunksOff()+8*q:], uint32(t))
			binary.LittleEndian.PutUint32(b[l.chunksOff()+8*q+4:], uint32(lo))
			q++
		}
	}
	binary.LittleEndian.PutUint32(b[l.firstOff()+4*l.N:], uint32(q))
	return b, l, nil
}

// list returns the table's parts as sub-buffers of table.
func (o Ops[B]) list(table B, l TensorList) (ptrs, sizes, chunks, first B) {
	return table, o.Launcher.Offset(table, l.sizesOff()), o.Launcher.Offset(table, l.chunksOff()), o.Launcher.Offset(table, l.firstOff())
}

func (o Ops[B]) checkList(op string, l TensorList, k int) error {
	if l.K != k || l.Chunk != o.ListChunk() {
		return fmt.Errorf("kernels.%s: a list of %d operands in chunks of %d, want %d in chunks of %d", op, l.K, l.Chunk, k, o.ListChunk())
	}
	return nil
}

// SumSquaresList writes out[t] (float64) = Σ x² over tensor t of the list
// (one operand per tensor), each bit-identical to SumSquares of the tensor
// alone; scratch holds l.ScratchBytes().
func (o Ops[B]) SumSquaresList(table B, l TensorList, out, scratch B) error {
	if err := o.checkList("SumSquaresList", l, 1); err != nil {
		return err
	}
	ptrs, sizes, chunks, first := o.list(table, l)
	if err := o.launchBlocks(kSumSqPartialList, l.Chunks, ptrs, sizes, chunks, scratch, i32(l.Chunks), i32(l.Chunk)); err != nil {
		return err
	}
	return o.launchBlocks(kReduceRangesF64, l.N, scratch, first, out, i32(l.N))
}

// SGDUpdateList applies one SGD step to every tensor of the list (operands
// w, g, buf; buf's address must be 0 when a.Momentum is 0), each bit-identical to
// SGDUpdate of the tensor alone.
func (o Ops[B]) SGDUpdateList(table B, l TensorList, a nn.SGDArgs) error {
	if err := o.checkList("SGDUpdateList", l, 3); err != nil {
		return err
	}
	nest := int32(0)
	if a.Nesterov {
		nest = 1
	}
	ptrs, sizes, chunks, _ := o.list(table, l)
	return o.launchBlocks(kSGDList, l.Chunks, ptrs, sizes, chunks, i32(l.Chunks), i32(l.Chunk),
		a.LR, a.Momentum, a.WeightDecay, nest, a.GradScale)
}

// AdamWUpdateList applies one AdamW step to every tensor of the list
// (operands w, g, m, v), each bit-identical to AdamWUpdate of the tensor
// alone.
func (o Ops[B]) AdamWUpdateList(table B, l TensorList, a nn.AdamWArgs) error {
	if a.Step < 1 {
		return fmt.Errorf("kernels.AdamWUpdateList: step %d, want >= 1", a.Step)
	}
	if err := o.checkList("AdamWUpdateList", l, 4); err != nil {
		return err
	}
	ptrs, sizes, chunks, _ := o.list(table, l)
	step, bc2, decay := AdamWScalars(a)
	return o.launchBlocks(kAdamWList, l.Chunks, ptrs, sizes, chunks, i32(l.Chunks), i32(l.Chunk),
		a.Beta1, a.Beta2, a.Eps, step, bc2, decay, a.GradScale)
}
