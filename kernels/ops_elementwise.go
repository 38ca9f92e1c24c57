// Launch recipes of elementwise.cu — fills, copies, arithmetic,
// activations, channel bias, concat/split, layout transposes, label
// resampling — and of cast.cu (float32 ↔ bfloat16).

package kernels

import "fmt"

// Fill sets x[0:n] to v.
func (o Ops[B]) Fill(x B, n int, v float32) error {
	return o.launchFlat("Fill", kFill, n, x, i32(n), v)
}

// Scale computes x[0:n] *= alpha.
func (o Ops[B]) Scale(x B, n int, alpha float32) error {
	return o.launchFlat("Scale", kScale, n, x, i32(n), alpha)
}

// Copy copies src[0:n] into dst[0:n].
func (o Ops[B]) Copy(dst, src B, n int) error {
	return o.launchFlat("Copy", kCopy, n, dst, src, i32(n))
}

// Add computes dst[0:n] += src[0:n].
func (o Ops[B]) Add(dst, src B, n int) error {
	return o.launchFlat("Add", kAdd, n, dst, src, i32(n))
}

// AddBF16 is Add for bfloat16 dst and src (n uint16s each): each sum of
// the widened values rounded to nearest even.
func (o Ops[B]) AddBF16(dst, src B, n int) error {
	return o.launchFlat("AddBF16", kAddBF16, n, dst, src, i32(n))
}

// ActForward computes y = max(x, slope·x) (y may be x).
func (o Ops[B]) ActForward(x, y B, n int, slope float32) error {
	if err := checkSlope("ActForward", slope); err != nil {
		return err
	}
	return o.launchFlat("ActForward", kActForward, n, x, y, i32(n), slope)
}

// ActBackward computes dx = y > 0 ? dy : slope·dy (dx may be dy).
func (o Ops[B]) ActBackward(y, dy, dx B, n int, slope float32) error {
	if err := checkSlope("ActBackward", slope); err != nil {
		return err
	}
	return o.launchFlat("ActBackward", kActBackward, n, y, dy, dx, i32(n), slope)
}

// ActForwardBF16 is ActForward for bfloat16 x and y (n uint16s each; y
// may be x): y rounded to nearest even.
func (o Ops[B]) ActForwardBF16(x, y B, n int, slope float32) error {
	if err := checkSlope("ActForwardBF16", slope); err != nil {
		return err
	}
	return o.launchFlat("ActForwardBF16", kActForwardBF16, n, x, y, i32(n), slope)
}

// ActBackwardBF16 is ActBackward for a bfloat16 y (n uint16s); dy and dx
// are float32 (dx may be dy).
func (o Ops[B]) ActBackwardBF16(y, dy, dx B, n int, slope float32) error {
	if err := checkSlope("ActBackwardBF16", slope); err != nil {
		return err
	}
	return o.launchFlat("ActBackwardBF16", kActBackwardBF16, n, y, dy, dx, i32(n), slope)
}

