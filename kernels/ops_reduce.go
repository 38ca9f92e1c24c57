// Launch recipes of reduce.cu: deterministic per-channel and flat sums.

package kernels

import "fmt"

// chunkGrid returns the grid of a chunked per-sample reduction.
func (o Ops[B]) chunkGrid(n, v int) Dim3 { return Dim3{X: o.nChunks(v), Y: n} }

// checkChunked validates a per-(sample, channel) reduction's sizes.
func (o Ops[B]) checkChunked(op string, n, v, c int) error {
	if n <= 0 || v <= 0 || c <= 0 {
		return fmt.Errorf("kernels.%s: sizes n=%d v=%d c=%d must be positive", op, n, v, c)
	}
	if n > 65535 {
		return fmt.Errorf("kernels.%s: %d samples exceed the grid's y limit 65535", op, n)
	}
	return checkSizes(op, []int{n, v, c}, []int{n, o.nChunks(v), 3*c + 1})
}

// ChannelSum writes dst[j] (float32) = Σ of channel j of t (rows voxels
// with c channels, all samples): the bias gradient.
func (o Ops[B]) ChannelSum(t, dst, scratch B, rows, c int) error {
	return o.channelSum("ChannelSum", kChannelSumPartial, t, dst, scratch, rows, c)
}

// ChannelSumBF16 is ChannelSum for a bfloat16 t (rows·c uint16s): the sums
// of the widened values (dst float32).
func (o Ops[B]) ChannelSumBF16(t, dst, scratch B, rows, c int) error {
	return o.channelSum("ChannelSumBF16", kChannelSumPartialBF16, t, dst, scratch, rows, c)
}

// channelSum is ChannelSum's recipe with the partial-sum kernel of t's
// element type.
func (o Ops[B]) channelSum(op string, kPartial Kernel, t, dst, scratch B, rows, c int) error {
	if err := o.checkChunked(op, 1, rows, c); err != nil {
		return err
	}
	var null B
	nch := o.nChunks(rows)
	if err := o.Launcher.Launch(kPartial, o.chunkGrid(1, rows), t, null, scratch, i32(rows), i32(c), i32(o.chunk(rows))); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF32, c, scratch, dst, int32(1), i32(nch), i32(c))
}

// ChannelDot writes out[n·c+j] (float64) = Σ_v a[n,v,j]·b[n,v,j]; b may
// be B's zero value for plain sums.
func (o Ops[B]) ChannelDot(a, b, out, scratch B, n, v, c int) error {
	if err := o.checkChunked("ChannelDot", n, v, c); err != nil {
		return err
	}
	if err := o.Launcher.Launch(kChannelSumPartial, o.chunkGrid(n, v), a, b, scratch, i32(v), i32(c), i32(o.chunk(v))); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, n*c, scratch, out, i32(n), i32(o.nChunks(v)), i32(c))
}

// SumSquares writes out[0] (float64) = Σ x[i]² over n elements.
func (o Ops[B]) SumSquares(x, out, scratch B, n int) error {
	if err := checkSizes("SumSquares", []int{n}); err != nil {
		return err
	}
	if n == 0 {
		return o.Launcher.Launch(kFillI32, Dim3{X: 1}, out, int32(2), int32(0)) // 0.0 as two zero words
	}
	nch := (n + o.flatChunk() - 1) / o.flatChunk()
	if err := o.Launcher.Launch(kSumSqPartial, Dim3{X: nch}, x, scratch, i32(n), i32(o.flatChunk())); err != nil {
		return err
	}
	return o.launchBlocks(kReduceChunksF64, 1, scratch, out, int32(1), i32(nch), int32(1))
}
