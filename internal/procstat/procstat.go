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

// MemAvailable returns the memory the machine can give a new allocation
// without swapping (MemAvailable of /proc/meminfo, capped by the cgroup's
// memory.max when a container sets one), and false where neither can be
// read.
func MemAvailable() (int64, bool) {
	avail, ok := meminfoField("/proc/meminfo", "MemAvailable:")
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			used := int64(0)
			if c, err := os.ReadFile("/sys/fs/cgroup/memory.current"); err == nil {
				used, _ = strconv.ParseInt(strings.TrimSpace(string(c)), 10, 64)
			}
			if room := limit - used; !ok || room < avail {
				avail, ok = max(room, 0), true
			}
		}
	}
	return avail, ok
}

// meminfoField reads one "Name:  N kB" line of a /proc file, in bytes.
func meminfoField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) >= 1 {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return kb << 10, true
			}
		}
		return 0, false
	}
	return 0, false
}

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
