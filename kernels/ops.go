package kernels

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
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

// DefaultChunk is the voxels per block of per-channel reductions (as the
// CPU device's chunkVoxels) and DefaultFlatChunk the elements per block of
// flat reductions.
const (
	DefaultChunk     = 4096
	DefaultFlatChunk = 1 << 16
)

// Ops turns nn.Device operations into kernel launches on L. The zero
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
	L         Launcher[B]
	Chunk     int // voxels per block in per-(sample, channel) reductions
	FlatChunk int // elements per block in flat reductions
}

func (o Ops[B]) chunk() int {
	if o.Chunk > 0 {
		return o.Chunk
	}
	return DefaultChunk
}

func (o Ops[B]) flatChunk() int {
	if o.FlatChunk > 0 {
		return o.FlatChunk
	}
	return DefaultFlatChunk
}

// nChunks returns the chunks of a reduction over v voxels.
func (o Ops[B]) nChunks(v int) int { return (v + o.chunk() - 1) / o.chunk() }

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

func i32(x int) int32 { return int32(x) }

// launch1 runs a grid-stride kernel over work elements; no launch for 0.
func (o Ops[B]) launch1(k Kernel, work int, args ...any) error {
	if work == 0 {
		return nil
	}
	return o.L.Launch(k, gridFor(work), args...)
}

// Fill sets x[0:n] to v.
func (o Ops[B]) Fill(x B, n int, v float32) error {
	if err := checkSizes("Fill", []int{n}); err != nil {
		return err
	}
	return o.launch1(kFill, n, x, i32(n), v)
}

// Scale computes x[0:n] *= alpha.
func (o Ops[B]) Scale(x B, n int, alpha float32) error {
	if err := checkSizes("Scale", []int{n}); err != nil {
		return err
	}
	return o.launch1(kScale, n, x, i32(n), alpha)
}

// Copy copies src[0:n] into dst[0:n].
func (o Ops[B]) Copy(dst, src B, n int) error {
	if err := checkSizes("Copy", []int{n}); err != nil {
		return err
	}
	return o.launch1(kCopy, n, dst, src, i32(n))
}

// Add computes dst[0:n] += src[0:n].
func (o Ops[B]) Add(dst, src B, n int) error {
	if err := checkSizes("Add", []int{n}); err != nil {
		return err
	}
	return o.launch1(kAdd, n, dst, src, i32(n))
}

// ActForward computes y = max(x, slope·x) (y may be x).
func (o Ops[B]) ActForward(x, y B, n int, slope float32) error {
	if err := checkSlope("ActForward", slope); err != nil {
		return err
	}
	if err := checkSizes("ActForward", []int{n}); err != nil {
		return err
	}
	return o.launch1(kActForward, n, x, y, i32(n), slope)
}

// ActBackward computes dx = y > 0 ? dy : slope·dy (dx may be dy).
func (o Ops[B]) ActBackward(y, dy, dx B, n int, slope float32) error {
	if err := checkSlope("ActBackward", slope); err != nil {
		return err
	}
	if err := checkSizes("ActBackward", []int{n}); err != nil {
		return err
	}
	return o.launch1(kActBackward, n, y, dy, dx, i32(n), slope)
}

// checkSlope rejects slopes for which y's sign no longer tells z's.
func checkSlope(op string, slope float32) error {
	if !(slope >= 0 && slope <= 1) {
		return fmt.Errorf("kernels.%s: slope %v outside [0, 1]", op, slope)
	}
	return nil
}

// AddChannelBias adds bias[j] (c floats) to channel j of t (rows voxels).
func (o Ops[B]) AddChannelBias(t, bias B, rows, c int) error {
	if err := checkSizes("AddChannelBias", []int{rows, c}); err != nil {
		return err
	}
	return o.launch1(kAddChannelBias, rows*c, t, bias, i32(rows), i32(c))
}

// ConcatChannels writes dst (voxels, ca+cb) = concat(a (voxels, ca), b (voxels, cb)).
func (o Ops[B]) ConcatChannels(a, b, dst B, voxels, ca, cb int) error {
	if err := checkSizes("ConcatChannels", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kConcatChannels, voxels*(ca+cb), a, b, dst, i32(voxels), i32(ca), i32(cb))
}

