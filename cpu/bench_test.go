package cpu

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
			r, err := nn.BenchStep(dev, nn.UNetConfig{}, nn.BenchOptions{
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

// timedDevice wraps the CPU device and accumulates wall time per op group
// (ops on the CPU device are synchronous, so wall time is the op's time).
type timedDevice struct {
	*Device
	t map[string]time.Duration
}

func (d *timedDevice) timed(name string) func() {
	t0 := time.Now()
	return func() { d.t[name] += time.Since(t0) }
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
func (d *timedDevice) SumSquares(ts []nn.Tensor) []float64 {
	defer d.timed("optimiser")()
	return d.Device.SumSquares(ts)
}

// BenchmarkUNetStepOps is BenchmarkUNetStep at 2×64³ with the time split
// by op group (ms per step).
func BenchmarkUNetStepOps(b *testing.B) {
	dev := &timedDevice{Device: New(Options{}), t: map[string]time.Duration{}}
	warm := 1
	var total time.Duration
	_, err := nn.BenchStep(dev, nn.UNetConfig{}, nn.BenchOptions{Batch: 2, Patch: [3]int{64, 64, 64}, Steps: b.N, Warmup: warm,
		Progress: func(s int, w bool, d time.Duration, _ float64) {
			if s == warm-1 {
				clear(dev.t) // drop the warm-up step
			}
			if !w {
				total += d
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	var ops time.Duration
	for name, t := range dev.t {
		b.ReportMetric(float64(t.Milliseconds())/float64(b.N), strings.NewReplacer(" ", "_", "/", "+").Replace(name)+"-ms/step")
		ops += t
	}
	b.ReportMetric(float64((total-ops).Milliseconds())/float64(b.N), "other-ms/step")
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "total-ms/step")
}
