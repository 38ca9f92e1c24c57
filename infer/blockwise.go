package infer

import (
	"context"
	"fmt"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// Blockwise prediction of a volume too large to hold: the output is cut
// into blocks, and each block is predicted from the part of the input its
// windows read. The windows are those Predict would place over the whole
// volume (nnU-Net's grid of Steps over the whole region, after Predict's
// padding to the patch), not a grid of the block's own: a block keeps
// exactly the windows that overlap it, so every voxel of the block is the
// weighted mean of exactly the windows that cover it in a whole-volume
// run, summed in the same order. A block's labels are therefore those of
// Predict on the whole volume, bit for bit, given a network whose output
// for a patch does not depend on the other patches of its batch. The
// input a block reads is the union of its windows: at most the block plus
// patch−1 voxels on each side per axis, whatever the volume's size.

// BlockGrid plans the blockwise prediction of a volume of Shape voxels
// in blocks of Block voxels (the last block per axis cut by Shape) with
// windows of Patch overlapping by Overlap.
type BlockGrid struct {
	Shape, Block, Patch [3]int
	Overlap             float64
	padded, lo          [3]int   // Predict's padding to the patch
	steps               [3][]int // window starts per axis, in padded coordinates
}

// NewBlockGrid plans shape in blocks of block for windows of patch.
// Only the shape's addressing is bounded, not its memory: a block reads
// its region, never the volume.
func NewBlockGrid(shape, block, patch [3]int, overlap float64) (*BlockGrid, error) {
	if err := volume.CheckShape(shape); err != nil {
		return nil, fmt.Errorf("infer: blockwise: %w", err)
	}
	if overlap < 0 || overlap >= 1 {
		return nil, fmt.Errorf("infer: overlap %v, want 0 ≤ overlap < 1", overlap)
	}
	g := &BlockGrid{Shape: shape, Block: block, Patch: patch, Overlap: overlap}
	for a := range 3 {
		if block[a] <= 0 || patch[a] <= 0 {
			return nil, fmt.Errorf("infer: blockwise: block %v, patch %v: want positive sizes", block, patch)
		}
		g.padded[a] = max(shape[a], patch[a])
		g.lo[a] = (g.padded[a] - shape[a]) / 2
		g.steps[a] = Steps(g.padded[a], patch[a], 1-overlap)
	}
	return g, nil
}

// Counts returns the number of blocks along each axis.
func (g *BlockGrid) Counts() [3]int {
	var n [3]int
	for a := range 3 {
		n[a] = (g.Shape[a] + g.Block[a] - 1) / g.Block[a]
	}
	return n
}

// NumBlocks returns the number of blocks.
func (g *BlockGrid) NumBlocks() int {
	n := g.Counts()
	return n[0] * n[1] * n[2]
}

// Box returns block i (numbered z-major, x fastest) in the volume's
// voxels.
func (g *BlockGrid) Box(i int) volume.Box {
	n := g.Counts()
	idx := [3]int{i / (n[1] * n[2]), i / n[2] % n[1], i % n[2]}
	var b volume.Box
	for a := range 3 {
		b.Lo[a] = idx[a] * g.Block[a]
		b.Hi[a] = min(b.Lo[a]+g.Block[a], g.Shape[a])
	}
	return b
}

// BlockWindows are the windows a block needs.
type BlockWindows struct {
	// Region is the union of the windows, in padded coordinates (the
	// volume's shifted by Predict's padding to the patch).
	Region volume.Box
	// Read is the part of Region inside the volume, in the volume's
	// voxels: what the block reads of the input.
	Read volume.Box
	// Starts are the windows' starts relative to Region.Lo, in Predict's
	// order.
	Starts [][3]int
}

// axisWindows returns the window starts along axis a that overlap
// [lo, hi) (volume coordinates).
func (g *BlockGrid) axisWindows(a, lo, hi int) []int {
	var keep []int
	for _, s := range g.steps[a] {
		if s < hi+g.lo[a] && s+g.Patch[a] > lo+g.lo[a] {
			keep = append(keep, s)
		}
	}
	return keep
}

// Windows returns the windows of the whole volume's grid that overlap
// block b.
func (g *BlockGrid) Windows(b volume.Box) BlockWindows {
	var w BlockWindows
	var keep [3][]int
	for a := range 3 {
		keep[a] = g.axisWindows(a, b.Lo[a], b.Hi[a])
		w.Region.Lo[a] = keep[a][0]
		w.Region.Hi[a] = keep[a][len(keep[a])-1] + g.Patch[a]
		w.Read.Lo[a] = max(w.Region.Lo[a]-g.lo[a], 0)
		w.Read.Hi[a] = min(w.Region.Hi[a]-g.lo[a], g.Shape[a])
	}
	for _, d := range keep[0] {
		for _, h := range keep[1] {
			for _, x := range keep[2] {
				w.Starts = append(w.Starts, [3]int{d - w.Region.Lo[0], h - w.Region.Lo[1], x - w.Region.Lo[2]})
			}
		}
	}
	return w
}

// MaxRegion returns the largest region any block reads, per axis: at most
// Block + 2·(Patch − 1), and never more than the padded volume. It looks
// at each axis's blocks alone (a region is a product of per-axis spans),
// so it costs the blocks along the axes, not their product.
func (g *BlockGrid) MaxRegion() [3]int {
	var m [3]int
	n := g.Counts()
	for a := range 3 {
		for i := range n[a] {
			lo := i * g.Block[a]
			k := g.axisWindows(a, lo, min(lo+g.Block[a], g.Shape[a]))
			m[a] = max(m[a], k[len(k)-1]+g.Patch[a]-k[0])
		}
	}
	return m
}

// RegionReader fills dst, one slice of box.Voxels() values per input
// channel, with the preprocessed input of box (inside the volume).
type RegionReader func(box volume.Box, dst [][]float32) error

// PredictBlock returns the logits of block b of g's volume (outC channels
// of b.Voxels() values, channel-major) from the windows that overlap it,
// reading inC channels of its region through read. cfg.Patch and
// cfg.Overlap must be g's.
func PredictBlock(ctx context.Context, m Network, g *BlockGrid, b volume.Box, inC, outC int, cfg Window, read RegionReader) ([]float32, error) {
	if cfg.Patch != g.Patch || cfg.Overlap != g.Overlap {
		return nil, fmt.Errorf("infer: blockwise: window patch %v overlap %v, the grid's %v %v", cfg.Patch, cfg.Overlap, g.Patch, g.Overlap)
	}
	if inC <= 0 || outC <= 0 {
		return nil, fmt.Errorf("infer: %d input and %d output channels", inC, outC)
	}
	if !volume.Whole(g.Shape).Contains(b) || b.Empty() {
		return nil, fmt.Errorf("infer: blockwise: block %v outside the volume %v", b, g.Shape)
	}
	w := g.Windows(b)
	rs := w.Region.Size()
	rn := rs[0] * rs[1] * rs[2]
	src := make([][]float32, inC)
	for c := range src {
		src[c] = make([]float32, rn)
	}
	// The read box in region coordinates.
	var off [3]int
	for a := range 3 {
		off[a] = w.Read.Lo[a] + g.lo[a] - w.Region.Lo[a]
	}
	if w.Read.Size() == rs {
		if err := read(w.Read, src); err != nil {
			return nil, err
		}
	} else {
		// Predict's zero padding around a volume smaller than the patch.
		tmp := make([][]float32, inC)
		for c := range tmp {
			tmp[c] = make([]float32, w.Read.Voxels())
		}
		if err := read(w.Read, tmp); err != nil {
			return nil, err
		}
		for c := range src {
			pasteBox(src[c], rs, tmp[c], w.Read.Size(), off)
		}
	}
	acc, err := slideWindows(ctx, m, src, rs, outC, cfg, w.Starts)
	if err != nil {
		return nil, err
	}
	bs := b.Size()
	out := make([]float32, outC*b.Voxels())
	for c := range outC {
		for z := range bs[0] {
			for y := range bs[1] {
				s := c*rn + ((b.Lo[0]+g.lo[0]-w.Region.Lo[0]+z)*rs[1]+b.Lo[1]+g.lo[1]-w.Region.Lo[1]+y)*rs[2] + b.Lo[2] + g.lo[2] - w.Region.Lo[2]
				o := ((c*bs[0]+z)*bs[1] + y) * bs[2]
				copy(out[o:o+bs[2]], acc[s:s+bs[2]])
			}
		}
	}
	return out, nil
}

// pasteBox copies src (shape ss) into dst (shape ds) at off.
func pasteBox(dst []float32, ds [3]int, src []float32, ss, off [3]int) {
	for z := range ss[0] {
		for y := range ss[1] {
			o := ((off[0]+z)*ds[1]+off[1]+y)*ds[2] + off[2]
			copy(dst[o:o+ss[2]], src[(z*ss[1]+y)*ss[2]:][:ss[2]])
		}
	}
}

// BlockBytes bounds the memory PredictBlock allocates for one block of g
// with a batch of batch patches: the region's input (twice where it is
// padded), its logits and weights, the block's logits, the patch buffers.
func BlockBytes(g *BlockGrid, inC, outC, batch int) int64 {
	r := g.MaxRegion()
	rn := int64(r[0] * r[1] * r[2])
	bn := int64(min(g.Block[0], g.Shape[0]) * min(g.Block[1], g.Shape[1]) * min(g.Block[2], g.Shape[2]))
	pv := int64(g.Patch[0] * g.Patch[1] * g.Patch[2])
	return 4 * (rn*int64(2*inC+outC+1) + bn*int64(outC) + int64(max(batch, 1))*pv*int64(inC+2*outC) + pv)
}

// Grid returns m's block grid over a volume of shape: its training patch,
// overlap vc.Overlap.
func (m *Model) Grid(shape, block [3]int, vc config.Validation) (*BlockGrid, error) {
	return NewBlockGrid(shape, block, m.dnet.patch, vc.Overlap)
}

// BlockProbabilities returns m's class probabilities of block b of a
// volume (Probabilities' softmax of PredictBlock's logits).
func (m *Model) BlockProbabilities(ctx context.Context, g *BlockGrid, b volume.Box, vc config.Validation, read RegionReader) ([]float32, error) {
	net := m.dnet
	w := Window{Patch: net.patch, Overlap: vc.Overlap, BatchSize: net.batch}
	if vc.Mirror {
		w.MirrorAxes = mirrorAxes(net.patch)
	}
	logits, err := PredictBlock(ctx, net, g, b, net.inC, net.outC, w, read)
	if err != nil {
		return nil, err
	}
	m.activate(logits, net.outC, b.Voxels())
	return logits, nil
}

// BlockProbabilities returns the members' mean class probabilities of
// block b of a volume of shape cut in blocks of block: what Probabilities
// returns for the whole volume, restricted to b. Each member reads the
// region its own windows need through read.
func (e *Ensemble) BlockProbabilities(ctx context.Context, shape, block [3]int, b volume.Box, vc config.Validation, read RegionReader) ([]float32, error) {
	return e.mean(func(m *Model) ([]float32, error) {
		g, err := m.Grid(shape, block, vc)
		if err != nil {
			return nil, err
		}
		return m.BlockProbabilities(ctx, g, b, vc, read)
	})
}

// BlockBytes bounds the memory one block of a volume of shape takes: the
// largest member's PredictBlock, plus the ensemble's sum and the labels.
func (e *Ensemble) BlockBytes(shape, block [3]int, vc config.Validation) (int64, error) {
	var most int64
	for _, m := range e.Members {
		g, err := m.Grid(shape, block, vc)
		if err != nil {
			return 0, err
		}
		most = max(most, BlockBytes(g, m.dnet.inC, m.dnet.outC, m.dnet.batch))
	}
	bn := int64(min(block[0], shape[0]) * min(block[1], shape[1]) * min(block[2], shape[2]))
	return most + bn*int64(4*e.Classes+1), nil
}
