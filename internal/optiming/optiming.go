// Package optiming splits a training step's time between op groups: it
// wraps an nn.Device so that each of the heavy ops runs inside a span the
// caller times — with the wall clock on the CPU device, whose ops are
// synchronous, or with timing events on a GPU's compute stream. The step
// benchmarks of package cpu and package gpu use it.
package optiming

import (
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

// Device is an nn.Device whose convolution, normalisation, concatenation,
// bias, loss and optimiser ops each run inside Span(group); every other op
// goes straight to the wrapped device.
type Device struct {
	nn.Device
	// Span is called as an op starts, with the op's group ("conv forward",
	// "norm+act backward", ...), and returns the function called as it
	// ends.
	Span func(group string) (end func())
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
	defer d.Span(ConvForward)()
	d.Device.Conv3DForward(g, x, w, b, y)
}

// Conv3DBackwardData runs the wrapped device's Conv3DBackwardData in a span.
func (d *Device) Conv3DBackwardData(g geom.Conv, dy, w, dx nn.Tensor) {
	defer d.Span(ConvBackData)()
	d.Device.Conv3DBackwardData(g, dy, w, dx)
}

// Conv3DBackwardWeight runs the wrapped device's Conv3DBackwardWeight in a span.
func (d *Device) Conv3DBackwardWeight(g geom.Conv, x, dy, dw, db nn.Tensor) {
	defer d.Span(ConvBackWeight)()
	d.Device.Conv3DBackwardWeight(g, x, dy, dw, db)
}

// InstanceNormActForward runs the wrapped device's InstanceNormActForward in a span.
func (d *Device) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	defer d.Span(NormForward)()
	d.Device.InstanceNormActForward(x, gamma, beta, y, stats, eps, slope)
}

// InstanceNormActBackward runs the wrapped device's InstanceNormActBackward in a span.
func (d *Device) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	defer d.Span(NormBackward)()
	d.Device.InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, slope)
}

// ConcatChannels runs the wrapped device's ConcatChannels in a span.
func (d *Device) ConcatChannels(a, b, dst nn.Tensor) {
	defer d.Span(Concat)()
	d.Device.ConcatChannels(a, b, dst)
}

// SplitChannels runs the wrapped device's SplitChannels in a span.
func (d *Device) SplitChannels(src, a, b nn.Tensor) {
	defer d.Span(Concat)()
	d.Device.SplitChannels(src, a, b)
}

// Add runs the wrapped device's Add in a span.
func (d *Device) Add(dst, src nn.Tensor) {
	defer d.Span(Concat)()
	d.Device.Add(dst, src)
}

// AddChannelBias runs the wrapped device's AddChannelBias in a span.
func (d *Device) AddChannelBias(t, b nn.Tensor) {
	defer d.Span(Bias)()
	d.Device.AddChannelBias(t, b)
}

// ChannelSum runs the wrapped device's ChannelSum in a span.
func (d *Device) ChannelSum(t, dst nn.Tensor) {
	defer d.Span(Bias)()
	d.Device.ChannelSum(t, dst)
}

// SoftmaxLoss runs the wrapped device's SoftmaxLoss in a span.
func (d *Device) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	defer d.Span(Loss)()
	return d.Device.SoftmaxLoss(logits, labels, probs)
}

// SoftmaxLossBackward runs the wrapped device's SoftmaxLossBackward in a span.
func (d *Device) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	defer d.Span(Loss)()
	d.Device.SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits)
}

// SGDUpdate runs the wrapped device's SGDUpdate in a span.
func (d *Device) SGDUpdate(w, g, buf nn.Tensor, a nn.SGDArgs) {
	defer d.Span(Optimiser)()
	d.Device.SGDUpdate(w, g, buf, a)
}

// SumSquares runs the wrapped device's SumSquares in a span.
func (d *Device) SumSquares(ts []nn.Tensor) []float64 {
	defer d.Span(Optimiser)()
	return d.Device.SumSquares(ts)
}
