// Package nn builds voxtrain's 3D U-Net, its losses, optimisers and learning
// rate schedules on top of an abstract compute Device.
//
// The model is written once against the Device interface, so the same U-Net
// runs on the CPU (package cpu, the numerical reference) and on CUDA (package
// gpu). In the style of karpathy/llm.c there is no autograd graph: every
// layer's forward and backward pass is written out by hand, and every Device
// op has a plain reference on the CPU that the fast versions are tested
// against.
//
// # Layouts
//
// nn fixes the memory layout of every tensor it hands to a Device, so that
// all devices agree and parameters can be converted to PyTorch on the host:
//
//   - activations, logits, probabilities: channels-last (N, D, H, W, C);
//   - labels: (N, D, H, W), class indices stored as float32;
//   - Conv3d weights: (O, kD, kH, kW, I) — PyTorch's (O, I, kD, kH, kW) with
//     the input channels moved last so the convolution's reduction axis is
//     contiguous;
//   - ConvTranspose3d weights: (I, kD, kH, kW, O) — PyTorch's
//     (I, O, kD, kH, kW), same permutation;
//   - vectors (biases, norm affine parameters): (C).
//
// The conversion to and from PyTorch's layout happens only at the boundary
// (ExportParams / ImportParams), see params.go.
//
// # Streams
//
// Ops are enqueued on the device's compute stream (Device.ComputeStream).
// Uploads and downloads take an explicit stream so that the trainer can copy
// the next batch on a second stream while the compute stream runs the
// current step:
//
//	copyS := dev.NewStream()
//	dev.Upload(copyS, xNext, hostBatch)  // async on copyS
//	ev := copyS.Record()                 // completes once the upload has
//	...                                  // compute on the current batch
//	dev.ComputeStream().Wait(ev)         // later compute sees xNext filled
//	ev.Synchronize()                     // host: hostBatch may be reused now
//
// The contract every Device honours: work enqueued on one stream runs in
// the order it was enqueued; an Event recorded on a stream completes when all
// work enqueued on that stream before the Record has completed; after
// s.Wait(e), work enqueued on s afterwards does not start before e has
// completed. Nothing is promised about the relative order of work on two
// streams without an event between them, so a tensor (or host buffer) in
// use by one stream must not be touched by another until an event says so.
package nn

