// Package gpumon samples a GPU's utilisation, memory, power and temperature
// once a second through NVML, for the progress bar, the log and
// metrics.jsonl. NVML comes from github.com/NVIDIA/go-nvml, which needs cgo,
// so it is compiled only with the `cuda` build tag; the default (pure Go)
// build and machines without the NVIDIA driver get a Monitor that says once
// why there is nothing to show and carries on.
package gpumon

import (
	"sync"
	"time"
)

// Sample is one reading of one GPU.
type Sample struct {
	UtilPct     float64 // GPU busy share over the driver's last sampling period, %
	MemUsedMiB  float64
	MemTotalMiB float64
	PowerW      float64
	TempC       float64
}

// source reads the current sample; nvml.go implements it with NVML.
type source interface {
	read() (Sample, error)
	close()
}

// Monitor samples a source on a goroutine. Its methods are safe for
// concurrent use. A nil *Monitor is valid and reports nothing.
type Monitor struct {
	mu     sync.Mutex
	last   Sample
	have   bool
	sum    Sample
	n      int
	src    source
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// Logf is how the monitor reports problems (once each).
type Logf func(format string, args ...any)

// Start begins sampling GPU device index every interval (1 s when 0). When
// NVML or the driver is missing it logs the reason once through logf and
// returns a Monitor that reports nothing; it never fails.
func Start(device int, interval time.Duration, logf Logf) *Monitor {
	src, err := openNVML(device)
	if err != nil {
		if logf != nil {
			logf("GPU monitoring off: %v", err)
		}
		return &Monitor{}
	}
	return startWith(src, interval, logf)
}

func startWith(src source, interval time.Duration, logf Logf) *Monitor {
	if interval <= 0 {
		interval = time.Second
	}
	m := &Monitor{src: src, stop: make(chan struct{}), done: make(chan struct{})}
	go m.loop(interval, logf)
	return m
}

func (m *Monitor) loop(interval time.Duration, logf Logf) {
	defer close(m.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	warned := false
	sample := func() {
		s, err := m.src.read()
		if err != nil {
			if !warned && logf != nil {
				logf("GPU monitoring: %v (further errors not reported)", err)
			}
			warned = true
			return
		}
		m.mu.Lock()
		m.last, m.have = s, true
		m.sum.UtilPct += s.UtilPct
		m.sum.MemUsedMiB += s.MemUsedMiB
		m.sum.MemTotalMiB += s.MemTotalMiB
		m.sum.PowerW += s.PowerW
		m.sum.TempC += s.TempC
		m.n++
		m.mu.Unlock()
	}
	sample()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			sample()
		}
	}
}

// Latest returns the most recent sample; ok is false when there is none.
func (m *Monitor) Latest() (s Sample, ok bool) {
	if m == nil {
		return Sample{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.have
}

// TakeMean returns the mean of the samples since the previous call (an
// epoch's average) and starts a new period; ok is false when there were none.
func (m *Monitor) TakeMean() (s Sample, ok bool) {
	if m == nil {
		return Sample{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return Sample{}, false
	}
	k := float64(m.n)
	s = Sample{m.sum.UtilPct / k, m.sum.MemUsedMiB / k, m.sum.MemTotalMiB / k, m.sum.PowerW / k, m.sum.TempC / k}
	m.sum, m.n = Sample{}, 0
	return s, true
}

// Available reports whether the monitor is reading a GPU.
func (m *Monitor) Available() bool { return m != nil && m.src != nil }

// Close stops sampling and releases NVML. It is safe to call more than once.
func (m *Monitor) Close() {
	if m == nil || m.src == nil {
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	m.src.close()
}
