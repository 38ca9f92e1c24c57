//go:build unix

package kern

import "syscall"

// cpuSeconds is the process's user+system CPU time. Benchmarks divide work by
// it (not by wall time) for a per-core rate that other processes on a shared
// machine disturb less.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
