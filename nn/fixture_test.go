package nn_test

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// withPrefix returns the tensors under prefix, renamed without it.
func withPrefix(ts map[string]nn.HostTensor, prefix string) []nn.HostTensor {
	var out []nn.HostTensor
	for name, t := range ts {
		if strings.HasPrefix(name, prefix) {
			t.Name = strings.TrimPrefix(name, prefix)
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// relErr returns max|a−b| / max|b|.
func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = max(num, math.Abs(float64(a[i])-float64(b[i])))
		den = max(den, math.Abs(float64(b[i])))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// upload returns a new device tensor holding data.
func upload(t *testing.T, dev nn.Device, shape nn.Shape, data []float32) nn.Tensor {
	t.Helper()
	x := dev.Alloc(shape)
	if err := dev.Upload(dev.ComputeStream(), x, data); err != nil {
		t.Fatal(err)
	}
	return x
}

// download returns a tensor's contents.
func download(t *testing.T, dev nn.Device, x nn.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Shape().Len())
	if err := dev.Download(dev.ComputeStream(), out, x); err != nil {
		t.Fatal(err)
	}
	dev.ComputeStream().Synchronize()
	return out
}

// toNCDHW downloads a channels-last tensor in channels-first order.
func toNCDHW(t *testing.T, dev nn.Device, x nn.Tensor) []float32 {
	s := x.Shape()
	y := dev.Alloc(nn.Shape{s[0], s[4], s[1], s[2], s[3]})
	defer dev.Free(y)
	dev.NDHWCToNCDHW(x, y)
	return download(t, dev, y)
}

// fixtureCase describes one UNet fixture of make_fixtures.py.
type fixtureCase struct {
	file  string
	model config.Model
	loss  config.Loss
	optim config.Optim
}

func fixtureCases() []fixtureCase {
	return []fixtureCase{
		{
			file:  "testdata/unet_sgd.safetensors",
			model: model([]int{4, 8, 8}, func(m *config.Model) { m.NumClasses = 3 }),
			loss:  loss("dice_ce", nil),
			optim: optim("sgd", func(o *config.Optim) { o.Schedule.Name = "constant" }),
		},
		{
			file: "testdata/unet_adamw_ds.safetensors",
			model: model([]int{4, 4, 8, 8}, func(m *config.Model) {
				m.InChannels, m.NumClasses, m.Nonlinearity, m.ConvBias, m.DeepSupervision = 2, 2, "relu", false, true
				m.KernelSizes = [][3]int{{1, 3, 3}, {3, 3, 3}, {3, 3, 3}, {3, 3, 3}}
				m.Strides = [][3]int{{1, 1, 1}, {1, 2, 2}, {2, 2, 2}, {2, 2, 2}}
			}),
			loss:  loss("dice_ce", func(l *config.Loss) { l.BatchDice = true }),
			optim: optim("adamw", func(o *config.Optim) { o.LR, o.Schedule.Name = ptr(1e-3), "constant" }),
		},
	}
}

// TestUNetMatchesPyTorch loads PyTorch's initial weights into the U-Net,
// checks the forward outputs and the loss, then two optimiser steps'
// weights against PyTorch (testdata/make_fixtures.py).
func TestUNetMatchesPyTorch(t *testing.T) {
	for _, fc := range fixtureCases() {
		t.Run(fc.file, func(t *testing.T) {
			fx := testutil.ReadSafetensors(t, fc.file)
			dev := cpu.New(cpu.Options{})
			m, err := nn.NewUNet(dev, fc.model, 1)
			if err != nil {
				t.Fatal(err)
			}
			// Parameter names and order must be exactly PyTorch's state_dict.
			init := withPrefix(fx, "init.")
			if len(init) != len(m.Params()) {
				t.Fatalf("fixture has %d parameters, model %d", len(init), len(m.Params()))
			}
			if err := nn.ImportParams(dev, m.Params(), init); err != nil {
				t.Fatal(err)
			}
			x := fx["input"]
			y := fx["labels"]
			l, err := nn.NewLearner(m, x.Shape[0], [3]int{x.Shape[2], x.Shape[3], x.Shape[4]}, fc.loss, fc.optim)
			if err != nil {
				t.Fatal(err)
			}
			xd := upload(t, dev, x.Shape, x.Data)
			yd := upload(t, dev, y.Shape, y.Data)
			for step := 1; step <= 2; step++ {
				res, err := l.Step(xd, yd, fc.optim.BaseLR())
				if err != nil {
					t.Fatal(err)
				}
				if step == 1 {
					for i, o := range l.WS.Outputs() {
						want := fx["logits."+itoa(i)]
						got := toNCDHW(t, dev, o)
						if e := relErr(got, want.Data); e > 1e-4 {
							t.Errorf("logits %d: relative error %.2e > 1e-4", i, e)
						} else {
							t.Logf("logits %d: relative error %.2e", i, e)
						}
					}
					want := float64(fx["loss"].Data[0])
					if math.Abs(res.Loss.Total-want) > 1e-4*math.Abs(want) {
						t.Errorf("loss %.7f, PyTorch %.7f", res.Loss.Total, want)
					}
				}
				got, err := nn.ExportParams(dev, m.Params())
				if err != nil {
					t.Fatal(err)
				}
				prefix := "step" + itoa(step) + "."
				var worst, worstDelta float64
				var worstName string
				for _, p := range got {
					want := fx[prefix+p.Name]
					before := fx["init."+p.Name]
					if !want.Shape.Equal(p.Shape) {
						t.Fatalf("%s: shape %v, PyTorch %v", p.Name, p.Shape, want.Shape)
					}
					if e := relErr(p.Data, want.Data); e > worst {
						worst, worstName = e, p.Name
					}
					// The update itself (w − w0), a much stricter test than the weights.
					dg, dw := make([]float32, len(p.Data)), make([]float32, len(p.Data))
					for i := range dg {
						dg[i] = p.Data[i] - before.Data[i]
						dw[i] = want.Data[i] - before.Data[i]
					}
					// A conv bias right before an instance norm has a zero
					// gradient in exact arithmetic: its update is rounding
					// noise (plus weight decay) on both sides, so skip it.
					if (strings.HasPrefix(p.Name, "enc.") || strings.HasPrefix(p.Name, "dec.")) && strings.HasSuffix(p.Name, ".0.bias") && fc.model.Norm == "instance" {
						continue
					}
					worstDelta = max(worstDelta, relErr(dg, dw))
				}
				if worst > 1e-4 {
					t.Errorf("step %d: weights differ from PyTorch, worst %s relative error %.2e > 1e-4", step, worstName, worst)
				}
				if worstDelta > 1e-2 {
					t.Errorf("step %d: weight updates differ from PyTorch's by %.2e (relative, worst parameter)", step, worstDelta)
				}
				t.Logf("step %d: weights rel. error %.2e (%s), updates %.2e, loss %.6f", step, worst, worstName, worstDelta, res.Loss.Total)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(i int) string { return strconv.Itoa(i) }
