//go:build cuda

package gpu_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/gpu"
	"github.com/voxtrain/voxtrain/internal/optiming"
	"github.com/voxtrain/voxtrain/nn"
)

// opTimes times op groups on the GPU's clock: a timing event is recorded
// on the compute stream before and after each op optiming.Device wraps
// (every op runs on that stream), and the pairs are read after each step.
// The events cost a few microseconds each, so the groups add up to a
// little more than the plain step time.
type opTimes struct {
	dev     *gpu.Device
	pending []timedOp
	t       map[string]time.Duration
}

type timedOp struct {
	name       string
	start, end nn.Event
}

func (o *opTimes) span(group string) func() {
	cs := o.dev.ComputeStream()
	start := o.dev.RecordTimed(cs)
	return func() { o.pending = append(o.pending, timedOp{group, start, o.dev.RecordTimed(cs)}) }
}

// collect adds the pending pairs' GPU times to the totals.
func (o *opTimes) collect() error {
	if len(o.pending) == 0 {
		return nil
	}
	o.pending[len(o.pending)-1].end.Synchronize()
	for _, p := range o.pending {
		e, err := o.dev.Elapsed(p.start, p.end)
		if err != nil {
			return err
		}
		o.t[p.name] += e
	}
	o.pending = o.pending[:0]
	return nil
}

// BenchmarkUNetStepOps is BenchmarkUNetStep with the GPU time of each step
// split by op group (ms per step, on the GPU's clock), to show where a
// step's time goes: the convolutions' vol2col + GEMM, or the memory-bound
// norm, activation and copy kernels.
func BenchmarkUNetStepOps(b *testing.B) {
	for _, m := range []gpu.Math{gpu.MathFP32, gpu.MathTF32, gpu.MathBF16} {
		base := dev
		if m != gpu.MathFP32 {
			base = open(b, gpu.Options{Math: m})
		}
		for _, sc := range stepConfigs {
			b.Run(fmt.Sprintf("%s/%s", sc.name, m), func(b *testing.B) {
				ot := &opTimes{dev: base, t: map[string]time.Duration{}}
				d := &optiming.Device{Device: base, Span: ot.span}
				const warm = 2
				var total time.Duration
				var cerr error
				r, err := nn.BenchStep(d, sc.cfg, nn.BenchOptions{Batch: sc.batch, Patch: sc.patch, Steps: max(b.N, 3), Warmup: warm, Seed: 1,
					Progress: func(s int, w bool, dt time.Duration, _ float64) {
						if err := ot.collect(); err != nil && cerr == nil {
							cerr = err
						}
						if s == warm-1 {
							clear(ot.t) // drop the warm-up steps
						}
						if !w {
							total += dt
						}
					}})
				if err != nil {
					b.Fatal(err)
				}
				if cerr != nil {
					b.Fatal(cerr)
				}
				steps := float64(len(r.StepTimes))
				names := make([]string, 0, len(ot.t))
				var ops time.Duration
				for name, t := range ot.t {
					names = append(names, name)
					ops += t
				}
				sort.Slice(names, func(i, j int) bool { return ot.t[names[i]] > ot.t[names[j]] })
				var parts []string
				for _, name := range names {
					ms := ot.t[name].Seconds() * 1e3 / steps
					b.ReportMetric(ms, strings.NewReplacer(" ", "_", "/", "+", "(", "", ")", "").Replace(name)+"-ms/step")
					parts = append(parts, fmt.Sprintf("%s %.2f", name, ms))
				}
				other := (total - ops).Seconds() * 1e3 / steps
				b.ReportMetric(other, "other-ms/step")
				b.ReportMetric(total.Seconds()*1e3/steps, "total-ms/step")
				b.Logf("%s on %s: %.1f ms/step (wall): %s; other (loss reductions, gradient norm, host) %.2f",
					sc.name, base.Name(), total.Seconds()*1e3/steps, strings.Join(parts, ", "), other)
			})
		}
	}
}
