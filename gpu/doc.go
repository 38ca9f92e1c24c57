// Package gpu implements nn.Device on an NVIDIA GPU with CUDA, through
// gorgonia.org/cu (the driver API) and cuBLAS opened with dlopen at run
// time. Everything but this file is built only with the `cuda` build tag:
//
//	CGO_LDFLAGS=-L/usr/local/cuda/lib64/stubs go build -tags cuda ./cmd/train
//
// gorgonia.org/cu calls cuInit in its package init and exits the process
// when there is no GPU or no driver, so no binary that imports it can even
// start on an ordinary machine; the default build leaves this package
// empty and stays pure Go (CGO_ENABLED=0). docs/GPU.md explains how to
// build, run and test the CUDA device.
//
// # Shape of the device
//
//   - One CUDA context (the device's primary context) served by one
//     goroutine locked to its OS thread: every driver and cuBLAS call is a
//     closure run there, in the order it was issued. Work that returns
//     nothing (launches, GEMMs, async copies, event records) is queued
//     without waiting, so the host runs ahead of the GPU as it should;
//     calls that return a value (an allocation, an event query, a download
//     of loss sums) wait for their closure.
//   - A compute stream that every op runs on, and streams from NewStream
//     for copies (all non-blocking with respect to the legacy NULL stream).
//   - Every op of nn.Device: the elementwise, norm, loss and optimiser ops
//     are the launch sequences of package kernels (kernels.Ops) on the PTX
//     embedded there; convolutions are tiled vol2col + cuBLAS SGEMM
//     (+ col2vol for the data gradient) with a bounded workspace. This
//     logic lives in gpu/internal/core, generic over the machine below, so
//     `make test` runs it over the host emulation of the kernels and checks
//     it against package cpu without a GPU.
//   - Device memory from cuMemAlloc behind a caching allocator; pinned
//     host memory from cuMemHostAlloc (PinnedAllocator) for the batch ring
//     of package data, so uploads are true asynchronous DMA.
//   - Determinism: no kernel sums with atomics on floats, and cuBLAS runs on
//     one handle bound to one stream with atomics disallowed, so a run
//     repeats itself bit for bit on the same GPU model and software; it
//     matches the CPU device within the tolerances of gpu/internal/devcheck.
package gpu
