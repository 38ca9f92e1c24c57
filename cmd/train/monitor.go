package main

import (
	"fmt"
	"io"
	"time"

	"github.com/voxtrain/voxtrain/gpumon"
)

// startMonitor samples the GPU for the progress display and metrics when
// the run is on CUDA; nil otherwise.
func startMonitor(device string, errw io.Writer) *gpumon.Monitor {
	spec, err := parseDeviceSpec(device)
	if err != nil || spec.kind != "cuda" {
		return nil
	}
	return gpumon.Start(spec.ordinal, time.Second, func(format string, a ...any) { fmt.Fprintf(errw, format+"\n", a...) })
}