import (
	"fmt"
	"strings"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// MemoryReporter is implemented by a device that can say how much memory
// a new allocation may take (the CPU device: the machine's available
// memory), so a workspace it cannot hold is refused before allocating.
type MemoryReporter interface {
	MemoryAvailable() (bytes int64, ok bool)
}

// ActivationAllocator is implemented by a device that may store the
// activations a U-Net keeps in a narrower type than float32 (the CUDA
// device in bf16 mode keeps them as bfloat16, as PyTorch's autocast does,
// halving their memory). The Workspace allocates through it the
// activations — convolution outputs, normalised and activated block
// outputs, transposed-convolution outputs and concats — when
// ActivationBytes is below 4; their gradients follow
// ActivationGradientAllocator, and norm statistics, logits and inputs
// stay float32 (Alloc). The CPU device does not implement it: it is the
// float32 reference.
//
// A narrower activation is accepted by the ops nn applies to it, where nn
// passes it: Conv3DForward (x, y), Conv3DBackwardData (dy, dx: the
// transposed convolution's forward), Conv3DBackwardWeight (x, dy: the
// transposed convolution's input), AddChannelBias, ConcatChannels,
// InstanceNormActForward (x, y), InstanceNormActBackward (x), ActForward
// (x, y), ActBackward (y), and Free and View; Upload and Download convert.
type ActivationAllocator interface {
	// ActivationBytes returns the bytes per element of AllocActivation's
	// tensors; 4 means float32, and nn then allocates with Alloc.
	ActivationBytes() int
	// AllocActivation returns a zero-filled activation tensor.
	AllocActivation(shape Shape) Tensor
}

// ActivationGradientAllocator is implemented by a device that may store
// the gradients of the activations a U-Net keeps in a narrower type than
// float32, as PyTorch's autocast keeps the gradient of a bf16 activation
// in bf16 (the CUDA device in bf16 mode, with bf16 activations). The
// Workspace allocates through it its activation-gradient buffers — each
// level's two that the blocks alternate between, the skip connections'
// and the concats' gradients — when ActivationGradientBytes is below 4.
// Everything else about gradients stays float32: the loss gradients
// (dlogits), the parameters' gradients and the optimiser state. Where
// activations and their gradients have the same element type the
// Workspace lets tensors of the two kinds that are never alive together
// share memory (a transposed convolution's output and its level's
// gradient buffer, a concat and its gradient); where they differ it
// cannot.
//
// A narrower activation gradient is accepted by the ops nn applies to
// it, where nn passes it (its activations then narrow too): Add (dst and
// src), InstanceNormActBackward (dy, dx), ActBackward (dy, dx),
// Conv3DBackwardWeight (dy; x in the transposed convolution's backward),
// Conv3DBackwardData (dx, from a narrow dy or a float32 dlogits),
// Conv3DForward (x and y: the transposed convolution's backward),
// SplitChannels (src, a, b) and ChannelSum (t; dst float32).
type ActivationGradientAllocator interface {
	// ActivationGradientBytes returns the bytes per element of
	// AllocActivationGradient's tensors; 4 means float32, and nn then
	// allocates with Alloc.
	ActivationGradientBytes() int
	// AllocActivationGradient returns a zero-filled activation-gradient
	// tensor.
	AllocActivationGradient(shape Shape) Tensor
}

// ConvKind names a convolution pass by the Device method that runs it.
type ConvKind int

// The convolution passes.
const (
	ConvForward        ConvKind = iota // Conv3DForward
	ConvBackwardData                   // Conv3DBackwardData
	ConvBackwardWeight                 // Conv3DBackwardWeight
)

// String names the pass as the Device method does.
func (k ConvKind) String() string {
	switch k {
	case ConvForward:
		return "Conv3DForward"
	case ConvBackwardData:
		return "Conv3DBackwardData"
	case ConvBackwardWeight:
		return "Conv3DBackwardWeight"
	}
	return fmt.Sprintf("ConvKind(%d)", int(k))
}

// ConvPass is one convolution a workspace's steps run: the pass and its
// geometry.
type ConvPass struct {
	Kind ConvKind
	Geom geom.Conv
}

// ConvPreparer is implemented by a device that picks each convolution's
// algorithm by timing the candidates at first use (the CUDA device with
// cuDNN, like PyTorch's cudnn.benchmark). NewWorkspace hands it every pass
// the workspace's steps will run before allocating the workspace, so that
// the timing's scratch memory (up to cuDNN's workspace limit, 1 GiB) comes
// and goes while the device holds only the weights, instead of adding to
// the peak of a step whose activations are all allocated — PyTorch times
// during its first forward pass, before most activations exist; without
// this, voxtrain's first run on a GPU model peaked 1 GiB above every
// later one (docs/GPU.md, 2026-11-27). An error is the device's failure
// (out of memory, a library fault); a pass the device cannot time is not
// an error: it is timed, or run another way, when the step meets it.
type ConvPreparer interface {
	PrepareConvs(passes []ConvPass) error
}

// Shape is a tensor's dimensions, outermost first.
type Shape []int

// Len returns the number of elements of a tensor of this shape.
func (s Shape) Len() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and o have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s that does not share its backing array.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

// String formats s as (a, b, c).
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Tensor is an opaque float32 tensor owned by a Device. Its contents are
// reached only through the Device's ops, Upload and Download.
type Tensor interface {
	// Shape returns the tensor's dimensions. The caller must not modify it.
	Shape() Shape
}

// Event marks a point in a stream's work.
type Event interface {
	// Synchronize blocks the calling goroutine until the event has completed.
	Synchronize()
	// Done reports, without blocking, whether the event has completed.
	Done() bool
}

// Stream is an ordered queue of device work (see the package doc for the
// ordering contract).
type Stream interface {
	// Record returns an event that completes when all work enqueued on the
	// stream before this call has completed.
	Record() Event
	// Wait makes work enqueued on the stream after this call wait for e.
	// It does not block the caller on devices with asynchronous streams.
	Wait(e Event)
	// Synchronize blocks the caller until all work enqueued so far has completed.
	Synchronize()
}

// SegStats are the per-sample and per-class sums from which the
// softmax-based segmentation losses (cross-entropy, soft Dice) and their
// gradients are computed on the host. Indexing: [n] or [n*C+c].
type SegStats struct {
	N, C int
	// CE is Σ over voxels of −log softmax(logits)[label] per sample ([n]);
	// the multi-label op's is the BCE per sample and channel ([n·C+c]).
	CE        []float64
	Intersect []float64 // Σ p_c·[label = c]
	PredSum   []float64 // Σ p_c
	TargetSum []float64 // Σ [label = c]
	Voxels    int       // voxels per sample (D·H·W)
	// Counted is the voxels per sample that count (not the ignore label);
	// nil means all Voxels do (no ignore label).
	Counted []float64
}

// IgnoreLossDevice is implemented by a device whose softmax loss ops can
// leave out the voxels of an ignore label (loss.ignore_label), as nnU-Net
// v2's DC_and_CE_loss does: they add nothing to any SegStats sum (so soft
// Dice's sums run over the other voxels only, nnU-Net's loss_mask, and
// cross-entropy is averaged over SegStats.Counted) and get a zero
// gradient. The CPU and CUDA devices implement it; a Criterion with an
// ignore label refuses a device without it rather than train the ignored
// voxels.
type IgnoreLossDevice interface {
	// SoftmaxLossIgnore is SoftmaxLoss with voxels labelled ignore (≥ C)
	// left out of every sum; it fills SegStats.Counted.
	SoftmaxLossIgnore(logits, labels, probs Tensor, ignore int) (SegStats, error)
	// SoftmaxLossBackwardIgnore is SoftmaxLossBackward with dlogits zero
	// at the voxels labelled ignore.
	SoftmaxLossBackwardIgnore(probs, labels Tensor, ceScale, alpha, beta []float32, extra, dlogits Tensor, ignore int)
	// SegCountsIgnore is SegCounts leaving the voxels labelled ignore out
	// of every count (nnU-Net's evaluation's ignore mask).
	SegCountsIgnore(logits, labels Tensor, ignore int) (tp, fp, fn []int64, err error)
}

// MultiLabelLossDevice is implemented by a device that trains multi-label
// sigmoid outputs (model.targets multi_label, loss dice_bce: nnU-Net v2's
// DC_and_BCE_loss). Labels are bit-packed bytes: bit c is set where the
// voxel belongs to class (channel) c, and with ignore the byte 255 marks a
// voxel left out of every sum and given a zero gradient; any other byte
// with a bit ≥ C set is an error naming it. The CPU and CUDA devices
// implement it; a Criterion for multi-label outputs refuses a device
// without it.
type MultiLabelLossDevice interface {
	// SigmoidMultiLabelLoss writes probs = σ(logits) and returns the sums
	// against the labels' bits t, every one per sample and channel
	// ([n·C+c]), so that a class a sample's crop does not annotate can be
	// left out of each (Criterion.SetUnknown): CE is Σ over counted
	// voxels of BCEWithLogits, softplus(z) − t·z; Intersect, PredSum and
	// TargetSum are Σ σ·t, Σ σ and Σ t; Counted[n] the voxels not
	// ignored (per sample).
	SigmoidMultiLabelLoss(logits, labels, probs Tensor, ignore bool) (SegStats, error)
	// SigmoidMultiLabelLossBackward writes dlogits for a loss whose
	// gradient is bceScale[n·C+c] times that of the summed BCE of sample n
	// and channel c (σ − t in the logits) plus, through σ, ∂L/∂p[n,v,c] =
	// alpha[n·C+c]·t + beta[n·C+c]; zero at ignored voxels (and where
	// the three coefficients of (n, c) are zero).
	SigmoidMultiLabelLossBackward(probs, labels Tensor, bceScale, alpha, beta []float32, dlogits Tensor, ignore bool)
	// SegCountsMultiLabel returns TP, FP and FN counts of σ(logits) > 0.5
	// against the labels' bits per sample and channel ([n·C+c]; ignored
	// voxels count in none), nnU-Net's region evaluation; per sample, so
	// that the classes a sample's crop does not annotate can be left out.
	SegCountsMultiLabel(logits, labels Tensor, ignore bool) (tp, fp, fn []int64, err error)
}

// SGDArgs parameterise one SGD update, with PyTorch's semantics
// (dampening 0):
//
//	g   = gradScale·grad + weightDecay·w
//	buf = momentum·buf + g
//	g   = g + momentum·buf   (Nesterov)  or  g = buf
//	w  -= lr·g
type SGDArgs struct {
	LR, Momentum, WeightDecay float32
	Nesterov                  bool
	GradScale                 float32 // multiplies the gradient first (gradient clipping); 1 = none
}

// AdamWArgs parameterise one AdamW update with PyTorch's semantics: Step is
// the 1-based step count used in the bias corrections.
type AdamWArgs struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
	GradScale                          float32 // multiplies the gradient first; 1 = none
}