// SplitChannels is ConcatChannels' adjoint: a and b receive the first ca
// and last cb channels of src.
func (o Ops[B]) SplitChannels(src, a, b B, voxels, ca, cb int) error {
	if err := checkSizes("SplitChannels", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kSplitChannels, voxels*(ca+cb), src, a, b, i32(voxels), i32(ca), i32(cb))
}

// NCDHWToNDHWC converts src (n, c, v) to dst (n, v, c).
func (o Ops[B]) NCDHWToNDHWC(src, dst B, n, c, v int) error {
	if err := checkSizes("NCDHWToNDHWC", []int{n, c, v}); err != nil {
		return err
	}
	return o.launch1(kNCDHWToNDHWC, n*c*v, src, dst, i32(n), i32(c), i32(v))
}

// NDHWCToNCDHW converts src (n, v, c) to dst (n, c, v).
func (o Ops[B]) NDHWCToNCDHW(src, dst B, n, c, v int) error {
	if err := checkSizes("NDHWCToNCDHW", []int{n, c, v}); err != nil {
		return err
	}
	return o.launch1(kNDHWCToNCDHW, n*c*v, src, dst, i32(n), i32(c), i32(v))
}

// ChannelAffineAdd computes dst[n,v,j] += alpha[n·c+j]·a[n,v,j] + beta[n·c+j]
// with device arrays alpha and beta (n·c floats). a (with alpha) and beta
// may each be B's zero value (absent).
func (o Ops[B]) ChannelAffineAdd(dst, a, alpha, beta B, n, v, c int) error {
	if err := checkSizes("ChannelAffineAdd", []int{n, v, c}); err != nil {
		return err
	}
	return o.launch1(kChannelAffineAdd, n*v*c, dst, a, alpha, beta, i32(n), i32(v), i32(c))
}

// DownsampleLabels resamples labels (n, d, h, w) to dst (n, od, oh, ow) by
// PyTorch's nearest-exact rule.
func (o Ops[B]) DownsampleLabels(src, dst B, n, d, h, w, od, oh, ow int) error {
	if err := checkSizes("DownsampleLabels", []int{n, d, h, w}, []int{n, od, oh, ow}); err != nil {
		return err
	}
	if od <= 0 || oh <= 0 || ow <= 0 || d <= 0 || h <= 0 || w <= 0 {
		return fmt.Errorf("kernels.DownsampleLabels: sizes (%d, %d, %d) -> (%d, %d, %d) must be positive", d, h, w, od, oh, ow)
	}
	return o.launch1(kDownsampleLabels, n*od*oh*ow, src, dst, i32(n), i32(d), i32(h), i32(w), i32(od), i32(oh), i32(ow))
}

// OneHot writes dst (nvox, c) = [labels = j]. bad is one int32 cell that
// receives NoBadLabel or the first voxel whose label is not a class index.
func (o Ops[B]) OneHot(labels, dst, bad B, nvox, c int) error {
	if err := checkSizes("OneHot", []int{nvox, c}); err != nil {
		return err
	}
	if err := o.L.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kOneHot, nvox, labels, dst, bad, i32(nvox), i32(c))
}

// Vol2ColTileRows returns how many rows of the vol2col matrix of g fit in
// maxBytes (at least 1, at most all of them): the tile size for building
// the matrix a slab at a time.
func Vol2ColTileRows(g geom.Conv, maxBytes int) int {
	k := g.PatchLen()
	total := g.OutVoxels()
	return max(1, min(total, maxBytes/(4*k)))
}

