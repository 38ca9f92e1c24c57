package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/data"
)

// deviceSpec is a parsed --device value: a device, then options after
// commas in any order.
//
//	cpu                    the CPU device
//	cuda, cuda:N           GPU N (default 0) of CUDA_VISIBLE_DEVICES ("gpu" is an alias)
//	,fp32 ,tf32 ,bf16      the convolutions' precision: float32 (default), TF32
//	                       tensor cores, bf16 mixed precision
//	,cudnn ,own            convolutions by cuDNN (an error without it) or by
//	                       voxtrain's own kernels; default: cuDNN where found
//	,deterministic         only cuDNN algorithms that give the same bits run
//	                       after run (exact resume on a GPU)
type deviceSpec struct {
	kind          string // "cpu" or "cuda"
	ordinal       int
	math          string // "fp32", "tf32" or "bf16" (cuda)
	conv          string // "auto", "cudnn" or "own" (cuda)
	deterministic bool
}

// deviceHelp is the --device flags' help.
const deviceHelp = "cpu, or cuda[:N] with options after commas: fp32|tf32|bf16, cudnn|own, deterministic (cuda:0,bf16,cudnn)"

// parseDeviceSpec parses a --device value.
func parseDeviceSpec(s string) (deviceSpec, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "cpu" {
		return deviceSpec{kind: "cpu"}, nil
	}
	spec := deviceSpec{kind: "cuda", math: "fp32", conv: "auto"}
	parts := strings.Split(s, ",")
	name := parts[0]
	seen := map[string]string{}
	for _, opt := range parts[1:] {
		opt = strings.TrimSpace(opt)
		var group string
		switch opt {
		case "fp32", "tf32", "bf16":
			group, spec.math = "precision", opt
		case "cudnn", "own":
			group, spec.conv = "convolutions", opt
		case "deterministic":
			group, spec.deterministic = "deterministic", true
		default:
			return deviceSpec{}, fmt.Errorf("--device %q: option %q, want fp32, tf32 or bf16; cudnn or own; deterministic", orig, opt)
		}
		if prev, ok := seen[group]; ok {
			return deviceSpec{}, fmt.Errorf("--device %q: %s given twice (%s, %s)", orig, group, prev, opt)
		}
		seen[group] = opt
	}
	kind, ord, hasOrd := strings.Cut(name, ":")
	if kind != "cuda" && kind != "gpu" {
		return deviceSpec{}, fmt.Errorf("--device %q: want cpu, or cuda[:N] with options (cuda:0,bf16)", orig)
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
