//go:build cuda

package gpu_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/gpu"
	"github.com/voxtrain/voxtrain/nn"
)

// timedDevice wraps the GPU device and times op groups on the GPU's clock:
// a timing event is recorded on the compute stream before and after each
// wrapped op (every op runs on that stream), and the pairs are read after
// each step. The events cost a few microseconds each, so the groups add up
// to a little more than the plain step time.
type timedDevice struct {
	*gpu.Device
	pending []timedOp
	t       map[string]time.Duration
}

type timedOp struct {
	name       string
	start, end nn.Event
}

func (d *timedDevice) timed(name string) func() {
	cs := d.ComputeStream()
	start := d.RecordTimed(cs)
	return func() { d.pending = append(d.pending, timedOp{name, start, d.RecordTimed(cs)}) }
}

// collect adds the pending pairs' GPU times to the totals.
func (d *timedDevice) collect() error {
	if len(d.pending) == 0 {
		return nil
	}
	d.pending[len(d.pending)-1].end.Synchronize()
	for _, p := range d.pending {
		e, err := d.Elapsed(p.start, p.end)
		if err != nil {
			return err
		}
		d.t[p.name] += e
	}
	d.pending = d.pending[:0]
	return nil
}

func (d *timedDevice) Conv3DForward(g nn.ConvGeom, x, w, b, y nn.Tensor) {
	defer d.timed("conv forward")()
	d.Device.Conv3DForward(g, x, w, b, y)
}
func (d *timedDevice) Conv3DBackwardData(g nn.ConvGeom, dy, w, dx nn.Tensor) {
	defer d.timed("conv backward data")()
	d.Device.Conv3DBackwardData(g, dy, w, dx)
}
func (d *timedDevice) Conv3DBackwardWeight(g nn.ConvGeom, x, dy, dw, db nn.Tensor) {
	defer d.timed("conv backward weight")()
	d.Device.Conv3DBackwardWeight(g, x, dy, dw, db)
}
func (d *timedDevice) InstanceNormActForward(x, gamma, beta, y, stats nn.Tensor, eps, slope float32) {
	defer d.timed("norm+act forward")()
	d.Device.InstanceNormActForward(x, gamma, beta, y, stats, eps, slope)
}
func (d *timedDevice) InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta nn.Tensor, slope float32) {
	defer d.timed("norm+act backward")()
	d.Device.InstanceNormActBackward(x, gamma, beta, stats, dy, dx, dgamma, dbeta, slope)
}
func (d *timedDevice) ConcatChannels(a, b, dst nn.Tensor) {
	defer d.timed("concat/split/add")()
	d.Device.ConcatChannels(a, b, dst)
}
func (d *timedDevice) SplitChannels(src, a, b nn.Tensor) {
	defer d.timed("concat/split/add")()
	d.Device.SplitChannels(src, a, b)
}
func (d *timedDevice) Add(dst, src nn.Tensor) {
	defer d.timed("concat/split/add")()
	d.Device.Add(dst, src)
}
func (d *timedDevice) AddChannelBias(t, b nn.Tensor) {
	defer d.timed("bias (transposed conv)")()
	d.Device.AddChannelBias(t, b)
}
func (d *timedDevice) ChannelSum(t, dst nn.Tensor) {
	defer d.timed("bias (transposed conv)")()
	d.Device.ChannelSum(t, dst)
}
func (d *timedDevice) SoftmaxLoss(logits, labels, probs nn.Tensor) (nn.SegStats, error) {
	defer d.timed("softmax + loss")()
	return d.Device.SoftmaxLoss(logits, labels, probs)
}
func (d *timedDevice) SoftmaxLossBackward(probs, labels nn.Tensor, ceScale, alpha, beta []float32, extra, dlogits nn.Tensor) {
	defer d.timed("softmax + loss")()
	d.Device.SoftmaxLossBackward(probs, labels, ceScale, alpha, beta, extra, dlogits)
}
func (d *timedDevice) SGDUpdate(w, g, buf nn.Tensor, a nn.SGDArgs) {
	defer d.timed("optimiser")()
	d.Device.SGDUpdate(w, g, buf, a)
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
				d := &timedDevice{Device: base, t: map[string]time.Duration{}}
				const warm = 2
				var total time.Duration
				var cerr error
				r, err := nn.BenchStep(d, sc.cfg, nn.BenchOptions{Batch: sc.batch, Patch: sc.patch, Steps: max(b.N, 3), Warmup: warm, Seed: 1,
					Progress: func(s int, w bool, dt time.Duration, _ float64) {
						if err := d.collect(); err != nil && cerr == nil {
							cerr = err
						}
						if s == warm-1 {
							clear(d.t) // drop the warm-up steps
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
				names := make([]string, 0, len(d.t))
				var ops time.Duration
				for name, t := range d.t {
					names = append(names, name)
					ops += t
				}
				sort.Slice(names, func(i, j int) bool { return d.t[names[i]] > d.t[names[j]] })
				var parts []string
				for _, name := range names {
					ms := d.t[name].Seconds() * 1e3 / steps
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