// Col2VolRange returns the input voxels [lo, lo+count) (flat (n, d, h, w)
// order) that rows [m0, m0+rows) of g's vol2col matrix read: whole input
// planes from the first tile row's first to the last row's last.
func Col2VolRange(g geom.Conv, m0, rows int) (lo, count int) {
	oD, oH, oW := g.OutD(), g.OutH(), g.OutW()
	plane := oH * oW
	first, last := m0/plane, (m0+rows-1)/plane // flat (n, od)
	n0, od0 := first/oD, first%oD
	n1, od1 := last/oD, last%oD
	d0 := min(max(od0*g.SD-g.PD, 0), g.InD-1)
	d1 := max(min(od1*g.SD-g.PD+g.KD-1, g.InD-1), 0)
	inPlane := g.InH * g.InW
	lo = (n0*g.InD + d0) * inPlane
	hi := (n1*g.InD + d1 + 1) * inPlane
	return lo, max(hi-lo, 0)
}

// convArgs checks g and a tile and returns the geometry arguments shared by
// vol2col and col2vol.
func convArgs(op string, g geom.Conv, m0, rows int) ([]any, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("kernels.%s: %w", op, err)
	}
	total := g.OutVoxels()
	if m0 < 0 || rows <= 0 || m0+rows > total {
		return nil, fmt.Errorf("kernels.%s: rows [%d, %d) outside the %d output voxels", op, m0, m0+rows, total)
	}
	k := g.PatchLen()
	if err := checkSizes(op, []int{g.N, g.InD, g.InH, g.InW, g.InC}, []int{rows, k}, []int{total}); err != nil {
		return nil, err
	}
	return []any{i32(g.InD), i32(g.InH), i32(g.InW), i32(g.InC), i32(g.KD), i32(g.KH), i32(g.KW),
		i32(g.SD), i32(g.SH), i32(g.SW), i32(g.PD), i32(g.PH), i32(g.PW), i32(m0), i32(rows)}, nil
}

// Vol2Col writes rows [m0, m0+rows) of the vol2col matrix of x (g's input)
// into col (rows × K floats, K = KD·KH·KW·InC, columns in (kd, kh, kw, ci)
// order); see conv.cu. The GEMMs around it are cuBLAS's.
func (o Ops[B]) Vol2Col(g geom.Conv, x, col B, m0, rows int) error {
	geo, err := convArgs("Vol2Col", g, m0, rows)
	if err != nil {
		return err
	}
	work := rows * g.PatchLen()
	if g.InC%4 == 0 {
		work = rows * g.InC / 4 // a thread per row and group of 4 channels
	}
	return o.launch1(kVol2Col, work, append([]any{x, col}, geo...)...)
}

// Vol2ColBF16 is Vol2Col writing bfloat16 (col: rows × K uint16s,
// rounded to nearest even): the operand of bf16 mixed-precision GEMMs.
func (o Ops[B]) Vol2ColBF16(g geom.Conv, x, col B, m0, rows int) error {
	geo, err := convArgs("Vol2ColBF16", g, m0, rows)
	if err != nil {
		return err
	}
	work := rows * g.InC
	if g.InC%4 == 0 {
		work /= 4
	}
	return o.launch1(kVol2ColBF16, work, append([]any{x, col}, geo...)...)
}

// Col2Vol adds to dx (g's input shape) the adjoint of Vol2Col applied to
// dcol, rows [m0, m0+rows) of the matrix. Zero dx before the first tile.
func (o Ops[B]) Col2Vol(g geom.Conv, dcol, dx B, m0, rows int) error {
	geo, err := convArgs("Col2Vol", g, m0, rows)
	if err != nil {
		return err
	}
	lo, count := Col2VolRange(g, m0, rows)
	args := append([]any{dcol, dx}, geo...)
	args = append(args, i32(lo), i32(count))
	work := count * g.InC
	if g.InC%4 == 0 {
		work /= 4 // a thread per voxel and group of 4 channels
	}
	return o.launch1(kCol2Vol, work, args...)
}

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
	if err := o.checkChunked("ChannelSum", 1, rows, c); err != nil {
		return err
	}
	var null B
	nch := o.nChunks(rows)
	if err := o.L.Launch(kChannelSumPartial, o.chunkGrid(1, rows), t, null, scratch, i32(rows), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF32, c, scratch, dst, int32(1), i32(nch), i32(c))
}

