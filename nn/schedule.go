package nn

import (
	"fmt"
	"math"
)

// ScheduleConfig describes a learning-rate schedule as a function of the
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
type ScheduleConfig struct {
	Name           string  `yaml:"name"`
	Exponent       float64 `yaml:"exponent"`
	WarmupSteps    int     `yaml:"warmup_steps"`
	MinLR          float64 `yaml:"min_lr"`
	PctStart       float64 `yaml:"pct_start"`
	DivFactor      float64 `yaml:"div_factor"`
	FinalDivFactor float64 `yaml:"final_div_factor"`
}

// WithDefaults returns s with unset fields given their defaults.
func (s ScheduleConfig) WithDefaults() ScheduleConfig {
	if s.Name == "" {
		s.Name = "poly"
	}
	if s.Exponent == 0 {
		s.Exponent = 0.9
	}
	if s.PctStart == 0 {
		s.PctStart = 0.3
	}
	if s.DivFactor == 0 {
		s.DivFactor = 25
	}
	if s.FinalDivFactor == 0 {
		s.FinalDivFactor = 1e4
	}
	return s
}

// Validate checks a schedule with defaults applied.
func (s ScheduleConfig) Validate() error {
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

// LR returns the learning rate at step (0-based) of total steps for base
// learning rate base. Steps at or past total get the schedule's final value.
func (s ScheduleConfig) LR(base float64, step, total int) float64 {
	if total < 1 {
		total = 1
	}
	step = max(step, 0)
	switch s.Name {
	case "constant":
		return base
	case "onecycle":
		initial := base / s.DivFactor
		final := initial / s.FinalDivFactor
		end1 := s.PctStart*float64(total) - 1
		end2 := float64(total - 1)
		x := float64(step)
		cosAnneal := func(a, b, pct float64) float64 { return b + (a-b)/2*(math.Cos(math.Pi*pct)+1) }
		if x <= end1 {
			return cosAnneal(initial, base, x/end1)
		}
		if end1 <= 0 && x == 0 {
			return base // a warm-up phase shorter than one step
		}
		if end2 <= end1 {
			return final
		}
		return cosAnneal(base, final, min(1, (x-end1)/(end2-end1)))
	case "cosine":
		if step < s.WarmupSteps {
			return base * float64(step) / float64(s.WarmupSteps)
		}
		progress := min(1, float64(step-s.WarmupSteps)/float64(max(1, total-s.WarmupSteps)))
		return s.MinLR + (base-s.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
	default: // poly
		frac := min(1, float64(step)/float64(total))
		return base * math.Pow(1-frac, s.Exponent)
	}
}
