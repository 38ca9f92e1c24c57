package nn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/voxtrain/voxtrain/config"
)

// BenchOptions configure BenchStep.
type BenchOptions struct {
	Batch  int    // samples per step (default 2)
	Patch  [3]int // spatial size (D, H, W) (default 64³)
	Steps  int    // timed steps (default 12)
	Warmup int    // untimed steps first (default 3)
	// Loss and Optim default to what bench/torch_unet_step.py runs: CE +
	// batch soft Dice of the foreground, SGD lr 0.01, Nesterov momentum
	// 0.99, no weight decay, no gradient clipping, constant lr.
	Loss  *config.Loss
	Optim *config.Optim
	Seed  uint64
	// Progress, when set, is called after every step.
	Progress func(step int, warmup bool, d time.Duration, loss float64)
}

// BenchResult is what BenchStep measured.
type BenchResult struct {
	Device      string
	Params      int
	Batch       int
	Patch       [3]int
	FwdFLOP     int64           // analytic forward FLOPs of one step's batch
	StepTimes   []time.Duration // timed steps: forward + loss + backward + optimiser
	FwdTimes    []time.Duration // the forward + loss part of each timed step
	Median, Min time.Duration
	Max         time.Duration
	MedianFwd   time.Duration
	GFLOPS      float64 // 3 × forward FLOPs / median step time, in 1e9/s
	PeakDevice  int64   // peak bytes of device tensors
	// PeakAllocated is the peak device memory of tensors, buffers and
	// workspaces together, where the device tracks it (the CUDA device;
	// PyTorch's max_memory_allocated counts the same); 0 elsewhere.
	PeakAllocated int64
	LossFirst     float64 // loss of the first (warm-up) step
	LossLast      float64 // loss of the last step
	TrainableSize int64   // bytes of parameters
}

// BenchStep times training steps (forward, loss, backward, optimiser) of
// the U-Net cfg on dev with synthetic input like bench/torch_unet_step.py:
// a normal random image and, per sample, one cubic "lesion" of side 2·⌊s/6⌋
// (about 3 % of the voxels) as class 1. FLOPs are counted analytically
// (convolutions, transposed convolutions and heads, 2 × multiply-adds; a
// step counts as 3 × forward).
func BenchStep(dev Device, cfg config.Model, o BenchOptions) (BenchResult, error) {
	if o.Batch == 0 {
		o.Batch = 2
	}
	if o.Patch == [3]int{} {
		o.Patch = [3]int{64, 64, 64}
	}
	if o.Steps == 0 {
		o.Steps = 12
	}
	if o.Batch < 1 || o.Steps < 1 || o.Warmup < 0 {
		return BenchResult{}, fmt.Errorf("bench: batch %d, steps %d, warmup %d: want batch, steps >= 1, warmup >= 0", o.Batch, o.Steps, o.Warmup)
	}
	// torch_unet_step.py's loss and optimiser: CE + batch soft Dice (BCE
	// for one output channel); SGD lr 0.01, Nesterov 0.99, no weight decay,
	// no clipping, constant rate.
	loss := config.Default().Loss
	loss.BatchDice = true
	if cfg.NumClasses == 1 {
		loss = config.Default().Loss
		loss.Name = "bce"
	}
	if o.Loss != nil {
		loss = *o.Loss
	}
	optim := config.Default().Optim
	lr, decay := 0.01, 0.0
	optim.LR, optim.WeightDecay, optim.GradClip, optim.Schedule.Name = &lr, &decay, 0, "constant"
	if o.Optim != nil {
		optim = *o.Optim
	}
	m, err := NewUNet(dev, cfg, o.Seed)
	if err != nil {
		return BenchResult{}, err
	}
	defer m.Free()
	l, err := NewLearner(m, o.Batch, o.Patch, loss, optim)
	if err != nil {
		return BenchResult{}, err
	}
	defer l.Free()

	xs, ys := benchBatch(o.Batch, o.Patch, o.Seed, m.cfg.InChannels)
	x, y := dev.Alloc(l.WS.InputShape()), dev.Alloc(l.WS.LabelShape())
	defer dev.Free(x)
	defer dev.Free(y)
	if err := uploadSync(dev, x, xs); err != nil {
		return BenchResult{}, err
	}
	if err := uploadSync(dev, y, ys); err != nil {
		return BenchResult{}, err
	}

	r := BenchResult{Device: dev.Name(), Params: m.NumParams(), Batch: o.Batch, Patch: o.Patch, FwdFLOP: l.WS.ForwardFLOPs(),
		TrainableSize: int64(m.NumParams()) * 4}
	sync := dev.ComputeStream()
	total := o.Warmup + o.Steps
	for s := 0; s < total; s++ {
		lr := LearningRate(optim.Schedule, optim.BaseLR(), s, total)
		t0 := time.Now()
		out := m.Forward(l.WS, x)
		v, err := l.Loss.Compute(out, y)
		if err != nil {
			return BenchResult{}, err
		}
		sync.Synchronize()
		t1 := time.Now()
		m.Backward(l.WS, l.Loss.Grads())
		l.Opt.Step(lr)
		sync.Synchronize()
		if err := dev.Err(); err != nil {
			return BenchResult{}, err
		}
		t2 := time.Now()
		if s == 0 {
			r.LossFirst = v.Total
		}
		r.LossLast = v.Total
		if s >= o.Warmup {
			r.StepTimes = append(r.StepTimes, t2.Sub(t0))
			r.FwdTimes = append(r.FwdTimes, t1.Sub(t0))
		}
		if o.Progress != nil {
			o.Progress(s, s < o.Warmup, t2.Sub(t0), v.Total)
		}
	}
	r.Median, r.Min, r.Max = medianMinMax(r.StepTimes)
	r.MedianFwd, _, _ = medianMinMax(r.FwdTimes)
	r.GFLOPS = 3 * float64(r.FwdFLOP) / r.Median.Seconds() / 1e9
	_, r.PeakDevice = dev.MemoryInUse()
	if pa, ok := dev.(interface{ PeakAllocated() int64 }); ok {
		r.PeakAllocated = pa.PeakAllocated()
	}
	return r, nil
}

// medianMinMax returns the median (mean of the middle two for an even
// count, as Python's statistics.median), minimum and maximum.
func medianMinMax(ts []time.Duration) (med, lo, hi time.Duration) {
	s := slices.Clone(ts)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// benchBatch returns a synthetic NCDHW image and NDHW labels.
func benchBatch(n int, size [3]int, seed uint64, inC int) (x, y []float32) {
	rng := rand.New(rand.NewPCG(seed, 0xbe4c))
	v := size[0] * size[1] * size[2]
	x = make([]float32, n*inC*v)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y = make([]float32, n*v)
	for b := 0; b < n; b++ {
		var lo, hi [3]int
		for a := 0; a < 3; a++ {
			s := size[a]
			r := max(s/6, 1)
			c := s/4 + rng.IntN(max(s/2, 1))
			lo[a], hi[a] = max(c-r, 0), min(c+r, s)
		}
		for d := lo[0]; d < hi[0]; d++ {
			for h := lo[1]; h < hi[1]; h++ {
				for w := lo[2]; w < hi[2]; w++ {
					y[b*v+(d*size[1]+h)*size[2]+w] = 1
				}
			}
		}
	}
	return x, y
}
