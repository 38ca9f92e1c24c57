package main

import (
	"io"
	"os"
	"time"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/nn"
)

// IOStreams are a command's input and outputs.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// ComputeDevice is an opened compute device: the device, the allocator of
// its host batch buffers (pinned memory on CUDA) and how to release it.
type ComputeDevice struct {
	Dev   nn.Device
	Alloc data.Allocator
	Close func() error
}

// Factory is what every command shares and a test replaces: the IO
// streams, how compute devices are opened, the GPU monitor, the version
// and the command line (for the resume hint).
type Factory struct {
	IO *IOStreams
	// OpenDevice opens a --device value (see parseDeviceSpec) with
	// threads CPU goroutines (0: every core).
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)
	// Monitor samples the GPU of a CUDA --device value for the progress
	// display and metrics (nil for the CPU).
	Monitor func(spec string) *gpumon.Monitor
	// Version is printed by --version and stored in checkpoints.
	Version string
	// Args is the command line, program name first.
	Args []string
}

// newFactory is the real process's Factory.
func newFactory() *Factory {
	f := &Factory{IO: &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, OpenDevice: openComputeDevice,
		Version: buildVersion(), Args: os.Args}
	f.Monitor = func(spec string) *gpumon.Monitor {
		d, err := parseDeviceSpec(spec)
		if err != nil || d.kind != "cuda" {
			return nil
		}
		return gpumon.Start(d.ordinal, time.Second, func(format string, a ...any) { fprintf(f.IO.ErrOut, format+"\n", a...) })
	}
	return f
}