// ChannelDot writes out[n·c+j] (float64) = Σ_v a[n,v,j]·b[n,v,j]; b may
// be B's zero value for plain sums.
func (o Ops[B]) ChannelDot(a, b, out, scratch B, n, v, c int) error {
	if err := o.checkChunked("ChannelDot", n, v, c); err != nil {
		return err
	}
	if err := o.L.Launch(kChannelSumPartial, o.chunkGrid(n, v), a, b, scratch, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, n*c, scratch, out, i32(n), i32(o.nChunks(v)), i32(c))
}

// SumSquares writes out[0] (float64) = Σ x[i]² over n elements.
func (o Ops[B]) SumSquares(x, out, scratch B, n int) error {
	if err := checkSizes("SumSquares", []int{n}); err != nil {
		return err
	}
	if n == 0 {
		return o.L.Launch(kFillI32, Dim3{X: 1}, out, int32(2), int32(0)) // 0.0 as two zero words
	}
	nch := (n + o.flatChunk() - 1) / o.flatChunk()
	if err := o.L.Launch(kSumSqPartial, Dim3{X: nch}, x, scratch, i32(n), i32(o.flatChunk())); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, 1, scratch, out, int32(1), i32(nch), int32(1))
}

// InstanceNormActForward normalises x (n, v, c) per (sample, channel),
// applies gamma, beta (c) and max(z, slope·z), writing y and stats
// (n, c, 2) = (mean, 1/sqrt(var + eps)).
func (o Ops[B]) InstanceNormActForward(x, gamma, beta, y, stats, scratch B, n, v, c int, eps, slope float32) error {
	const op = "InstanceNormActForward"
	if err := checkSlope(op, slope); err != nil {
		return err
	}
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	if err := o.L.Launch(kINFwdPartial, o.chunkGrid(n, v), x, scratch, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.launch1(kINFwdStats, n*c, scratch, stats, i32(n), i32(v), i32(c), i32(nch), eps); err != nil {
		return err
	}
	return o.launch1(kINFwdApply, n*v*c, x, gamma, beta, stats, y, i32(n), i32(v), i32(c), slope)
}

// InstanceNormActBackward computes dx and, overwriting them, dgamma and
// dbeta from dy, given the forward's input x, gamma, beta and stats (the
// activation's derivative comes from the recomputed pre-activation). dx
// may be dy.
func (o Ops[B]) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, scratch B, n, v, c int, slope float32) error {
	const op = "InstanceNormActBackward"
	if err := checkSlope(op, slope); err != nil {
		return err
	}
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	part := scratch
	tot := o.L.Offset(scratch, 8*n*nch*2*c)
	coef := o.L.Offset(tot, 8*n*2*c)
	if err := o.L.Launch(kINBwdPartial, o.chunkGrid(n, v), x, gamma, beta, dy, stats, part, i32(v), i32(c), i32(o.chunk()), slope); err != nil {
		return err
	}
	if err := o.launch1(kINBwdFinish, n*c, part, stats, gamma, tot, coef, i32(n), i32(v), i32(c), i32(nch)); err != nil {
		return err
	}
	if err := o.launch1(kINBwdAffine, c, tot, dgamma, dbeta, i32(n), i32(c)); err != nil {
		return err
	}
	return o.launch1(kINBwdApply, n*v*c, x, gamma, beta, dy, stats, coef, dx, i32(n), i32(v), i32(c), slope)
}

// Softmax writes probs = softmax(logits) over the c channels of nvox
// voxels (probs may be logits).
func (o Ops[B]) Softmax(logits, probs B, nvox, c int) error {
	if err := checkSizes("Softmax", []int{nvox, c}); err != nil {
		return err
	}
	if c <= 0 {
		return fmt.Errorf("kernels.Softmax: %d channels", c)
	}
	return o.launch1(kSoftmax, nvox, logits, probs, i32(nvox), i32(c))
}

// SoftmaxLossOutLen is the float64s SoftmaxLoss writes to out: CE per
// sample (n), then per sample the class sums Intersect (c), PredSum (c),
// TargetSum (c).
func SoftmaxLossOutLen(n, c int) int { return n + 3*n*c }

