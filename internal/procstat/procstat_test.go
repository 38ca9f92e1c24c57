package procstat

import (
	"runtime"
	"testing"
	"time"
)

func TestCPUTimeAdvances(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads getrusage and /proc")
	}
	t0 := CPUTime()
	deadline := time.Now().Add(50 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	if d := CPUTime() - t0; d <= 0 {
		t.Fatalf("CPU time did not advance over 50 ms of spinning (%d loops): %v", x, d)
	}
}

func TestPeakRSSGrows(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	before := PeakRSS()
	if before <= 0 {
		t.Fatalf("PeakRSS = %d, want > 0", before)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = byte(i)
	}
	after := PeakRSS()
	runtime.KeepAlive(b)
	if after < before+32<<20 {
		t.Fatalf("PeakRSS after touching 64 MiB = %d, before %d: want at least 32 MiB more", after, before)
	}
}
