package devcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// StepCase is one U-Net training-step comparison.
type StepCase struct {
	Model config.Model // zero: the reference U-Net, config.Default().Model
	Loss  config.Loss
	Optim config.Optim
	Batch int
	Patch [3]int
	Steps int // training steps compared (default 2)
	Seed  uint64
}

// Batch returns the synthetic batch UNetStep trains on: a normal random
// image (NCDHW) with a brighter box that the labels (NDHW) mark as class 1
// (class 2 for the box's upper half when the model has 3 classes or more).
func Batch(seed uint64, n, channels, classes int, size [3]int) (x, y []float32) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	v := size[0] * size[1] * size[2]
	x, y = make([]float32, n*channels*v), make([]float32, n*v)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for b := 0; b < n; b++ {
		var lo, hi [3]int
		for a := 0; a < 3; a++ {
			s := size[a]
			lo[a] = r.IntN(max(s/2, 1))
			hi[a] = min(s, lo[a]+max(s/3, 1))
		}
		for d := lo[0]; d < hi[0]; d++ {
			for h := lo[1]; h < hi[1]; h++ {
				for w := lo[2]; w < hi[2]; w++ {
					i := (d*size[1]+h)*size[2] + w
					cls := float32(1)
					if classes >= 3 && d < (lo[0]+hi[0])/2 {
						cls = 2
					}
					y[b*v+i] = cls
					for c := 0; c < channels; c++ {
						x[(b*channels+c)*v+i] += 1.5
					}
				}
			}
		}
	}
	return x, y
}