// SoftmaxLoss writes probs = softmax(logits) over channels and, in out
// (SoftmaxLossOutLen float64s), the sums of nn.SegStats against labels
// (n, v). bad is one int32 cell: NoBadLabel or the first invalid voxel.
func (o Ops[B]) SoftmaxLoss(logits, labels, probs, out, bad, scratch B, n, v, c int) error {
	const op = "SoftmaxLoss"
	if err := o.checkChunked(op, n, v, c); err != nil {
		return err
	}
	nch := o.nChunks(v)
	cepart := scratch
	part := o.L.Offset(scratch, 8*n*nch)
	if err := o.L.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.L.Launch(kSoftmaxFwd, o.chunkGrid(n, v), logits, labels, probs, cepart, bad, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.L.Launch(kSegStatsPartial, o.chunkGrid(n, v), probs, labels, part, i32(v), i32(c), i32(o.chunk())); err != nil {
		return err
	}
	if err := o.launch1(kReduceChunksF64, n, cepart, out, i32(n), i32(nch), int32(1)); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, n*3*c, part, o.L.Offset(out, 8*n), i32(n), i32(nch), i32(3*c))
}

// SegStatsFromOut turns SoftmaxLoss's out (downloaded) into nn.SegStats.
func SegStatsFromOut(out []float64, n, v, c int) (nn.SegStats, error) {
	if len(out) != SoftmaxLossOutLen(n, c) {
		return nn.SegStats{}, fmt.Errorf("kernels.SegStatsFromOut: %d values, want %d for n=%d c=%d", len(out), SoftmaxLossOutLen(n, c), n, c)
	}
	st := nn.SegStats{N: n, C: c, Voxels: v,
		CE: append([]float64(nil), out[:n]...), Intersect: make([]float64, n*c),
		PredSum: make([]float64, n*c), TargetSum: make([]float64, n*c)}
	for b := 0; b < n; b++ {
		s := out[n+b*3*c:]
		copy(st.Intersect[b*c:(b+1)*c], s[:c])
		copy(st.PredSum[b*c:(b+1)*c], s[c:2*c])
		copy(st.TargetSum[b*c:(b+1)*c], s[2*c:3*c])
	}
	return st, nil
}

// SoftmaxLossBackward writes dlogits from probs and labels (see
// nn.Device.SoftmaxLossBackward) with device arrays ceScale (n) and alpha,
// beta (n·c floats); extra may be B's zero value. dlogits may be probs.
func (o Ops[B]) SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits B, n, v, c int) error {
	if err := checkSizes("SoftmaxLossBackward", []int{n, v, c}); err != nil {
		return err
	}
	return o.launch1(kSoftmaxLossBwd, n*v, probs, labels, ceScale, alpha, beta, extra, dlogits, i32(n), i32(v), i32(c))
}

// SigmoidBCE writes out[b] (float64) = Σ BCEWithLogits(pos_weight) of
// sample b of one-channel logits (n, v) against binary labels, and
// dlogits = gradScale·∂(sum)/∂logits; bad as in OneHot.
func (o Ops[B]) SigmoidBCE(logits, labels, dlogits, out, bad, scratch B, n, v int, posWeight, gradScale float32) error {
	if err := o.checkChunked("SigmoidBCE", n, v, 1); err != nil {
		return err
	}
	if err := o.L.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	if err := o.L.Launch(kSigmoidBCE, o.chunkGrid(n, v), logits, labels, dlogits, scratch, bad, i32(v), i32(o.chunk()), posWeight, gradScale); err != nil {
		return err
	}
	return o.launch1(kReduceChunksF64, n, scratch, out, i32(n), i32(o.nChunks(v)), int32(1))
}

// SegCountsLen is the uint64 counters SegCounts writes for c channels:
// TP, FP, FN for each of max(c, 2) classes.
func SegCountsLen(c int) int { return 3 * max(c, 2) }

