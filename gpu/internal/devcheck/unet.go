package devcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// StepCase is one U-Net training-step comparison.
type StepCase struct {
	Model nn.UNetConfig
	Loss  nn.LossConfig
	Optim nn.OptimConfig
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
func UNetStep(t *testing.T, dev nn.Device, sc StepCase, tol Tolerances) {
	if sc.Steps == 0 {
		sc.Steps = 2
	}
	if tol == (Tolerances{}) {
		tol = FP32
	}
	lr := sc.Optim.WithDefaults().LR
	ref := cpu.New(cpu.Options{})
	type side struct {
		dev nn.Device
		m   *nn.UNet
		l   *nn.Learner
		x   nn.Tensor
		y   nn.Tensor
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
	cfg := g.m.Config()
	t.Logf("U-Net %v, %d parameters, batch %d × %v, loss %q, optimiser %q, on %s vs %s",
		cfg.Features, g.m.NumParams(), sc.Batch, sc.Patch, sc.Loss.Name, sc.Optim.Name, dev.Name(), ref.Name())
	for step := 0; step < sc.Steps; step++ {
		xs, ys := Batch(sc.Seed+uint64(step), sc.Batch, cfg.InChannels, max(cfg.NumClasses, 2), sc.Patch)
		var res [2]nn.StepResult
		for i, s := range []*side{g, c} {
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
		gg, err := nn.ExportGrads(g.dev, g.m.Params())
		if err != nil {
			t.Fatal(err)
		}
		cg, err := nn.ExportGrads(c.dev, c.m.Params())
		if err != nil {
			t.Fatal(err)
		}
		normWise(t, dev.Name(), what+" gradient", gg, cg, tol.Step, nil)
		noise := noiseGradients(t, dev.Name(), cg)
		gw, err := nn.ExportParams(g.dev, g.m.Params())
		if err != nil {
			t.Fatal(err)
		}
		cw, err := nn.ExportParams(c.dev, c.m.Params())
		if err != nil {
			t.Fatal(err)
		}
		normWise(t, dev.Name(), what+" weights after the update", gw, cw, tol.Step, noise)
	}
	if err := dev.Err(); err != nil {
		t.Fatal(err)
	}
}

func relClose(t *testing.T, dev, what string, got, want, tol float64) {
	t.Helper()
	e := math.Abs(got-want) / max(math.Abs(want), 1e-12)
	t.Logf("%s vs cpu: %s %.6g vs %.6g, relative error %.2g (tol %g)", dev, what, got, want, e, tol)
	if !(e <= tol) {
		t.Errorf("%s: %s %v, cpu %v: relative error %.3g > %g", dev, what, got, want, e, tol)
	}
}

// normWise compares parameter tensors by relative L2 error, logging the
// worst one. Some tensors are legitimately almost zero on both devices —
// the gradient of a conv bias followed by instance norm is zero in exact
// arithmetic (the mean subtraction cancels it), so both devices hold
// rounding noise there — so errors are relative to max(‖want‖, 1e-3·‖all
// of want‖).
func normWise(t *testing.T, dev, what string, got, want []nn.HostTensor, tol float64, skip map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, cpu %d", what, len(got), len(want))
	}
	var all float64
	for i := range want {
		for _, v := range want[i].Data {
			all += float64(v) * float64(v)
		}
	}
	floor := 1e-3 * math.Sqrt(all)
	worst, worstName := 0.0, ""
	for i := range got {
		if skip[got[i].Name] {
			continue
		}
		var num, den float64
		for j := range got[i].Data {
			d := float64(got[i].Data[j]) - float64(want[i].Data[j])
			num += d * d
			den += float64(want[i].Data[j]) * float64(want[i].Data[j])
		}
		e := math.Sqrt(num) / max(math.Sqrt(den), floor, 1e-30)
		if math.IsNaN(e) || e > worst {
			worst, worstName = e, got[i].Name
		}
		if !(e <= tol) {
			t.Errorf("%s: %s of %s: relative L2 error %.3g > %g (‖cpu‖ %.3g, floor %.3g)", dev, what, got[i].Name, e, tol, math.Sqrt(den), floor)
		}
	}
	t.Logf("%s vs cpu: %s: %d tensors (%d skipped), worst relative L2 error %.2g (%s), tol %g", dev, what, len(got)-len(skip), len(skip), worst, worstName, tol)
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
