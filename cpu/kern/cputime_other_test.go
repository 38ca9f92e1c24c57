//go:build !unix

package kern

// cpuSeconds is unavailable here; benchmarks then skip the per-core metric.
func cpuSeconds() float64 { return 0 }