// SegCounts writes counts (SegCountsLen(c) uint64s: TP[k], FP[k], FN[k])
// of argmax(logits) (nvox voxels, c channels; one channel thresholded at 0)
// against labels; bad as in OneHot.
func (o Ops[B]) SegCounts(logits, labels, counts, bad B, nvox, c int) error {
	if err := checkSizes("SegCounts", []int{nvox, c}); err != nil {
		return err
	}
	k := max(c, 2)
	if err := o.L.Launch(kFillI32, gridFor(2*3*k), counts, i32(2*3*k), int32(0)); err != nil {
		return err
	}
	if err := o.L.Launch(kFillI32, Dim3{X: 1}, bad, int32(1), int32(NoBadLabel)); err != nil {
		return err
	}
	return o.launch1(kSegCounts, nvox, logits, labels, counts, bad, i32(nvox), i32(c), i32(k))
}

// SkeletonScratchBytes returns the scratch SoftSkeletonBackward needs for
// a tensor of elems floats and iters iterations (it keeps the forward's
// intermediates); SoftSkeleton needs 3·4·elems bytes of it.
func SkeletonScratchBytes(elems, iters int) int { return 4 * elems * (4*iters + 6) }

// skelArgs checks a soft-skeleton call and returns its geometry arguments.
func skelArgs(op string, n, d, h, w, c, iters, fromC int) ([]any, error) {
	if n <= 0 || d <= 0 || h <= 0 || w <= 0 || c <= 0 {
		return nil, fmt.Errorf("kernels.%s: shape (%d, %d, %d, %d, %d) must be positive", op, n, d, h, w, c)
	}
	if iters < 0 || fromC < 0 {
		return nil, fmt.Errorf("kernels.%s: iters %d, fromC %d must be non-negative", op, iters, fromC)
	}
	if err := checkSizes(op, []int{n, d, h, w, c}); err != nil {
		return nil, err
	}
	return []any{i32(n), i32(d), i32(h), i32(w), i32(c), i32(min(fromC, c))}, nil
}

// SoftSkeleton writes clDice's soft skeleton of every channel >= fromC of
// x (n, d, h, w, c) to skel (zero below fromC); see skel.cu.
func (o Ops[B]) SoftSkeleton(x, skel, scratch B, n, d, h, w, c, iters, fromC int) error {
	geo, err := skelArgs("SoftSkeleton", n, d, h, w, c, iters, fromC)
	if err != nil {
		return err
	}
	elems := n * d * h * w * c
	run := func(k Kernel, bufs ...any) error { return o.launch1(k, elems, append(bufs, geo...)...) }
	cur, next := scratch, o.L.Offset(scratch, 4*elems)
	open := o.L.Offset(scratch, 8*elems)
	// img_1 = erode(x), open_0 = dilate(img_1), skel_0 = relu(x - open_0).
	if err := run(kSkelErode, x, cur); err != nil {
		return err
	}
	if err := run(kSkelDilate, cur, open); err != nil {
		return err
	}
	if err := run(kSkelInit, x, open, skel); err != nil {
		return err
	}
	for j := 1; j <= iters; j++ { // cur holds img_j
		if err := run(kSkelErode, cur, next); err != nil {
			return err
		}
		if err := run(kSkelDilate, next, open); err != nil {
			return err
		}
		if err := run(kSkelStep, cur, open, skel, skel); err != nil {
			return err
		}
		cur, next = next, cur
	}
	return nil
}

