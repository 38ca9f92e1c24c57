package cpu

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/optiming"
	"github.com/voxtrain/voxtrain/nn"
)

// BenchmarkUNetStep times what `train bench-step` times: one training step
// of the reference U-Net of bench/torch_unet_step.py (forward, CE + soft
// Dice, backward, SGD) on synthetic input, at its two sizes. Pin the
// threads with -cpu (GOMAXPROCS), e.g.
//
//	go test ./cpu -run '^$' -bench UNetStep -cpu 2 -benchtime 5x
func BenchmarkUNetStep(b *testing.B) {
	for _, c := range []struct{ batch, side int }{{2, 64}, {1, 96}} {
		b.Run(fmt.Sprintf("%dx%d", c.batch, c.side), func(b *testing.B) {
			dev := New(Options{})
			r, err := nn.BenchStep(dev, config.Default().Model, nn.BenchOptions{
				Batch: c.batch, Patch: [3]int{c.side, c.side, c.side}, Steps: b.N, Warmup: 1})
			if err != nil {
				b.Fatal(err)
			}
			var total float64
			for _, t := range r.StepTimes {
				total += t.Seconds()
			}
			// Report the median like the command; ns/op is the mean
			// (and includes the warm-up step's share of setup).
			b.ReportMetric(float64(r.Median.Milliseconds()), "ms/step")
			b.ReportMetric(r.GFLOPS, "GFLOP/s")
			b.ReportMetric(float64(r.PeakDevice)/(1<<20), "MiB")
		})
	}
}

// BenchmarkUNetStepOps is BenchmarkUNetStep at 2×64³ with the time split
// by op group (ms per step).
func BenchmarkUNetStepOps(b *testing.B) {
	times := map[string]time.Duration{}
	// The CPU device's ops are synchronous: wall time is the op's time.
	dev := &optiming.Device{Device: New(Options{}), Span: func(group string) func() {
		t0 := time.Now()
		return func() { times[group] += time.Since(t0) }
	}}
	warm := 1
	var total time.Duration
	_, err := nn.BenchStep(dev, config.Default().Model, nn.BenchOptions{Batch: 2, Patch: [3]int{64, 64, 64}, Steps: b.N, Warmup: warm,
		Progress: func(s int, w bool, d time.Duration, _ float64) {
			if s == warm-1 {
				clear(times) // drop the warm-up step
			}
			if !w {
				total += d
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	var ops time.Duration
	for name, t := range times {
		b.ReportMetric(float64(t.Milliseconds())/float64(b.N), strings.NewReplacer(" ", "_", "/", "+").Replace(name)+"-ms/step")
		ops += t
	}
	b.ReportMetric(float64((total-ops).Milliseconds())/float64(b.N), "other-ms/step")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "total-ms/step")
}
