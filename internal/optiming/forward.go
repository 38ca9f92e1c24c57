package optiming

import "github.com/voxtrain/voxtrain/nn"

// The optional interfaces of nn.Device that change what nn does with a
// device. Embedding the wrapped device as an nn.Device hides them, and nn
// would then silently take another path — a GPU in bf16 mode timed with
// float32 activations, as the GPU's op benchmark was until 2026-11-27 —
// so Device forwards each, answering as a device without it where the
// wrapped one lacks it.

// ActivationBytes forwards nn.ActivationAllocator: the wrapped device's
// activation element size, or 4 (float32) where it stores none narrower.
func (d *Device) ActivationBytes() int {
	if a, ok := d.Device.(nn.ActivationAllocator); ok {
		return a.ActivationBytes()
	}
	return 4
}

// AllocActivation forwards nn.ActivationAllocator (Alloc where the wrapped
// device lacks it).
func (d *Device) AllocActivation(shape nn.Shape) nn.Tensor {
	if a, ok := d.Device.(nn.ActivationAllocator); ok {
		return a.AllocActivation(shape)
	}
	return d.Device.Alloc(shape)
}

// ActivationGradientBytes forwards nn.ActivationGradientAllocator: the
// wrapped device's activation-gradient element size, or 4.
func (d *Device) ActivationGradientBytes() int {
	if a, ok := d.Device.(nn.ActivationGradientAllocator); ok {
		return a.ActivationGradientBytes()
	}
	return 4
}

// AllocActivationGradient forwards nn.ActivationGradientAllocator (Alloc
// where the wrapped device lacks it).
func (d *Device) AllocActivationGradient(shape nn.Shape) nn.Tensor {
	if a, ok := d.Device.(nn.ActivationGradientAllocator); ok {
		return a.AllocActivationGradient(shape)
	}
	return d.Device.Alloc(shape)
}

// MemoryAvailable forwards nn.MemoryReporter (ok false where the wrapped
// device cannot tell).
func (d *Device) MemoryAvailable() (bytes int64, ok bool) {
	if m, ok := d.Device.(nn.MemoryReporter); ok {
		return m.MemoryAvailable()
	}
	return 0, false
}

// PeakAllocated forwards the peak of all device memory that nn.BenchStep
// reports (0 where the wrapped device does not count it).
func (d *Device) PeakAllocated() int64 {
	if p, ok := d.Device.(interface{ PeakAllocated() int64 }); ok {
		return p.PeakAllocated()
	}
	return 0
}

// PrepareConvs forwards nn.ConvPreparer (nothing to prepare where the
// wrapped device lacks it), so that a timed step does not time cuDNN's
// algorithms inside the step.
func (d *Device) PrepareConvs(passes []nn.ConvPass) error {
	if p, ok := d.Device.(nn.ConvPreparer); ok {
		return p.PrepareConvs(passes)
	}
	return nil
}
