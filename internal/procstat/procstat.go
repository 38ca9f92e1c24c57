// Package procstat reads the running process's resource use: its CPU time
// (user + system) and its peak resident set. Benchmarks and `train
// bench-*` report them; on a shared machine CPU time per operation is a
// steadier measure than wall time.
package procstat

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the process's peak resident set in bytes (VmHWM of
// /proc/self/status), or 0 where the file does not exist.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) >= 1 {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return kb << 10
			}
		}
		return 0
	}
	return 0
}

// ResetPeakRSS starts a new peak-RSS period where Linux allows it (writing
// 5 to /proc/self/clear_refs); elsewhere it does nothing and PeakRSS keeps
// reporting the process's whole-life peak.
func ResetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
