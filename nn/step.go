package nn

import (
	"fmt"

	"github.com/voxtrain/voxtrain/config"
)

// Learner bundles what one training step needs: a model with its
// workspace, the criterion and the optimiser, all sized for one batch shape.
type Learner struct {
	Model *UNet
	WS    *Workspace
	Loss  *Criterion
	Opt   Optimizer
	// ReduceGrads, when set, is called after the backward pass, every
	// parameter's gradient complete, and before the optimiser clips and
	// applies them: a data-parallel job averages the gradients over its
	// ranks here, so that the clipping norm is the global one and every
	// rank takes the same update. An error fails the step.
	ReduceGrads func(params []*Param) error
	// Sync, when set, replaces ReduceGrads with a reduction that overlaps
	// the backward pass (see GradSync); nil leaves single-process
	// training as it was.
	Sync GradSync
}

// GradSync averages the gradients over a data-parallel job's ranks while
// the backward pass runs, as PyTorch DDP's Reducer does. Step calls Begin
// before the backward pass, Ready from it with each layer's parameters
// as soon as their gradients are final (UNet.BackwardReady; on a device
// with streams, once their ops are issued), and Finish after it, before
// the optimiser clips and applies the gradients, so that the clipping
// norm is the global one. Finish returns once every gradient is the mean
// over the ranks, or with the first error, which fails the step; a
// GradSync must leave nothing running after Finish, error or not.
type GradSync interface {
	Begin()
	Ready(params []*Param)
	Finish() error
}

// NewLearner allocates a training workspace for batches of n samples of
// spatial size size, a criterion and an optimiser for m.
func NewLearner(m *UNet, n int, size [3]int, loss config.Loss, optim config.Optim) (*Learner, error) {
	ws, err := m.NewWorkspace(n, size, true)
	if err != nil {
		return nil, err
	}
	crit, err := NewCriterion(m.dev, loss, ws.OutputShapes())
	if err != nil {
		ws.Free()
		return nil, err
	}
	opt, err := NewOptimizer(m.dev, optim, m.Params())
	if err != nil {
		crit.Free()
		ws.Free()
		return nil, err
	}
	return &Learner{Model: m, WS: ws, Loss: crit, Opt: opt}, nil
}

// StepResult reports one training step.
type StepResult struct {
	Loss     LossValue
	GradNorm float64 // global gradient norm before clipping
}

// Step runs forward, loss, backward and one optimiser update with learning
// rate lr on the batch x (N, C, D, H, W) with labels (N, D, H, W), both
// device tensors. On a loss error (bad labels) the weights are unchanged.
func (l *Learner) Step(x, labels Tensor, lr float64) (StepResult, error) {
	out := l.Model.Forward(l.WS, x)
	v, err := l.Loss.Compute(out, labels)
	if err != nil {
		return StepResult{}, err
	}
	if l.Sync != nil {
		l.Sync.Begin()
		l.Model.BackwardReady(l.WS, l.Loss.Grads(), l.Sync.Ready)
		if err := l.Sync.Finish(); err != nil {
			return StepResult{}, fmt.Errorf("train step: gradients: %w", err)
		}
	} else {
		l.Model.Backward(l.WS, l.Loss.Grads())
	}
	if l.Sync == nil && l.ReduceGrads != nil {
		if err := l.ReduceGrads(l.Model.Params()); err != nil {
			return StepResult{}, fmt.Errorf("train step: gradients: %w", err)
		}
	}
	norm := l.Opt.Step(lr)
	if err := l.Model.dev.Err(); err != nil {
		return StepResult{}, fmt.Errorf("train step: %w", err)
	}
	return StepResult{Loss: v, GradNorm: norm}, nil
}

// Free releases the learner's workspace, criterion and optimiser state
// (not the model).
func (l *Learner) Free() {
	l.Opt.Free()
	l.Loss.Free()
	l.WS.Free()
}
