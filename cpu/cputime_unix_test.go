//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time: on a shared
// machine, CPU time per op is a steadier measure than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
