//go:build cuda

package main

import (
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/gpu"
	"github.com/voxtrain/voxtrain/nn"
)

// cudaBuilt reports whether this binary has the CUDA device.
const cudaBuilt = true

// openCUDA opens GPU spec.ordinal with the GEMM precision spec.math.
func openCUDA(spec deviceSpec) (nn.Device, func() error, error) {
	m, err := gpu.ParseMath(spec.math)
	if err != nil {
		return nil, nil, err
	}
	d, err := gpu.New(gpu.Options{Ordinal: spec.ordinal, Math: m})
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

// hostAllocator returns the allocator of batch buffers for dev: pinned
// host memory for the CUDA device (asynchronous DMA uploads), aligned Go
// memory otherwise.
func hostAllocator(dev nn.Device) data.Allocator {
	if g, ok := dev.(*gpu.Device); ok {
		return g.PinnedAllocator(false)
	}
	return data.AlignedAllocator{}
}
