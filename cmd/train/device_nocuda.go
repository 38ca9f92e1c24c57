//go:build !cuda

package main

import (
	"errors"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nn"
)

// cudaBuilt reports whether this binary has the CUDA device.
const cudaBuilt = false

// errNoCUDA is the error for --device cuda in the default (pure Go) build.
var errNoCUDA = errors.New("this train binary was built without CUDA support; build with -tags cuda (see docs/GPU.md)")

func openCUDA(deviceSpec) (nn.Device, func() error, error) { return nil, nil, errNoCUDA }

// hostAllocator returns the allocator of batch buffers for dev: aligned Go
// memory (there is no pinned memory without CUDA).
func hostAllocator(nn.Device) data.Allocator { return data.AlignedAllocator{} }
