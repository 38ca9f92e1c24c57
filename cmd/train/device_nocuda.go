//go:build !cuda

package main

import "errors"

// cudaBuilt reports whether this binary has the CUDA device.
const cudaBuilt = false

// errNoCUDA is the error for --device cuda in the default (pure Go) build.
var errNoCUDA = errors.New("this train binary was built without CUDA support; build with -tags cuda (see docs/GPU.md)")

func openCUDA(deviceSpec) (*ComputeDevice, error) { return nil, errNoCUDA }
