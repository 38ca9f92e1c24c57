//go:build cuda

package gpu_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
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
	calls   map[string]int
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
		o.calls[p.name]++
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
			b.Run(fmt.Sprintf("%s/%s", sc.name, m), func(b *testing.B) { benchOps(b, base, sc.name, sc.cfg, sc.batch, sc.patch, false) })
		}
	}
}

// BenchmarkUNetStepOpsByShape splits nnU-Net 3d_fullres 2×1×128³'s bf16 and
// tf32 steps by op group and tensor shape (optiming.Device.ByShape): each
// op at each U-Net level, with its calls per step and the GB/s a
// memory-bound op reaches — what to mend next, level by level.
func BenchmarkUNetStepOpsByShape(b *testing.B) {
	sc := stepConfigs[len(stepConfigs)-1]
	for _, m := range []gpu.Math{gpu.MathBF16, gpu.MathTF32} {
		base := open(b, gpu.Options{Math: m})
		b.Run(fmt.Sprintf("%s/%s", sc.name, m), func(b *testing.B) { benchOps(b, base, sc.name, sc.cfg, sc.batch, sc.patch, true) })
	}
}

// benchOps times steps of model cfg on base with the ops' GPU time split
// by group (and shape when byShape), reporting each group's ms per step.
func benchOps(b *testing.B, base *gpu.Device, name string, cfg config.Model, batch int, patch [3]int, byShape bool) {
	ot := &opTimes{dev: base, t: map[string]time.Duration{}, calls: map[string]int{}}
	d := &optiming.Device{Device: base, Span: ot.span, ByShape: byShape}
	const warm = 2
	var total time.Duration
	var cerr error
	r, err := nn.BenchStep(d, cfg, nn.BenchOptions{Batch: batch, Patch: patch, Steps: max(b.N, 3), Warmup: warm, Seed: 1,
		Progress: func(s int, w bool, dt time.Duration, _ float64) {
			if err := ot.collect(); err != nil && cerr == nil {
				cerr = err
			}
			if s == warm-1 {
				clear(ot.t) // drop the warm-up steps
				clear(ot.calls)
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
	other := (total - ops).Seconds() * 1e3 / steps
	if byShape {
		// One line per op and shape: too many for metrics.
		lines := []string{fmt.Sprintf("%s on %s, %d-byte activations and %d-byte activation gradients: %.1f ms/step (wall), other %.2f; by op and shape (ms/step, calls/step, GB/s of a memory-bound op's minimal traffic):",
			name, base.Name(), d.ActivationBytes(), d.ActivationGradientBytes(), total.Seconds()*1e3/steps, other)}
		for _, n := range names {
			ms := ot.t[n].Seconds() * 1e3 / steps
			line := fmt.Sprintf("  %-70s %8.3f ms %4.0f×", n, ms, float64(ot.calls[n])/steps)
			// The element sizes the step ran with (through the wrapper,
			// which forwards the device's activation allocators): bf16
			// activations and gradients under MathBF16 by default.
			if by := optiming.MinimalTraffic(n, d.ActivationBytes(), d.ActivationGradientBytes()); by > 0 && ms > 0 {
				line += fmt.Sprintf(" %7.0f GB/s", float64(by)/1e9*float64(ot.calls[n])/steps/(ms/1e3))
			}
			lines = append(lines, line)
		}
		b.Log(strings.Join(lines, "\n"))
		b.ReportMetric(total.Seconds()*1e3/steps, "total-ms/step")
		return
	}
	var parts []string
	for _, n := range names {
		ms := ot.t[n].Seconds() * 1e3 / steps
		b.ReportMetric(ms, strings.NewReplacer(" ", "_", "/", "+", "(", "", ")", "").Replace(n)+"-ms/step")
		parts = append(parts, fmt.Sprintf("%s %.2f", n, ms))
	}
	b.ReportMetric(other, "other-ms/step")
	b.ReportMetric(total.Seconds()*1e3/steps, "total-ms/step")
	b.Logf("%s on %s, %d-byte activations and %d-byte activation gradients: %.1f ms/step (wall): %s; other (loss reductions, gradient norm, host) %.2f",
		name, base.Name(), d.ActivationBytes(), d.ActivationGradientBytes(), total.Seconds()*1e3/steps, strings.Join(parts, ", "), other)
}
