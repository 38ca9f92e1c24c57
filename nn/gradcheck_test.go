package nn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// data returns a CPU tensor's memory.
func data(t nn.Tensor) []float32 { return t.(*cpu.Tensor).Data() }

// randn returns n normal random values of standard deviation scale.
func randn(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// randomLabels returns labels (N, D, H, W) of uniformly random classes, so
// that at these sizes every class is present (Dice is smooth there).
func randomLabels(rng *rand.Rand, n, d, h, w, classes int) []float32 {
	l := make([]float32, n*d*h*w)
	for i := range l {
		l[i] = float32(rng.IntN(classes))
	}
	return l
}

// TestLossGradients checks every loss's logit gradient by finite differences.
func TestLossGradients(t *testing.T) {
	cases := []struct {
		name    string
		cfg     config.Loss
		classes int
		ds      bool
		ignore  bool // a quarter of the labels are loss.ignore_label (= classes)
		bits    bool // bit-packed multi-label bytes (dice_bce)
		// unknown are the two samples' unknown classes (dice_bce; nil:
		// none).
		unknown []uint8
	}{
		{"ce", loss("ce", nil), 3, false, false, false, nil},
		{"dice per sample", loss("dice", nil), 3, false, false, false, nil},
		{"dice batch with bg", loss("dice", func(l *config.Loss) { l.BatchDice, l.DoBackground = true, true }), 3, false, false, false, nil},
		{"dice_ce", loss("dice_ce", nil), 2, false, false, false, nil},
		{"dice_ce deep supervision", loss("dice_ce", nil), 3, true, false, false, nil},
		{"cldice", loss("cldice", func(l *config.Loss) { l.CEWeight = ptr(0.3) }), 2, false, false, false, nil},
		{"cldice 3 classes", loss("cldice", func(l *config.Loss) { l.SkeletonIters = 2 }), 3, false, false, false, nil},
		{"bce", loss("bce", func(l *config.Loss) { l.PosWeight = 2 }), 1, false, false, false, nil},
		{"bce deep supervision", loss("bce", nil), 1, true, false, false, nil},
		{"bce + cldice", loss("bce", func(l *config.Loss) { l.PosWeight, l.ClDiceWeight, l.SkeletonIters = 3, ptr(0.5), 2 }), 1, false, false, false, nil},
		{"bce + cldice deep supervision", loss("bce", func(l *config.Loss) { l.ClDiceWeight = ptr(1.0) }), 1, true, false, false, nil},
		{"ce ignore", loss("ce", func(l *config.Loss) { l.IgnoreLabel = ptr(3) }), 3, false, true, false, nil},
		{"dice batch with bg ignore", loss("dice", func(l *config.Loss) { l.BatchDice, l.DoBackground, l.IgnoreLabel = true, true, ptr(3) }), 3, false, true, false, nil},
		{"dice_ce ignore 255", loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = ptr(255) }), 2, false, true, false, nil},
		{"dice_ce deep supervision ignore", loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = ptr(3) }), 3, true, true, false, nil},
		{"dice_bce", loss("dice_bce", nil), 3, false, false, true, nil},
		{"dice_bce batch dice one class", loss("dice_bce", func(l *config.Loss) { l.BatchDice = true }), 1, false, false, true, nil},
		{"dice_bce ignore 255", loss("dice_bce", func(l *config.Loss) { l.IgnoreLabel, l.CEWeight = ptr(255), ptr(0.7) }), 3, false, true, true, nil},
		{"dice_bce deep supervision ignore", loss("dice_bce", func(l *config.Loss) { l.IgnoreLabel, l.BatchDice = ptr(255), true }), 2, true, true, true, nil},
		{"dice_bce unknown classes", loss("dice_bce", nil), 3, false, false, true, []uint8{0b010, 0b101}},
		{"dice_bce unknown classes batch dice ignore", loss("dice_bce", func(l *config.Loss) { l.IgnoreLabel, l.BatchDice = ptr(255), true }), 3, true, true, true, []uint8{0b110, 0b100}},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := cpu.New(cpu.Options{Threads: 2})
			rng := rand.New(rand.NewPCG(uint64(ci), 3))
			n, size := 2, [3]int{4, 6, 8}
			shapes := []nn.Shape{{n, size[0], size[1], size[2], c.classes}}
			if c.ds {
				shapes = append(shapes, nn.Shape{n, 2, 3, 4, c.classes}, nn.Shape{n, 1, 2, 2, c.classes})
			}
			crit, err := nn.NewCriterion(dev, c.cfg, shapes)
			if err != nil {
				t.Fatal(err)
			}
			var logits []nn.Tensor
			for _, s := range shapes {
				logits = append(logits, upload(t, dev, s, randn(rng, s.Len(), 1.5)))
			}
			lc := max(c.classes, 2)
			lab := randomLabels(rng, n, size[0], size[1], size[2], lc)
			if c.bits {
				// Any set of classes, overlaps included.
				lab = randomLabels(rng, n, size[0], size[1], size[2], 1<<c.classes)
			}
			if c.ignore {
				for i := range lab {
					if rng.IntN(4) == 0 {
						lab[i] = float32(*c.cfg.IgnoreLabel)
					}
				}
			}
			labels := upload(t, dev, nn.Shape{n, size[0], size[1], size[2]}, lab)
			if c.unknown != nil {
				if err := crit.AllowUnknown(); err != nil {
					t.Fatal(err)
				}
				crit.SetUnknown(c.unknown)
			}
			loss := func() float64 {
				v, err := crit.Compute(logits, labels)
				if err != nil {
					t.Fatal(err)
				}
				return v.Total
			}
			loss()
			for i, g := range crit.Grads() {
				ana := append([]float32(nil), data(g)...)
				if c.ds && i == len(shapes)-1 {
					for _, v := range ana {
						if v != 0 {
							t.Fatal("the lowest deep-supervision output has weight 0 but a gradient")
						}
					}
					continue
				}
				testutil.GradCheck{Eps: 1e-3, Tol: 1e-2, Samples: 60, Rand: rng}.Check(t, c.name, data(logits[i]), ana, loss)
			}
		})
	}
}

