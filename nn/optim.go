package nn

import (
	"fmt"
	"math"
)

// OptimConfig describes the optimiser and its learning-rate schedule (the
// `optim:` section of a run's YAML). Defaults are nnU-Net's: SGD, lr 0.01,
// Nesterov momentum 0.99, weight decay 3e-5, gradient-norm clip 12, poly
// schedule with exponent 0.9.
type OptimConfig struct {
	// Name is "sgd" or "adamw".
	Name string  `yaml:"name"`
	LR   float64 `yaml:"lr"`
	// Momentum and Nesterov apply to SGD (defaults 0.99, true).
	Momentum *float64 `yaml:"momentum"`
	Nesterov *bool    `yaml:"nesterov"`
	// WeightDecay: SGD's L2 term (default 3e-5) or AdamW's decoupled decay
	// (default 0.01, PyTorch's).
	WeightDecay *float64 `yaml:"weight_decay"`
	// Betas and Eps apply to AdamW (defaults (0.9, 0.999), 1e-8).
	Betas *[2]float64 `yaml:"betas"`
	Eps   *float64    `yaml:"eps"`
	// GradClip is the maximum global gradient L2 norm (0: no clipping;
	// default 12).
	GradClip *float64       `yaml:"grad_clip"`
	Schedule ScheduleConfig `yaml:"schedule"`
}

// WithDefaults returns c with unset fields given their defaults.
func (c OptimConfig) WithDefaults() OptimConfig {
	if c.Name == "" {
		c.Name = "sgd"
	}
	if c.LR == 0 {
		if c.Name == "adamw" {
			c.LR = 1e-3
		} else {
			c.LR = 0.01
		}
	}
	if c.Momentum == nil {
		c.Momentum = f64(0.99)
	}
	if c.Nesterov == nil {
		t := true
		c.Nesterov = &t
	}
	if c.WeightDecay == nil {
		if c.Name == "adamw" {
			c.WeightDecay = f64(0.01)
		} else {
			c.WeightDecay = f64(3e-5)
		}
	}
	if c.Betas == nil {
		c.Betas = &[2]float64{0.9, 0.999}
	}
	if c.Eps == nil {
		c.Eps = f64(1e-8)
	}
	if c.GradClip == nil {
		c.GradClip = f64(12)
	}
	c.Schedule = c.Schedule.WithDefaults()
	return c
}

// Validate checks a configuration with defaults applied.
func (c OptimConfig) Validate() error {
	switch c.Name {
	case "sgd", "adamw":
	default:
		return fmt.Errorf("optim.name: %q, want sgd or adamw", c.Name)
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	if c.LR <= 0 || bad(c.LR) {
		return fmt.Errorf("optim.lr: %v, want > 0", c.LR)
	}
	if m := *c.Momentum; m < 0 || m >= 1 || bad(m) {
		return fmt.Errorf("optim.momentum: %v, want in [0, 1)", m)
	}
	if *c.Nesterov && *c.Momentum == 0 && c.Name == "sgd" {
		return fmt.Errorf("optim.nesterov: needs momentum > 0")
	}
	if w := *c.WeightDecay; w < 0 || bad(w) {
		return fmt.Errorf("optim.weight_decay: %v, want >= 0", w)
	}
	for i, b := range c.Betas {
		if b < 0 || b >= 1 || bad(b) {
			return fmt.Errorf("optim.betas[%d]: %v, want in [0, 1)", i, b)
		}
	}
	if e := *c.Eps; e <= 0 || bad(e) {
		return fmt.Errorf("optim.eps: %v, want > 0", e)
	}
	if g := *c.GradClip; g < 0 || bad(g) {
		return fmt.Errorf("optim.grad_clip: %v, want >= 0 (0 = off)", g)
	}
	return c.Schedule.Validate()
}

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
func NewOptimizer(dev Device, cfg OptimConfig, params []*Param) (Optimizer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := optBase{dev: dev, params: params, clip: *cfg.GradClip}
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
		if *cfg.Momentum != 0 {
			o.buf = alloc()
		}
		return o, nil
	}
}

// optBase is what both optimisers share: parameters, clipping, step count.
type optBase struct {
	dev    Device
	params []*Param
	clip   float64
	steps  int
}

// Steps returns the number of steps taken.
func (o *optBase) Steps() int { return o.steps }

// SetSteps sets the step counter.
func (o *optBase) SetSteps(n int) { o.steps = n }

// gradScale returns the global gradient norm and the factor PyTorch's
// clip_grad_norm_ multiplies the gradients by: min(1, clip/(norm + 1e-6)).
func (o *optBase) gradScale() (norm float64, scale float32) {
	gs := make([]Tensor, len(o.params))
	for i, p := range o.params {
		gs[i] = p.G
	}
	var sum float64
	for _, s := range o.dev.SumSquares(gs) {
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
	cfg OptimConfig
	buf []Tensor // momentum buffers (nil without momentum)
}

// Step applies one SGD update.
func (o *SGD) Step(lr float64) float64 {
	norm, scale := o.gradScale()
	a := SGDArgs{LR: float32(lr), Momentum: float32(*o.cfg.Momentum), WeightDecay: float32(*o.cfg.WeightDecay),
		Nesterov: *o.cfg.Nesterov, GradScale: scale}
	for i, p := range o.params {
		var b Tensor
		if o.buf != nil {
			b = o.buf[i]
		}
		o.dev.SGDUpdate(p.W, p.G, b, a)
	}
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
	cfg  OptimConfig
	m, v []Tensor
}

// Step applies one AdamW update.
func (o *AdamW) Step(lr float64) float64 {
	norm, scale := o.gradScale()
	o.steps++
	a := AdamWArgs{LR: float32(lr), Beta1: float32(o.cfg.Betas[0]), Beta2: float32(o.cfg.Betas[1]),
		Eps: float32(*o.cfg.Eps), WeightDecay: float32(*o.cfg.WeightDecay), Step: o.steps, GradScale: scale}
	for i, p := range o.params {
		o.dev.AdamWUpdate(p.W, p.G, o.m[i], o.v[i], a)
	}
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
