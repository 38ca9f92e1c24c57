package nn

import (
	"math"

	"github.com/voxtrain/voxtrain/config"
)

// LearningRate returns schedule s's learning rate at step (0-based) of
// total steps for base learning rate base. Steps at or past total get the
// schedule's final value. The schedules (config.Schedule):
//
//	poly      lr·(1 − step/total)^exponent           (nnU-Net's PolyLRScheduler)
//	onecycle  PyTorch's OneCycleLR (cosine, two phases, lr as max_lr): from
//	          lr/div_factor up to lr over pct_start of the steps, then down to
//	          lr/div_factor/final_div_factor (momentum is not cycled)
//	cosine    linear warm-up from 0 over warmup_steps, then cosine decay from
//	          lr to min_lr (as transformers' cosine schedule with warm-up)
//	constant  lr
func LearningRate(s config.Schedule, base float64, step, total int) float64 {
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
