// Package optiming splits a training step's time between op groups: it
// wraps an nn.Device so that each of the heavy ops runs inside a span the
// caller times — with the wall clock on the CPU device, whose ops are
// synchronous, or with timing events on a GPU's compute stream. The step
// benchmarks of package cpu and package gpu use it.
package optiming

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

// Device is an nn.Device whose convolution, normalisation, concatenation,
// bias, loss and optimiser ops each run inside Span(group); every other op
// goes straight to the wrapped device, and so do the optional interfaces
// that change how nn uses a device (forward.go): narrow activation and
// gradient storage, free memory, peak memory, the convolutions' timing
// before a workspace is allocated. The loss devices for an
// ignore label and multi-label outputs are not forwarded: a step timed
// through Device uses the softmax loss (a Criterion needing them refuses
// the device with an error).
type Device struct {
	nn.Device
	// Span is called as an op starts, with the op's group ("conv forward",
	// "norm+act backward", ...), and returns the function called as it
	// ends.
	Span func(group string) (end func())
	// ByShape appends the shape of the op's main tensor to the group
	// ("norm+act forward 2×128×128×128×32"), so that a step's time splits
	// by op and U-Net level: the memory-bound ops' time per level shows
	// the bandwidth they reach, the convolutions' which level's algorithm
	// is slow.
	ByShape bool
}

// span opens a span for group, with t's shape when ByShape.
func (d *Device) span(group string, t nn.Tensor) func() {
	if d.ByShape && t != nil {
		group += " " + ShapeString(t.Shape())
	}
	return d.Span(group)
}

// convSpan opens a span for a convolution's group, with its geometry
// when ByShape: "conv forward 2×128×128×128×32→32 k3×3×3 s1×1×1" (input
// shape → output channels, kernel, stride).
func (d *Device) convSpan(group string, g geom.Conv) func() {
	if d.ByShape {
		group += fmt.Sprintf(" %s→%d k%d×%d×%d s%d×%d×%d", ShapeString(g.InShape()), g.OutC, g.KD, g.KH, g.KW, g.SD, g.SH, g.SW)
	}
	return d.Span(group)
}

// ShapeString writes a shape as "2×128×128×128×32".
func ShapeString(s nn.Shape) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, "×")
}

// Op groups.
const (
	ConvForward    = "conv forward"
	ConvBackData   = "conv backward data"
	ConvBackWeight = "conv backward weight"
	NormForward    = "norm+act forward"
	NormBackward   = "norm+act backward"
	Concat         = "concat/split/add"
	Bias           = "bias (transposed conv)"
	Loss           = "softmax + loss"
	Optimiser      = "optimiser"
)

// Conv3DForward runs the wrapped device's Conv3DForward in a span.
func (d *Device) Conv3DForward(g geom.Conv, x, w, b, y nn.Tensor) {
	defer d.convSpan(ConvForward, g)()
	d.Device.Conv3DForward(g, x, w, b, y)
}

// Conv3DBackwardData runs the wrapped device's Conv3DBackwardData in a span.
func (d *Device) Conv3DBackwardData(g geom.Conv, dy, w, dx nn.Tensor) {
	defer d.convSpan(ConvBackData, g)()
	d.Device.Conv3DBackwardData(g, dy, w, dx)
}

// Conv3DBackwardWeight runs the wrapped device's Conv3DBackwardWeight in a span.
func (d *Device) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db nn.Tensor) {
	defer d.convSpan(ConvBackWeight, g)()
	d.Device.Conv3DBackwardWeight(g, x, dy, dw, db)
}

// InstanceNormActForward runs the wrapped device's InstanceNormActForward in a span.
func (d *Device) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	defer d.span(NormForward, x)()
	d.Device.InstanceNormActForward(x, gamma, beta, y, stats, eps, slope)
}

// InstanceNormActBackward runs the wrapped device's InstanceNormActBackward in a span.
func (d *Device) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	defer d.span(NormBackward, x)()
	d.Device.InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, slope)
}

// ConcatChannels runs the wrapped device's ConcatChannels in a span.
func (d *Device) ConcatChannels(a, b, dst nn.Tensor) {
	defer d.span(Concat, dst)()
	d.Device.ConcatChannels(a, b, dst)
}

// SplitChannels runs the wrapped device's SplitChannels in a span.
func (d *Device) SplitChannels(src, a, b nn.Tensor) {
	defer d.span(Concat, src)()
	d.Device.SplitChannels(src, a, b)
}

// Add runs the wrapped device's Add in a span.
func (d *Device) Add(dst, src nn.Tensor) {
	defer d.span(Concat, dst)()
	d.Device.Add(dst, src)
}

// AddChannelBias runs the wrapped device's AddChannelBias in a span.
func (d *Device) AddChannelBias(t, b nn.Tensor) {
	defer d.span(Bias, t)()
	d.Device.AddChannelBias(t, b)
}

// ChannelSum runs the wrapped device's ChannelSum in a span.
func (d *Device) ChannelSum(t, dst nn.Tensor) {
	defer d.span(Bias, t)()
	d.Device.ChannelSum(t, dst)
}

// SoftmaxLoss runs the wrapped device's SoftmaxLoss in a span.
func (d *Device) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	defer d.span(Loss, logits)()
	return d.Device.SoftmaxLoss(logits, labels, probs)
}

// SoftmaxLossBackward runs the wrapped device's SoftmaxLossBackward in a span.
func (d *Device) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	defer d.span(Loss, dlogits)()
	d.Device.SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits)
}

// SGDUpdate runs the wrapped device's SGDUpdate in a span.
func (d *Device) SGDUpdate(w, g, buf []nn.Tensor, a nn.SGDArgs) {
	defer d.span(Optimiser, nil)()
	d.Device.SGDUpdate(w, g, buf, a)
}

// SumSquares runs the wrapped device's SumSquares in a span.
func (d *Device) SumSquares(ts []nn.Tensor) []float64 {
	defer d.span(Optimiser, nil)()
	return d.Device.SumSquares(ts)
}

// MinimalTraffic returns the bytes one call of a memory-bound op must
// move at least, given its span name with a shape ("norm+act forward
// 2×128×128×128×32", as ByShape names it) and the element sizes of its
// activations and of their gradients (ActivationBytes,
// ActivationGradientBytes): each tensor read or written once per pass of
// its kernels. norm+act forward reads x twice (statistics, then apply)
// and writes y; backward reads x and dy twice and writes dx. 0 for other
// groups and names without a shape.
func MinimalTraffic(name string, actBytes, gradBytes int) int64 {
	passes := map[string]int64{NormForward: 3 * int64(actBytes), NormBackward: 2*int64(actBytes) + 3*int64(gradBytes)}
	for group, bytesPerElem := range passes {
		rest, ok := strings.CutPrefix(name, group+" ")
		if !ok {
			continue
		}
		elems := int64(1)
		for _, f := range strings.Split(rest, "×") {
			v, err := strconv.Atoi(f)
			if err != nil || v <= 0 {
				return 0
			}
			elems *= int64(v)
		}
		return elems * bytesPerElem
	}
	return 0
}