// SoftSkeletonBackward adds to dx the gradient of Σ dskel·SoftSkeleton(x)
// (channels >= fromC). It recomputes the forward's intermediates in scratch
// (SkeletonScratchBytes).
func (o Ops[B]) SoftSkeletonBackward(x, dskel, dx, scratch B, n, d, h, w, c, iters, fromC int) error {
	geo, err := skelArgs("SoftSkeletonBackward", n, d, h, w, c, iters, fromC)
	if err != nil {
		return err
	}
	elems := n * d * h * w * c
	run := func(k Kernel, bufs ...any) error { return o.launch1(k, elems, append(bufs, geo...)...) }
	next := 0
	vol := func() B { b := o.L.Offset(scratch, 4*elems*next); next++; return b }
	imgs := []B{x} // img_0 .. img_{iters+1}
	opens := make([]B, iters+1)
	for j := 0; j <= iters; j++ {
		imgs = append(imgs, vol())
		opens[j] = vol()
		if err := run(kSkelErode, imgs[j], imgs[j+1]); err != nil {
			return err
		}
		if err := run(kSkelDilate, imgs[j+1], opens[j]); err != nil {
			return err
		}
	}
	skels := make([]B, iters) // skel_0 .. skel_{iters-1}
	for j := range skels {
		skels[j] = vol()
		if j == 0 {
			err = run(kSkelInit, x, opens[0], skels[0])
		} else {
			err = run(kSkelStep, imgs[j], opens[j], skels[j-1], skels[j])
		}
		if err != nil {
			return err
		}
	}
	ds, dopen := vol(), vol()
	if err := o.Copy(ds, dskel, elems); err != nil {
		return err
	}
	dimgs := make([]B, iters+2)
	for j := range dimgs {
		dimgs[j] = vol()
		if err := o.Fill(dimgs[j], elems, 0); err != nil {
			return err
		}
	}
	for j := iters; j >= 0; j-- {
		var prev B
		if j > 0 {
			prev = skels[j-1]
		}
		if err := run(kSkelBwdStep, imgs[j], opens[j], prev, ds, dimgs[j], dopen); err != nil {
			return err
		}
		if err := run(kSkelDilateBwd, imgs[j+1], dopen, dimgs[j+1]); err != nil {
			return err
		}
	}
	for j := iters + 1; j >= 1; j-- {
		if err := run(kSkelErodeBwd, imgs[j-1], dimgs[j], dimgs[j-1]); err != nil {
			return err
		}
	}
	return run(kSkelAccum, dx, dimgs[0])
}

// SGDUpdate applies one SGD step to w (n floats) with gradient g and
// momentum buffer buf (B's zero value when a.Momentum is 0).
func (o Ops[B]) SGDUpdate(w, g, buf B, n int, a nn.SGDArgs) error {
	if err := checkSizes("SGDUpdate", []int{n}); err != nil {
		return err
	}
	if a.Momentum == 0 {
		var null B
		buf = null
	}
	nest := int32(0)
	if a.Nesterov {
		nest = 1
	}
	return o.launch1(kSGD, n, w, g, buf, i32(n), a.LR, a.Momentum, a.WeightDecay, nest, a.GradScale)
}

// AdamWScalars returns the host-side factors of an AdamW step, computed as
// the CPU device computes them: stepSize = lr/(1-β1^t), bc2Sqrt =
// sqrt(1-β2^t), decay = 1 - lr·wd.
func AdamWScalars(a nn.AdamWArgs) (stepSize, bc2Sqrt, decay float32) {
	bc1 := 1 - math.Pow(float64(a.Beta1), float64(a.Step))
	bc2 := 1 - math.Pow(float64(a.Beta2), float64(a.Step))
	return float32(float64(a.LR) / bc1), float32(math.Sqrt(bc2)), 1 - a.LR*a.WeightDecay
}

// AdamWUpdate applies one AdamW step to w (n floats) with gradient g and
// moments m, v.
func (o Ops[B]) AdamWUpdate(w, g, m, v B, n int, a nn.AdamWArgs) error {
	if a.Step < 1 {
		return fmt.Errorf("kernels.AdamWUpdate: step %d, want >= 1", a.Step)
	}
	if err := checkSizes("AdamWUpdate", []int{n}); err != nil {
		return err
	}
	step, bc2, decay := AdamWScalars(a)
	return o.launch1(kAdamW, n, w, g, m, v, i32(n), a.Beta1, a.Beta2, a.Eps, step, bc2, decay, a.GradScale)
}

// F32ToBF16 converts n floats to bfloat16 (dst: n uint16s), rounding to
// nearest even.
func (o Ops[B]) F32ToBF16(src, dst B, n int) error {
	if err := checkSizes("F32ToBF16", []int{n}); err != nil {
		return err
	}
	return o.launch1(kF32ToBF16, n, src, dst, i32(n))
}

// BF16ToF32 converts n bfloat16s (uint16s) to floats, exactly.
func (o Ops[B]) BF16ToF32(src, dst B, n int) error {
	if err := checkSizes("BF16ToF32", []int{n}); err != nil {
		return err
	}
	return o.launch1(kBF16ToF32, n, src, dst, i32(n))
}
