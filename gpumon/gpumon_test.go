package gpumon

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

type fakeSource struct {
	mu     sync.Mutex
	n      int
	fail   bool
	closed bool
}

func (f *fakeSource) read() (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return Sample{}, errors.New("GPU is lost")
	}
	f.n++
	return Sample{UtilPct: float64(f.n), MemUsedMiB: 100, MemTotalMiB: 1000, PowerW: 250, TempC: 60}, nil
}

func (f *fakeSource) close() { f.mu.Lock(); f.closed = true; f.mu.Unlock() }

func TestMonitorAveragesAndCloses(t *testing.T) {
	src := &fakeSource{}
	m := startWith(src, time.Millisecond, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, ok := m.Latest(); ok && s.UtilPct >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no samples")
		}
		time.Sleep(time.Millisecond)
	}
	mean, ok := m.TakeMean()
	if !ok || mean.MemTotalMiB != 1000 || mean.UtilPct < 1 {
		t.Fatalf("mean %+v ok %v", mean, ok)
	}
	m.Close()
	m.Close()
	if !src.closed {
		t.Fatal("source not closed")
	}
}

func TestMonitorReportsErrorsOnce(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	m := startWith(&fakeSource{fail: true}, time.Millisecond, logf)
	time.Sleep(30 * time.Millisecond)
	m.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 {
		t.Fatalf("logged %d times: %v", len(logs), logs)
	}
	if _, ok := m.Latest(); ok {
		t.Fatal("a failing source produced a sample")
	}
}

// TestStartWithoutGPU runs where this build or this machine has no NVML:
// Start must say why once and return a usable monitor.
func TestStartWithoutGPU(t *testing.T) {
	var logs []string
	m := Start(0, time.Second, func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) })
	defer m.Close()
	if m.Available() {
		t.Skip("a GPU with NVML is present")
	}
	if len(logs) != 1 {
		t.Fatalf("logs %v", logs)
	}
	if _, ok := m.TakeMean(); ok {
		t.Fatal("mean without a GPU")
	}
	t.Logf("reported: %s", logs[0])
	var nilM *Monitor
	if _, ok := nilM.Latest(); ok || nilM.Available() {
		t.Fatal("nil monitor")
	}
	nilM.Close()
}
