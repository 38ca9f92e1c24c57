// Ops, the launch recipes' type, and what every recipe shares: grid sizing,
// size checks and the launch itself. The recipes are in ops_<module>.go,
// one file per .cu module.

package kernels

import (
	"fmt"
	"math"
)

// Dim3 is a launch grid's size in blocks along x, y and z; a zero Y or Z
// means 1.
type Dim3 struct{ X, Y, Z int }

// Launcher runs kernels on some device. B is the device's pointer type
// (gpu: a device address; kernels/emu: a host buffer); B's zero value must
// stand for a null pointer, which optional arguments use.
type Launcher[B any] interface {
	// Launch enqueues kernel k on a grid of blocks of Block threads. args
	// follow k.Params: B for p, int32 for i, float32 for f, float64 for d.
	Launch(k Kernel, grid Dim3, args ...any) error
	// Offset returns the pointer bytes past b (a sub-buffer).
	Offset(b B, bytes int) B
}

// DefaultChunk is the most voxels per block of per-channel reductions (as
// the CPU device's chunkVoxels) and DefaultFlatChunk the elements per
// block of flat reductions.
const (
	DefaultChunk     = 4096
	DefaultFlatChunk = 1 << 16
)

// With the default chunk, a per-sample reduction over v voxels takes
// chunks of DefaultChunk voxels, halved (down to minChunk) until there are
// at least minChunks per sample: the deep U-Net levels (nnU-Net's 16³ ×
// 256 channels: one chunk of 4096 voxels a sample) would otherwise run on
// a block or two per sample, a few of a GPU's 100+ multiprocessors, each
// waiting on its memory reads one after the other.
const (
	minChunks = 128
	minChunk  = 32
)

// Ops turns nn.Device operations into kernel launches on Launcher. The zero
// Chunk and FlatChunk mean the defaults; results depend on them (the order
// of floating-point sums), so a device should keep them fixed.
//
// Tensor arguments are device pointers to float32 data in nn's layouts
// unless a method says otherwise; sizes are element counts (n), voxels per
// sample (v), samples (n in per-sample ops) and channels (c). Every flat
// element index must fit in int32; larger tensors are an error. Methods
// that reduce need a scratch buffer of ScratchBytes (per-channel) or
// FlatScratchBytes (SumSquares) bytes, and leave results in device memory
// for the caller to download.
type Ops[B any] struct {
	Launcher  Launcher[B]
	Chunk     int // voxels per block in per-(sample, channel) reductions
	FlatChunk int // elements per block in flat reductions
}

// chunk returns the voxels per block of a per-sample reduction over v
// voxels: Chunk when set, else DefaultChunk halved as minChunks asks. It
// depends on v alone, so a shape's sums are always added in one order.
func (o Ops[B]) chunk(v int) int {
	if o.Chunk > 0 {
		return o.Chunk
	}
	ch := DefaultChunk
	for ch > minChunk && (v+ch-1)/ch < minChunks {
		ch /= 2
	}
	return ch
}

func (o Ops[B]) flatChunk() int {
	if o.FlatChunk > 0 {
		return o.FlatChunk
	}
	return DefaultFlatChunk
}

// nChunks returns the chunks of a reduction over v voxels.
func (o Ops[B]) nChunks(v int) int { return (v + o.chunk(v) - 1) / o.chunk(v) }

// ScratchBytes returns the scratch every per-channel reduction (ChannelSum,
// ChannelDot, InstanceNorm*, SoftmaxLoss, SigmoidBCE) needs for n samples
// of v voxels and c channels (ChannelSum over rows voxels: n = 1, v = rows).
func (o Ops[B]) ScratchBytes(n, v, c int) int {
	return 8 * (n*o.nChunks(v)*(3*c+1) + 4*n*c)
}

// FlatScratchBytes returns the scratch SumSquares needs for n elements.
func (o Ops[B]) FlatScratchBytes(n int) int {
	return 8 * ((n + o.flatChunk() - 1) / o.flatChunk())
}

// gridFor returns the grid of a grid-stride kernel over work elements.
func gridFor(work int) Dim3 {
	return Dim3{X: max(1, min((work+Block-1)/Block, MaxGrid))}
}

// checkSizes returns an error unless every product of dims fits in int32.
func checkSizes(op string, dims ...[]int) error {
	for _, d := range dims {
		p := int64(1)
		for _, x := range d {
			if x < 0 {
				return fmt.Errorf("kernels.%s: negative size %d", op, x)
			}
			p *= int64(x)
			if p > math.MaxInt32 {
				return fmt.Errorf("kernels.%s: %v elements exceed the kernels' int32 indexing", op, d)
			}
		}
	}
	return nil
}

// i32 converts a size that checkSizes has bounded to a kernel's int32
// argument.
func i32(x int) int32 { return int32(x) }

// launchFlat checks that n elements fit the kernels' int32 indexing and
// runs the grid-stride kernel k over them: the whole recipe of the flat
// elementwise ops.
func (o Ops[B]) launchFlat(op string, k Kernel, n int, args ...any) error {
	if err := checkSizes(op, []int{n}); err != nil {
		return err
	}
	return o.launch1(k, n, args...)
}

// launch1 runs a grid-stride kernel over work elements; no launch for 0.
// launchBlocks launches k with one block per output (min(work, MaxGrid)
// blocks, the kernel striding over the rest): the second passes of chunked
// reductions (reduce_chunks_*, instnorm_fwd_stats, instnorm_bwd_finish).
func (o Ops[B]) launchBlocks(k Kernel, work int, args ...any) error {
	if work == 0 {
		return nil
	}
	return o.Launcher.Launch(k, Dim3{X: min(work, MaxGrid)}, args...)
}

func (o Ops[B]) launch1(k Kernel, work int, args ...any) error {
	if work == 0 {
		return nil
	}
	return o.Launcher.Launch(k, gridFor(work), args...)
}
