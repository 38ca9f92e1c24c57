// Launch recipes of optim.cu: the SGD and AdamW updates.

package kernels

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/nn"
)

// SGDUpdate applies one SGD step to w (n floats) with gradient g and
// momentum buffer buf (B's zero value when a.Momentum is 0).
func (o Ops[B]) SGDUpdate(w, g, buf B, n int, a nn.SGDArgs) error {
	if err := checkSizes("SGDUpdate", []int{n}); err != nil {
		return err
	}
	if a.Momentum == 0 {
		var null B
		buf = null
	}
	nest := int32(0)
	if a.Nesterov {
		nest = 1
	}
	return o.launch1(kSGD, n, w, g, buf, i32(n), a.LR, a.Momentum, a.WeightDecay, nest, a.GradScale)
}

// AdamWScalars returns the host-side factors of an AdamW step, computed as
// the CPU device computes them: stepSize = lr/(1-β1^t), bc2Sqrt =
// sqrt(1-β2^t), decay = 1 - lr·wd.
func AdamWScalars(a nn.AdamWArgs) (stepSize, bc2Sqrt, decay float32) {
	bc1 := 1 - math.Pow(float64(a.Beta1), float64(a.Step))
	bc2 := 1 - math.Pow(float64(a.Beta2), float64(a.Step))
	return float32(float64(a.LR) / bc1), float32(math.Sqrt(bc2)), 1 - a.LR*a.WeightDecay
}

// AdamWUpdate applies one AdamW step to w (n floats) with gradient g and
// moments m, v.
func (o Ops[B]) AdamWUpdate(w, g, m, v B, n int, a nn.AdamWArgs) error {
	if a.Step < 1 {
		return fmt.Errorf("kernels.AdamWUpdate: step %d, want >= 1", a.Step)
	}
	if err := checkSizes("AdamWUpdate", []int{n}); err != nil {
		return err
	}
	step, bc2, decay := AdamWScalars(a)
	return o.launch1(kAdamW, n, w, g, m, v, i32(n), a.Beta1, a.Beta2, a.Eps, step, bc2, decay, a.GradScale)
}