// TestUNetGradients checks every parameter's gradient of Σ r·outputs for
// small networks of several configurations.
func TestUNetGradients(t *testing.T) {
	cases := []struct {
		name string
		cfg  config.Model
		n    int
		size [3]int
	}{
		{"instance norm, leaky relu, deep supervision", model([]int{2, 3, 4}, func(m *config.Model) { m.DeepSupervision = true }), 2, [3]int{8, 8, 8}},
		{"no norm, relu, 2 inputs, anisotropic", model([]int{3, 4}, func(m *config.Model) {
			m.InChannels, m.NumClasses, m.Norm, m.Nonlinearity = 2, 3, "none", "relu"
			m.KernelSizes, m.Strides = [][3]int{{1, 3, 3}, {3, 3, 3}}, [][3]int{{1, 1, 1}, {1, 2, 2}}
		}), 1, [3]int{3, 6, 4}},
		{"3 convs per level, no bias, linear", model([]int{2, 2}, func(m *config.Model) {
			m.ConvsPerLevel, m.ConvBias, m.Nonlinearity = 3, false, "none"
		}), 1, [3]int{4, 4, 4}},
		// nnU-Net's residual encoder, without norm (with instance norms
		// the deeper network's float32 rounding puts the finite
		// differences' noise near the tolerance: nn/residual_test.go holds
		// that case to PyTorch's gradients): a projection without pooling
		// (level 1, stride 1), a pooling-only skip (level 2), deep
		// supervision.
		{"residual encoder, no norm, relu, pooling-only skip, deep supervision", model([]int{2, 3, 3}, func(m *config.Model) {
			m.Encoder, m.BlocksPerLevel, m.Norm, m.Nonlinearity, m.DeepSupervision = config.EncoderResidual, []int{1}, "none", "relu", true
			m.Strides = [][3]int{{1, 1, 1}, {1, 1, 1}, {2, 2, 2}}
		}), 1, [3]int{4, 4, 4}},
		// ... without norm (conv2 and the projection are bare convs), ReLU,
		// a projection without pooling (level 1 at stride 1).
		{"residual encoder, no norm, relu, projection without pooling", model([]int{2, 3, 4}, func(m *config.Model) {
			m.Encoder, m.BlocksPerLevel, m.Norm, m.Nonlinearity = config.EncoderResidual, []int{1}, "none", "relu"
			m.Strides = [][3]int{{1, 1, 1}, {1, 1, 1}, {2, 2, 2}}
		}), 1, [3]int{4, 4, 4}},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Reference convolutions (float64 accumulation) keep rounding
			// noise out of the finite differences.
			dev := cpu.New(cpu.Options{Threads: 2, ReferenceConv: true})
			rng := rand.New(rand.NewPCG(uint64(ci), 5))
			m, err := nn.NewUNet(dev, c.cfg, uint64(ci))
			if err != nil {
				t.Fatal(err)
			}
			// Perturb the norms' affine parameters and biases away from
			// their initial 1/0 so that every path is exercised.
			for _, p := range m.Params() {
				if p.Kind == nn.Vector {
					for i, v := range randn(rng, p.TorchShape.Len(), 0.2) {
						data(p.W)[i] += v
					}
				}
			}
			ws, err := m.NewWorkspace(c.n, c.size, true)
			if err != nil {
				t.Fatal(err)
			}
			x := upload(t, dev, ws.InputShape(), randn(rng, ws.InputShape().Len(), 1))
			var rs []nn.Tensor
			for _, s := range ws.OutputShapes() {
				rs = append(rs, upload(t, dev, s, randn(rng, s.Len(), 1)))
			}
			loss := func() float64 {
				var l float64
				for i, o := range m.Forward(ws, x) {
					l += testutil.Dot64(data(o), data(rs[i]))
				}
				return l
			}
			loss()
			m.Backward(ws, rs)
			norm := m.Config().Norm == "instance"
			var prev []float32
			for _, p := range m.Params() {
				ana := append([]float32(nil), data(p.G)...)
				if norm && (strings.HasPrefix(p.Name, "enc.") || strings.HasPrefix(p.Name, "dec.") || strings.HasPrefix(p.Name, "stem.")) && strings.HasSuffix(p.Name, ".0.bias") {
					// A conv bias followed by instance norm cannot change
					// the output: its gradient is 0 up to rounding (and a
					// finite difference measures only rounding noise).
					var g, w float64
					for _, v := range ana {
						g = max(g, math.Abs(float64(v)))
					}
					for _, v := range prev {
						w = max(w, math.Abs(float64(v)))
					}
					if g > 1e-4*w {
						t.Errorf("%s: gradient %.3g, want ~0 (weight gradients up to %.3g)", p.Name, g, w)
					}
					continue
				}
				prev = ana
				// Small steps: with many LeakyReLU units a larger step
				// crosses kinks; float32 rounding bounds it from below.
				testutil.GradCheck{Eps: 1e-4, Tol: 2e-2, Samples: 12, Rand: rng}.Check(t, p.Name, data(p.W), ana, loss)
			}
		})
	}
}

func newDev() nn.Device { return cpu.New(cpu.Options{}) }
