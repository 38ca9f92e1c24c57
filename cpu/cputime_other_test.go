//go:build !unix

package cpu

import "time"

// processCPU is not available here; benchmarks report 0.
func processCPU() time.Duration { return 0 }
