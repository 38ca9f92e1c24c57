//go:build cuda

package main

import (
	"fmt"
	"os"

	"github.com/voxtrain/voxtrain/gpu"
)

// cudaBuilt reports whether this binary has the CUDA device.
const cudaBuilt = true

// openCUDA opens GPU spec.ordinal with the precision spec.math and the
// convolutions spec.conv; batch
// buffers come from pinned host memory (asynchronous DMA uploads).
func openCUDA(spec deviceSpec) (*ComputeDevice, error) {
	m, err := gpu.ParseMath(spec.math)
	if err != nil {
		return nil, err
	}
	conv, err := gpu.ParseConv(spec.conv)
	if err != nil {
		return nil, err
	}
	d, err := gpu.New(gpu.Options{Ordinal: spec.ordinal, Math: m, Conv: conv, Deterministic: spec.deterministic})
	if err != nil {
		return nil, err
	}
	// Said once, at start: no cuDNN (and where it was looked for), an
	// unreadable algorithm cache.
	for _, n := range d.Info().Notes {
		fmt.Fprintf(os.Stderr, "note: %s\n", n)
	}
	return &ComputeDevice{Dev: d, Alloc: d.PinnedAllocator(false), Close: d.Close}, nil
}
