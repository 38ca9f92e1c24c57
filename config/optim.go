package config

import (
	"fmt"
	"math"
)

// Optim is the `optim:` section: the optimiser and its learning-rate
// schedule (package nn runs them). The defaults are nnU-Net's: SGD, lr
// 0.01, Nesterov momentum 0.99, weight decay 3e-5, gradient-norm clip 12,
// poly schedule with exponent 0.9.
type Optim struct {
	// Name is "sgd" or "adamw"; it picks lr and weight_decay when the file
	// does not give them (see BaseLR and Decay).
	Name string   `yaml:"name"`
	LR   *float64 `yaml:"lr"`
	// Momentum and Nesterov apply to SGD.
	Momentum float64 `yaml:"momentum"`
	Nesterov bool    `yaml:"nesterov"`
	// WeightDecay is SGD's L2 term or AdamW's decoupled decay.
	WeightDecay *float64 `yaml:"weight_decay"`
	// Betas and Eps apply to AdamW.
	Betas [2]float64 `yaml:"betas"`
	Eps   float64    `yaml:"eps"`
	// GradClip is the maximum global gradient L2 norm (0: no clipping).
	GradClip float64  `yaml:"grad_clip"`
	Schedule Schedule `yaml:"schedule"`
}

// Validate reports the first problem of the section, naming the key.
func (c Optim) Validate() error {
	switch c.Name {
	case "sgd", "adamw":
	default:
		return fmt.Errorf("optim.name: %q, want sgd or adamw", c.Name)
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	if lr := c.BaseLR(); !(lr > 0) || bad(lr) {
		return fmt.Errorf("optim.lr: %v, want > 0", lr)
	}
	if m := c.Momentum; !(m >= 0 && m < 1) {
		return fmt.Errorf("optim.momentum: %v, want in [0, 1)", m)
	}
	if c.Nesterov && c.Momentum == 0 && c.Name == "sgd" {
		return fmt.Errorf("optim.nesterov: needs momentum > 0")
	}
	if w := c.Decay(); !(w >= 0) || bad(w) {
		return fmt.Errorf("optim.weight_decay: %v, want >= 0", w)
	}
	for i, b := range c.Betas {
		if !(b >= 0 && b < 1) {
			return fmt.Errorf("optim.betas[%d]: %v, want in [0, 1)", i, b)
		}
	}
	if e := c.Eps; !(e > 0) || bad(e) {
		return fmt.Errorf("optim.eps: %v, want > 0", e)
	}
	if g := c.GradClip; !(g >= 0) || bad(g) {
		return fmt.Errorf("optim.grad_clip: %v, want >= 0 (0 = off)", g)
	}
	return c.Schedule.Validate()
}

// Schedule is optim.schedule: a learning-rate schedule as a function of the
// step index (0-based) out of a total; whether a step is an iteration or an
// epoch is the trainer's choice (nnU-Net steps its poly schedule per epoch).
//
//	poly      lr·(1 − step/total)^exponent           (nnU-Net's PolyLRScheduler)
//	onecycle  PyTorch's OneCycleLR (cosine, two phases, lr as max_lr): from
//	          lr/div_factor up to lr over pct_start of the steps, then down to
//	          lr/div_factor/final_div_factor (momentum is not cycled)
//	cosine    linear warm-up from 0 over warmup_steps, then cosine decay from
//	          lr to min_lr (as transformers' cosine schedule with warm-up)
//	constant  lr
type Schedule struct {
	Name           string  `yaml:"name"`
	Exponent       float64 `yaml:"exponent"`
	WarmupSteps    int     `yaml:"warmup_steps"`
	MinLR          float64 `yaml:"min_lr"`
	PctStart       float64 `yaml:"pct_start"`
	DivFactor      float64 `yaml:"div_factor"`
	FinalDivFactor float64 `yaml:"final_div_factor"`
}

// Validate reports the first problem of the schedule, naming the key.
func (s Schedule) Validate() error {
	switch s.Name {
	case "poly", "onecycle", "cosine", "constant":
	default:
		return fmt.Errorf("optim.schedule.name: %q, want poly, onecycle, cosine or constant", s.Name)
	}
	if s.Exponent < 0 {
		return fmt.Errorf("optim.schedule.exponent: %v, want >= 0", s.Exponent)
	}
	if s.WarmupSteps < 0 {
		return fmt.Errorf("optim.schedule.warmup_steps: %d, want >= 0", s.WarmupSteps)
	}
	if s.MinLR < 0 {
		return fmt.Errorf("optim.schedule.min_lr: %v, want >= 0", s.MinLR)
	}
	if s.PctStart <= 0 || s.PctStart >= 1 {
		return fmt.Errorf("optim.schedule.pct_start: %v, want in (0, 1)", s.PctStart)
	}
	if s.DivFactor <= 0 || s.FinalDivFactor <= 0 {
		return fmt.Errorf("optim.schedule: div_factor %v and final_div_factor %v must be > 0", s.DivFactor, s.FinalDivFactor)
	}
	return nil
}
