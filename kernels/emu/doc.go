// Package emu runs voxtrain's CUDA kernels on the host, so that CI checks
// every kernel against the CPU device without a GPU or a CUDA toolkit.
//
// The .cc files of this package compile the very .cu sources of package
// kernels with g++ (C++20), after cuda_emu.h: a launch runs the grid's
// blocks one after another, each CUDA thread of a block is a fiber on the
// launching OS thread (fiber.cc), __syncthreads is a barrier across them
// (which also reports threads that reach different barriers, and alternates
// the order threads run in so a missing barrier shows), __shared__ is static
// storage and atomics are std::atomic_ref. Launcher implements
// kernels.Launcher over buffers in C memory (Buffer), so the launch recipes
// of kernels.Ops — the exact launch sequences package gpu runs — are what
// the tests exercise.
//
// Buffers start filled with 0xFF bytes (NaN as float32 and float64), as
// uninitialised device memory would be garbage, and carry guard bytes on
// both sides that each launch checks: a kernel that reads memory it did not
// initialise produces NaNs, one that writes past a buffer fails the launch.
//
// The package needs cgo and g++; built with CGO_ENABLED=0 it is empty (this
// file only) and its tests are skipped by the build constraint.
package emu
