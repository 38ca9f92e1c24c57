//go:build cuda

package main

import "github.com/voxtrain/voxtrain/gpu"

// cudaBuilt reports whether this binary has the CUDA device.
const cudaBuilt = true

// openCUDA opens GPU spec.ordinal with the GEMM precision spec.math; batch
// buffers come from pinned host memory (asynchronous DMA uploads).
func openCUDA(spec deviceSpec) (*ComputeDevice, error) {
	m, err := gpu.ParseMath(spec.math)
	if err != nil {
		return nil, err
	}
	d, err := gpu.New(gpu.Options{Ordinal: spec.ordinal, Math: m})
	if err != nil {
		return nil, err
	}
	return &ComputeDevice{Dev: d, Alloc: d.PinnedAllocator(false), Close: d.Close}, nil
}