// UNetStep trains the same U-Net (same seed, so the same initial weights)
// for a few steps on dev and on the CPU device and compares the losses,
// every parameter's gradient and every parameter after each step.
// Gradients and weights are compared norm-wise (‖got − want‖ / ‖want‖ <=
// tol.Step) since their elements span many orders of magnitude.
//
// Rounding alone can move a gradient by more than tol.Step: LeakyReLU (and
// the max of clDice's soft skeleton) has a kink, and a pre-activation
// within rounding distance of it takes the other slope on the other
// device, which changes that channel's gradient — and everything upstream
// of it — by far more than an ulp. (On an H200 the reference U-Net's
// gradients below its bottleneck differed by up to 1.4 %: exactly what the
// CPU itself gives when its initial weights are perturbed by half an ulp.)
// So UNetStep also trains perturbedRuns copies on the CPU whose initial
// weights are perturbed by tol.Rounding (relative), and a tensor may
// differ from the CPU by up to spreadFactor times the largest difference
// those copies show for it. Where the CPU is insensitive (most tensors,
// at 1e-6 or less), that bound is below tol.Step and tol.Step decides.
func UNetStep(t *testing.T, dev nn.Device, sc StepCase, tol Tolerances) {
	if sc.Steps == 0 {
		sc.Steps = 2
	}
	if sc.Model.InChannels == 0 {
		sc.Model = config.Default().Model // the reference U-Net
	}
	if tol == (Tolerances{}) {
		tol = FP32
	}
	lr := sc.Optim.BaseLR()
	ref := cpu.New(cpu.Options{})
	type side struct {
		dev nn.Device
		m   *nn.UNet
		l   *nn.Learner
	}
	open := func(d nn.Device) *side {
		m, err := nn.NewUNet(d, sc.Model, sc.Seed)
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		l, err := nn.NewLearner(m, sc.Batch, sc.Patch, sc.Loss, sc.Optim)
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		s := &side{dev: d, m: m, l: l}
		t.Cleanup(func() { l.Free(); m.Free() })
		return s
	}
	g, c := open(dev), open(ref)
	perturbed := make([]*side, perturbedRuns)
	for k := range perturbed {
		perturbed[k] = open(ref)
		perturb(t, perturbed[k].m, tol.Rounding, sc.Seed+uint64(k)+1)
	}
	cfg := g.m.Config()
	t.Logf("U-Net %v, %d parameters, batch %d × %v, loss %q, optimiser %q, on %s vs %s",
		cfg.Features, g.m.NumParams(), sc.Batch, sc.Patch, sc.Loss.Name, sc.Optim.Name, dev.Name(), ref.Name())
	sides := append([]*side{g, c}, perturbed...)
	for step := 0; step < sc.Steps; step++ {
		xs, ys := Batch(sc.Seed+uint64(step), sc.Batch, cfg.InChannels, max(cfg.NumClasses, 2), sc.Patch)
		res := make([]nn.StepResult, len(sides))
		for i, s := range sides {
			x := upload(t, s.dev, g.l.WS.InputShape(), xs)
			y := upload(t, s.dev, g.l.WS.LabelShape(), ys)
			r, err := s.l.Step(x, y, lr)
			if err != nil {
				t.Fatalf("%s step %d: %v", s.dev.Name(), step, err)
			}
			res[i] = r
			s.dev.Free(x)
			s.dev.Free(y)
		}
		what := fmt.Sprintf("step %d", step)
		relClose(t, dev.Name(), what+" loss", res[0].Loss.Total, res[1].Loss.Total, tol.Loss)
		relClose(t, dev.Name(), what+" gradient norm", res[0].GradNorm, res[1].GradNorm, tol.Step)
		export := func(s *side, params bool) []nn.HostTensor {
			f := nn.ExportGrads
			if params {
				f = nn.ExportParams
			}
			h, err := f(s.dev, s.m.Params())
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		for _, params := range []bool{false, true} {
			got, want := export(g, params), export(c, params)
			floor := gradientFloor(dev, tol)
			if params {
				floor = 1e-3
			}
			var spread []float64
			for _, p := range perturbed {
				spread = maxInto(spread, relErrors(export(p, params), want, floor))
			}
			if !params {
				normWise(t, dev.Name(), what+" gradient", got, want, tol, floor, spread, nil)
				continue
			}
			normWise(t, dev.Name(), what+" weights after the update", got, want, tol, floor, spread, noiseGradients(t, dev.Name(), export(c, false)))
		}
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
}

// perturbedRuns is how many perturbed CPU copies measure the rounding
// spread; spreadFactor is how far beyond that spread a device may go.
const (
	perturbedRuns = 2
	spreadFactor  = 4
)

// perturb multiplies every parameter of m by 1 + u·rel, u uniform in
// [−1, 1) from seed.
func perturb(t *testing.T, m *nn.UNet, rel float64, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	w, err := nn.ExportParams(m.Device(), m.Params())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range w {
		for i := range h.Data {
			h.Data[i] *= float32(1 + (2*r.Float64()-1)*rel)
		}
	}
	if err := nn.ImportParams(m.Device(), m.Params(), w); err != nil {
		t.Fatal(err)
	}
}

func maxInto(acc, v []float64) []float64 {
	if acc == nil {
		acc = make([]float64, len(v))
	}
	for i := range v {
		acc[i] = max(acc[i], v[i])
	}
	return acc
}

func relClose(t *testing.T, dev, what string, got, want, tol float64) {
	t.Helper()
	e := math.Abs(got-want) / max(math.Abs(want), 1e-12)
	t.Logf("%s vs cpu: %s %.6g vs %.6g, relative error %.2g (tol %g)", dev, what, got, want, e, tol)
	if !(e <= tol) {
		t.Errorf("%s: %s %v, cpu %v: relative error %.3g > %g", dev, what, got, want, e, tol)
	}
}

// relErrors returns each tensor's relative L2 error ‖got − want‖ / ‖want‖.
// Some tensors are legitimately almost zero on both devices — the gradient
// of a conv bias followed by instance norm is zero in exact arithmetic (the
// mean subtraction cancels it), so both devices hold rounding noise there —
// so errors are relative to max(‖want‖, floor·‖all of want‖), floor
// (gradientFloor) growing with the device's rounding: a device that stores
// activation gradients in bf16 sums that bias gradient from values
// rounded by 2⁻⁹, whose noise no longer cancels to float32's.
func relErrors(got, want []nn.HostTensor, floorRel float64) []float64 {
	var all float64
	for i := range want {
		for _, v := range want[i].Data {
			all += float64(v) * float64(v)
		}
	}
	floor := floorRel * math.Sqrt(all)
	errs := make([]float64, len(want))
	for i := range want {
		var num, den float64
		for j := range want[i].Data {
			d := float64(got[i].Data[j]) - float64(want[i].Data[j])
			num += d * d
			den += float64(want[i].Data[j]) * float64(want[i].Data[j])
		}
		errs[i] = math.Sqrt(num) / max(math.Sqrt(den), floor, 1e-30)
	}
	return errs
}

// gradientFloor returns relErrors' floor for the gradients of dev with
// tolerances tol: 1e-3, or its rounding (Tolerances.Rounding) where that
// is coarser and dev stores activation gradients narrower than float32
// (their rounding is what lifts the noise floor; a bf16 device with
// float32 gradients keeps 1e-3). Weights, float32 master copies moved by
// lr times the gradient, keep 1e-3.
func gradientFloor(dev nn.Device, tol Tolerances) float64 {
	if g, ok := dev.(nn.ActivationGradientAllocator); ok && g.ActivationGradientBytes() < 4 {
		return max(1e-3, tol.Rounding)
	}
	return 1e-3
}

// normWise compares parameter tensors by relative L2 error (relErrors),
// logging the worst one. A tensor passes within tol.Step, or within
// spreadFactor × spread[i], the CPU's own difference under perturbations
// of the size of the device's rounding (UNetStep); those that need the
// second bound are listed.
func normWise(t *testing.T, dev, what string, got, want []nn.HostTensor, tol Tolerances, floor float64, spread []float64, skip map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, cpu %d", what, len(got), len(want))
	}
	for i := range got {
		if len(got[i].Data) != len(want[i].Data) {
			t.Fatalf("%s: %s has %d values, cpu %d", what, got[i].Name, len(got[i].Data), len(want[i].Data))
		}
	}
	errs := relErrors(got, want, floor)
	worst, worstName := 0.0, ""
	var sensitive []string
	for i, e := range errs {
		name := got[i].Name
		if skip[name] {
			continue
		}
		if math.IsNaN(e) || e > worst {
			worst, worstName = e, name
		}
		s := 0.0
		if spread != nil {
			s = spread[i]
		}
		switch {
		case e <= tol.Step:
		case e <= spreadFactor*s:
			sensitive = append(sensitive, fmt.Sprintf("%s %.2g (cpu %.2g)", name, e, s))
		default:
			t.Errorf("%s: %s of %s: relative L2 error %.3g > %g and > %d × %.3g, the cpu's own spread under %.0e perturbations",
				dev, what, name, e, tol.Step, spreadFactor, s, tol.Rounding)
		}
	}
	t.Logf("%s vs cpu: %s: %d tensors (%d skipped), worst relative L2 error %.2g (%s), tol %g", dev, what, len(got)-len(skip), len(skip), worst, worstName, tol.Step)
	if len(sensitive) > 0 {
		t.Logf("%s vs cpu: %s: %d tensors beyond tol but within %d× the cpu's own spread under %.0e perturbations of its weights (rounding crossed an activation's kink): %s",
			dev, what, len(sensitive), spreadFactor, tol.Rounding, strings.Join(sensitive, ", "))
	}
}

// noiseGradients returns the parameters whose CPU gradient is rounding
// noise: ‖g‖ <= 1e-5·‖all gradients‖. They are the biases of convolutions
// followed by instance norm, whose exact gradient is zero. SGD moves them
// by lr·noise (negligible), but Adam normalises the noise to steps of
// about ±lr whose signs are the noise's, so after an AdamW step those
// weights legitimately differ between devices; their updated values are
// not compared (their gradients are, against the floor of normWise).
func noiseGradients(t *testing.T, dev string, grads []nn.HostTensor) map[string]bool {
	var all float64
	norms := make([]float64, len(grads))
	for i, g := range grads {
		for _, v := range g.Data {
			norms[i] += float64(v) * float64(v)
		}
		all += norms[i]
	}
	noise := map[string]bool{}
	var names []string
	for i, g := range grads {
		if math.Sqrt(norms[i]) <= 1e-5*math.Sqrt(all) {
			noise[g.Name] = true
			names = append(names, fmt.Sprintf("%s (%.1e)", g.Name, math.Sqrt(norms[i]/all)))
		}
	}
	if len(names) > 0 {
		t.Logf("%s vs cpu: %d parameters have a rounding-noise gradient (‖g‖/‖all‖ shown), their updated values are not compared: %s",
			dev, len(names), strings.Join(names, ", "))
	}
	return noise
}
