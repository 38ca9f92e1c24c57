package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/data"
)

// deviceSpec is a parsed --device value:
//
//	cpu                    the CPU device
//	cuda, cuda:N           GPU N (default 0) of CUDA_VISIBLE_DEVICES ("gpu" is an alias)
//	cuda:N,tf32            ... with TF32 tensor-core GEMMs (",fp32", the default, without)
//	cuda:N,bf16            ... with bf16 mixed-precision convolutions
type deviceSpec struct {
	kind    string // "cpu" or "cuda"
	ordinal int
	math    string // "fp32", "tf32" or "bf16" (cuda)
}

// parseDeviceSpec parses a --device value.
func parseDeviceSpec(s string) (deviceSpec, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "cpu" {
		return deviceSpec{kind: "cpu"}, nil
	}
	spec := deviceSpec{kind: "cuda", math: "fp32"}
	name, opts, _ := strings.Cut(s, ",")
	if opts != "" {
		switch opts {
		case "fp32", "tf32", "bf16":
			spec.math = opts
		default:
			return deviceSpec{}, fmt.Errorf("--device %q: option %q, want fp32, tf32 or bf16", orig, opts)
		}
	}
	kind, ord, hasOrd := strings.Cut(name, ":")
	if kind != "cuda" && kind != "gpu" {
		return deviceSpec{}, fmt.Errorf("--device %q: want cpu, cuda, cuda:N or cuda:N,tf32|bf16", orig)
	}
	if hasOrd {
		n, err := strconv.Atoi(ord)
		if err != nil || n < 0 {
			return deviceSpec{}, fmt.Errorf("--device %q: GPU index %q, want a number >= 0", orig, ord)
		}
		spec.ordinal = n
	}
	return spec, nil
}

// openComputeDevice opens the compute device named by a --device value.
// threads is the CPU device's goroutines (0: GOMAXPROCS). In a binary
// built without the cuda tag, a CUDA device is an error that says how to
// build one.
func openComputeDevice(name string, threads int) (*ComputeDevice, error) {
	spec, err := parseDeviceSpec(name)
	if err != nil {
		return nil, err
	}
	if spec.kind == "cpu" {
		return &ComputeDevice{Dev: cpu.New(cpu.Options{Threads: threads}), Alloc: data.AlignedAllocator{},
			Close: func() error { return nil }}, nil
	}
	return openCUDA(spec)
}