// ActBackwardBF16G is ActBackward for bfloat16 y, dy and dx (n uint16s
// each; dx may be dy): dx rounded to nearest even.
func (o Ops[B]) ActBackwardBF16G(y, dy, dx B, n int, slope float32) error {
	if err := checkSlope("ActBackwardBF16G", slope); err != nil {
		return err
	}
	return o.launchFlat("ActBackwardBF16G", kActBackwardBF16G, n, y, dy, dx, i32(n), slope)
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

// AddChannelBiasBF16 is AddChannelBias for a bfloat16 t (rows·c uint16s;
// bias float32): each sum rounded to nearest even.
func (o Ops[B]) AddChannelBiasBF16(t, bias B, rows, c int) error {
	if err := checkSizes("AddChannelBiasBF16", []int{rows, c}); err != nil {
		return err
	}
	return o.launch1(kAddChannelBiasBF16, rows*c, t, bias, i32(rows), i32(c))
}

// ConcatChannels writes dst (voxels, ca+cb) = concat(a (voxels, ca), b (voxels, cb)).
func (o Ops[B]) ConcatChannels(a, b, dst B, voxels, ca, cb int) error {
	if err := checkSizes("ConcatChannels", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kConcatChannels, voxels*(ca+cb), a, b, dst, i32(voxels), i32(ca), i32(cb))
}

// ConcatChannelsBF16 is ConcatChannels for bfloat16 a, b and dst (uint16s).
func (o Ops[B]) ConcatChannelsBF16(a, b, dst B, voxels, ca, cb int) error {
	if err := checkSizes("ConcatChannelsBF16", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kConcatChannelsBF16, voxels*(ca+cb), a, b, dst, i32(voxels), i32(ca), i32(cb))
}

// SplitChannels is ConcatChannels' adjoint: a and b receive the first ca
// and last cb channels of src.
func (o Ops[B]) SplitChannels(src, a, b B, voxels, ca, cb int) error {
	if err := checkSizes("SplitChannels", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kSplitChannels, voxels*(ca+cb), src, a, b, i32(voxels), i32(ca), i32(cb))
}

// SplitChannelsBF16 is SplitChannels for bfloat16 src, a and b (uint16s).
func (o Ops[B]) SplitChannelsBF16(src, a, b B, voxels, ca, cb int) error {
	if err := checkSizes("SplitChannelsBF16", []int{voxels, ca + cb}); err != nil {
		return err
	}
	return o.launch1(kSplitChannelsBF16, voxels*(ca+cb), src, a, b, i32(voxels), i32(ca), i32(cb))
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

// AvgPool writes y (n, d/kd, h/kh, w/kw, c) = the mean of each
// kd×kh×kw window of x (n, d, h, w, c), windows at stride = size; bf16
// selects bfloat16 x and y (uint16s).
func (o Ops[B]) AvgPool(x, y B, n, d, h, w, c int, k [3]int, bf16 bool) error {
	if err := checkPool("AvgPool", n, d, h, w, c, k); err != nil {
		return err
	}
	kn := kAvgPool
	if bf16 {
		kn = kAvgPoolBF16
	}
	return o.launch1(kn, n*(d/k[0])*(h/k[1])*(w/k[2])*c, x, y, i32(n), i32(d), i32(h), i32(w), i32(c), i32(k[0]), i32(k[1]), i32(k[2]))
}

// AvgPoolBackward writes dx (n, d, h, w, c), AvgPool's input gradient,
// from dy (n, d/kd, h/kh, w/kw, c); bf16 selects bfloat16 dy and dx.
func (o Ops[B]) AvgPoolBackward(dy, dx B, n, d, h, w, c int, k [3]int, bf16 bool) error {
	if err := checkPool("AvgPoolBackward", n, d, h, w, c, k); err != nil {
		return err
	}
	kn := kAvgPoolBackward
	if bf16 {
		kn = kAvgPoolBackwardBF16
	}
	return o.launch1(kn, n*d*h*w*c, dy, dx, i32(n), i32(d), i32(h), i32(w), i32(c), i32(k[0]), i32(k[1]), i32(k[2]))
}

// checkPool checks a pooling's sizes: every window at least 1 and no
// larger than its axis, the elements within int32 indexing.
func checkPool(op string, n, d, h, w, c int, k [3]int) error {
	if err := checkSizes(op, []int{n, d, h, w, c}); err != nil {
		return err
	}
	for a, s := range [3]int{d, h, w} {
		if k[a] < 1 || k[a] > s {
			return fmt.Errorf("kernels.%s: window %v does not fit the spatial size (%d, %d, %d)", op, k, d, h, w)
		}
	}
	return nil
}

// F32ToBF16 converts n floats to bfloat16 (dst: n uint16s), rounding to
// nearest even.
func (o Ops[B]) F32ToBF16(src, dst B, n int) error {
	return o.launchFlat("F32ToBF16", kF32ToBF16, n, src, dst, i32(n))
}

// BF16ToF32 converts n bfloat16s (uint16s) to floats, exactly.
func (o Ops[B]) BF16ToF32(src, dst B, n int) error {
	return o.launchFlat("BF16ToF32", kBF16ToF32, n, src, dst, i32(n))
}
