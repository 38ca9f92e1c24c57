package nn

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/config"
)

// Optimizer updates parameters from their gradients.
type Optimizer interface {
	// Step clips the gradients (if configured) and applies one update
	// with learning rate lr. It returns the global gradient norm before
	// clipping.
	Step(lr float64) (gradNorm float64)
	// Steps returns the number of steps taken (restored by SetSteps).
	Steps() int
	// SetSteps sets the step counter (when resuming).
	SetSteps(n int)
	// State returns the optimiser's per-parameter state in PyTorch layout,
	// named "<param>.<buffer>" (momentum_buffer; exp_avg, exp_avg_sq).
	State() ([]HostTensor, error)
	// LoadState restores what State returned.
	LoadState(ts []HostTensor) error
	// Free releases the state's device memory.
	Free()
}

// NewOptimizer returns the optimiser cfg describes for params.
func NewOptimizer(dev Device, cfg config.Optim, params []*Param) (Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := optBase{dev: dev, params: params, clip: cfg.GradClip, w: make([]Tensor, len(params)), g: make([]Tensor, len(params))}
	for i, p := range params {
		base.w[i], base.g[i] = p.W, p.G
	}
	alloc := func() []Tensor {
		ts := make([]Tensor, len(params))
		for i, p := range params {
			ts[i] = dev.Alloc(p.W.Shape())
		}
		return ts
	}
	switch cfg.Name {
	case "adamw":
		return &AdamW{optBase: base, cfg: cfg, m: alloc(), v: alloc()}, nil
	default:
		o := &SGD{optBase: base, cfg: cfg}
		if cfg.Momentum != 0 {
			o.buf = alloc()
		}
		return o, nil
	}
}

// optBase is what both optimisers share: parameters, clipping, step count.
type optBase struct {
	dev    Device
	params []*Param
	// w and g are the parameters' tensors and gradients in order, as the
	// device's list ops take them (a Param's tensors never change after
	// NewUNet).
	w, g  []Tensor
	clip  float64
	steps int
}

// Steps returns the number of steps taken.
func (o *optBase) Steps() int { return o.steps }

// SetSteps sets the step counter.
func (o *optBase) SetSteps(n int) { o.steps = n }

// gradScale returns the global gradient norm and the factor PyTorch's
// clip_grad_norm_ multiplies the gradients by: min(1, clip/(norm + 1e-6)).
func (o *optBase) gradScale() (norm float64, scale float32) {
	var sum float64
	for _, s := range o.dev.SumSquares(o.g) {
		sum += s
	}
	norm = math.Sqrt(sum)
	if o.clip <= 0 {
		return norm, 1
	}
	return norm, float32(min(1, o.clip/(norm+1e-6)))
}

func stateNames(suffix string) func(*Param) string {
	return func(p *Param) string { return p.Name + "." + suffix }
}

func indexOf(params []*Param) map[*Param]int {
	m := make(map[*Param]int, len(params))
	for i, p := range params {
		m[p] = i
	}
	return m
}

// SGD is stochastic gradient descent with (Nesterov) momentum and L2 weight
// decay, with PyTorch's torch.optim.SGD semantics.
type SGD struct {
	optBase
	cfg config.Optim
	buf []Tensor // momentum buffers (nil without momentum)
}

// Step applies one SGD update.
func (o *SGD) Step(lr float64) float64 {
	norm, scale := o.gradScale()
	a := SGDArgs{LR: float32(lr), Momentum: float32(o.cfg.Momentum), WeightDecay: float32(o.cfg.Decay()),
		Nesterov: o.cfg.Nesterov, GradScale: scale}
	o.dev.SGDUpdate(o.w, o.g, o.buf, a)
	o.steps++
	return norm
}

// State returns the momentum buffers.
func (o *SGD) State() ([]HostTensor, error) {
	if o.buf == nil {
		return nil, nil
	}
	idx := indexOf(o.params)
	return ExportTensors(o.dev, o.params, stateNames("momentum_buffer"), func(p *Param) Tensor { return o.buf[idx[p]] })
}

// LoadState restores the momentum buffers.
func (o *SGD) LoadState(ts []HostTensor) error {
	if o.buf == nil {
		if len(ts) != 0 {
			return fmt.Errorf("optimizer state: SGD without momentum has no state, got %d tensors", len(ts))
		}
		return nil
	}
	idx := indexOf(o.params)
	return ImportTensors(o.dev, o.params, ts, stateNames("momentum_buffer"), func(p *Param) Tensor { return o.buf[idx[p]] })
}

// Free releases the momentum buffers.
func (o *SGD) Free() {
	for _, t := range o.buf {
		o.dev.Free(t)
	}
}

// AdamW is Adam with decoupled weight decay (torch.optim.AdamW semantics).
type AdamW struct {
	optBase
	cfg  config.Optim
	m, v []Tensor
}

// Step applies one AdamW update.
func (o *AdamW) Step(lr float64) float64 {
	norm, scale := o.gradScale()
	o.steps++
	a := AdamWArgs{LR: float32(lr), Beta1: float32(o.cfg.Betas[0]), Beta2: float32(o.cfg.Betas[1]),
		Eps: float32(o.cfg.Eps), WeightDecay: float32(o.cfg.Decay()), Step: o.steps, GradScale: scale}
	o.dev.AdamWUpdate(o.w, o.g, o.m, o.v, a)
	return norm
}

// State returns the first and second moments.
func (o *AdamW) State() ([]HostTensor, error) {
	idx := indexOf(o.params)
	m, err := ExportTensors(o.dev, o.params, stateNames("exp_avg"), func(p *Param) Tensor { return o.m[idx[p]] })
	if err != nil {
		return nil, err
	}
	v, err := ExportTensors(o.dev, o.params, stateNames("exp_avg_sq"), func(p *Param) Tensor { return o.v[idx[p]] })
	if err != nil {
		return nil, err
	}
	return append(m, v...), nil
}

// LoadState restores the moments.
func (o *AdamW) LoadState(ts []HostTensor) error {
	var m, v []HostTensor
	for _, t := range ts {
		switch {
		case len(t.Name) > len(".exp_avg_sq") && t.Name[len(t.Name)-len(".exp_avg_sq"):] == ".exp_avg_sq":
			v = append(v, t)
		default:
			m = append(m, t)
		}
	}
	idx := indexOf(o.params)
	if err := ImportTensors(o.dev, o.params, m, stateNames("exp_avg"), func(p *Param) Tensor { return o.m[idx[p]] }); err != nil {
		return err
	}
	return ImportTensors(o.dev, o.params, v, stateNames("exp_avg_sq"), func(p *Param) Tensor { return o.v[idx[p]] })
}

// Free releases the moments.
func (o *AdamW) Free() {
	for i := range o.m {
		o.dev.Free(o.m[i])
		o.dev.Free(o.v[i])
	}
}