// Device is a compute device: float32 tensors, streams and events, and the
// coarse ops the U-Net, its losses and optimisers are built from.
//
// Ops run on the compute stream. Shape mismatches are programming errors
// and panic; an op's output tensors must not alias its inputs unless the op
// says so. Ops that return host values (SoftmaxLoss, SigmoidBCE, ChannelDot,
// SumSquares, SegCounts) synchronise the compute stream first. Asynchronous
// failures (a device fault on CUDA) are sticky and reported by Err.
type Device interface {
	// Name describes the device, e.g. "cpu (2 threads)".
	Name() string
	// Err returns the first asynchronous error the device met, if any.
	Err() error

	// Alloc returns a zero-filled tensor of the given shape.
	Alloc(shape Shape) Tensor
	// Free releases a tensor's memory; the tensor must not be used again.
	// Views share the memory of their parent and are not freed.
	Free(t Tensor)
	// View returns a tensor with a different shape of the same length
	// sharing t's memory.
	View(t Tensor, shape Shape) Tensor
	// MemoryInUse returns the bytes of tensor memory allocated now and the
	// peak since the device was created.
	MemoryInUse() (cur, peak int64)

	// ComputeStream returns the stream every op runs on.
	ComputeStream() Stream
	// NewStream returns a new stream (for copies overlapping compute).
	NewStream() Stream
	// Upload copies src into dst on stream s. src must stay untouched
	// until an event recorded on s after the Upload has completed.
	Upload(s Stream, dst Tensor, src []float32) error
	// Download copies src into dst on stream s; dst is valid once an event
	// recorded on s after the Download has completed.
	Download(s Stream, dst []float32, src Tensor) error

	// Fill sets every element of t to v.
	Fill(t Tensor, v float32)
	// Copy copies src into dst (same length).
	Copy(dst, src Tensor)
	// Add computes dst += src (same length).
	Add(dst, src Tensor)
	// Scale computes t *= alpha.
	Scale(t Tensor, alpha float32)
	// NCDHWToNDHWC converts a channels-first tensor to channels-last.
	NCDHWToNDHWC(src, dst Tensor)
	// NDHWCToNCDHW converts a channels-last tensor to channels-first.
	NDHWCToNCDHW(src, dst Tensor)
	// ConcatChannels writes dst = concat(a, b) along the last (channel) axis.
	ConcatChannels(a, b, dst Tensor)
	// SplitChannels is ConcatChannels' adjoint: a and b receive the first
	// and last channels of src.
	SplitChannels(src, a, b Tensor)
	// AddChannelBias adds bias[c] to every element of channel c of t.
	AddChannelBias(t, bias Tensor)
	// ChannelSum writes dst[c] = Σ over all other axes of t[..., c].
	ChannelSum(t, dst Tensor)
	// DownsampleLabels resamples a label map (N, D, H, W) to dst's smaller
	// size by PyTorch's "nearest-exact" rule: src index ⌊(o + ½)·in/out⌋.
	DownsampleLabels(src, dst Tensor)
	// AvgPool writes y (N, D/kD, H/kH, W/kW, C) = the mean of each
	// kD×kH×kW window of x (N, D, H, W, C), the windows at a stride of
	// their size (PyTorch's AvgPool3d(k, k); an axis's remainder is left
	// out): the residual encoder's skip connections. Each window is
	// summed in float32 in (kD, kH, kW) order and divided by its size.
	AvgPool(x, y Tensor, k [3]int)
	// AvgPoolBackward writes dx (x's shape) = AvgPool's input gradient:
	// each window's dy divided by the window's size, 0 in an axis's
	// remainder.
	AvgPoolBackward(dy, dx Tensor, k [3]int)

	// Conv3DForward computes y = conv(x, w) + b; b may be nil. The
	// geometry g gives every tensor's shape (g.InShape, g.WeightShape,
	// g.OutShape; b has g.OutC elements); a g that fails g.Validate is a
	// programming error, as for the other convolution ops.
	Conv3DForward(g geom.Conv, x, w, b, y Tensor)
	// Conv3DBackwardData computes dx = ∂L/∂x from dy (overwrites dx).
	Conv3DBackwardData(g geom.Conv, dy, w, dx Tensor)
	// Conv3DBackwardWeight computes dw and, when db is not nil, db
	// (both overwritten).
	Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db Tensor)

	// InstanceNormActForward normalises x (N, D, H, W, C) per sample and
	// channel, applies the affine gamma, beta (C) and then the activation
	// max(z, slope·z) (slope 1: none, 0: ReLU), writing y. stats (N, C, 2)
	// receives the mean and 1/sqrt(var + eps) (biased variance).
	InstanceNormActForward(x, gamma, beta, y, stats Tensor, eps, slope float32)
	// InstanceNormActBackward computes dx, dgamma and dbeta (overwritten)
	// from dy, given the forward's input x, parameters and stats (the
	// activation's derivative is taken from the sign of the recomputed
	// pre-activation, so the forward's output is not needed). dx may alias dy.
	InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta Tensor, slope float32)
	// ActForward computes y = max(x, slope·x) elementwise (y may alias x).
	ActForward(x, y Tensor, slope float32)
	// ActBackward computes dx = dy where y > 0 and slope·dy where y < 0,
	// from the forward's output y (dx may alias dy). At exactly y = 0 either
	// value may be used (the CPU device takes the sign bit, so −0 gives
	// slope·dy and +0 gives dy).
	ActBackward(y, dy, dx Tensor, slope float32)

	// Softmax writes probs = softmax(logits) over the channel (last) axis.
	Softmax(logits, probs Tensor)
	// SoftmaxLoss computes probs = softmax(logits) over the channel axis and
	// the sums of SegStats against labels (N, D, H, W). A label outside
	// [0, C) is an error naming it.
	SoftmaxLoss(logits, labels, probs Tensor) (SegStats, error)
	// SoftmaxLossBackward writes dlogits for a loss whose gradient with
	// respect to the probabilities is
	//
	//	∂L/∂p[n,v,c] = alpha[n·C+c]·[label = c] + beta[n·C+c] + extra[n,v,c]
	//
	// plus ceScale[n] times the gradient of the summed cross-entropy of
	// sample n (which is p − onehot(label) in the logits). extra may be nil.
	SoftmaxLossBackward(probs, labels Tensor, ceScale, alpha, beta []float32, extra, dlogits Tensor)
	// SigmoidBCE computes, for one-channel logits and binary labels, the
	// per-sample sums of PyTorch's BCEWithLogits(pos_weight) and writes
	// dlogits = gradScale·∂(sum)/∂logits. Labels other than 0 and 1 are an
	// error.
	SigmoidBCE(logits, labels Tensor, posWeight, gradScale float32, dlogits Tensor) ([]float64, error)
	// OneHot writes dst (N, D, H, W, C) = [labels = c].
	OneHot(labels, dst Tensor) error
	// SoftSkeleton computes clDice's soft skeleton (iterated min/max-pool
	// erosion and opening, Shit et al. 2021) of every channel c ≥ fromC of x
	// into skel; channels below fromC are set to zero.
	SoftSkeleton(x, skel Tensor, iters, fromC int)
	// SoftSkeletonBackward adds to dx the gradient of Σ dskel·SoftSkeleton(x)
	// with respect to x (channels ≥ fromC).
	SoftSkeletonBackward(x, dskel, dx Tensor, iters, fromC int)
	// ChannelDot returns Σ over voxels of a·b per sample and channel
	// ([n·C+c]); b may be nil for plain sums.
	ChannelDot(a, b Tensor) []float64
	// ChannelAffineAdd computes dst[n,v,c] += alpha[n·C+c]·a[n,v,c] + beta[n·C+c];
	// a may be nil (then only beta is added); beta may be nil.
	ChannelAffineAdd(dst, a Tensor, alpha, beta []float32)
	// SegCounts returns per-class true positive, false positive and false
	// negative voxel counts of argmax(logits) against labels (a one-channel
	// logit map is thresholded at 0 as classes {0, 1}).
	SegCounts(logits, labels Tensor) (tp, fp, fn []int64, err error)

	// SumSquares returns Σ t² for each tensor.
	SumSquares(ts []Tensor) []float64
	// SGDUpdate applies one SGD step to each w[i] with gradient g[i] and
	// momentum buffer buf[i] (buf is ignored, and may be nil, when
	// a.Momentum is 0): every
	// parameter in one call, so that a GPU updates them all in one launch
	// (PyTorch's multi-tensor apply) rather than one per parameter.
	SGDUpdate(w, g, buf []Tensor, a SGDArgs)
	// AdamWUpdate applies one AdamW step to each w[i] with gradient g[i]
	// and moments m[i], v[i].
	AdamWUpdate(w, g, m, v []Tensor, a AdamWArgs)
}
