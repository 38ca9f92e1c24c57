//go:build unix

package procstat

import (
	"syscall"
	"time"
)

// CPUTime returns the process's user + system CPU time (0 if unknown).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
