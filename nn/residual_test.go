package nn_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// residualCases are the two networks of testdata/make_resenc_fixture.py
// (nnU-Net's ResidualEncoderUNet from dynamic-network-architectures):
// case a with pooled projections, pooling-only skips and deep
// supervision; case b with a projection without pooling, anisotropic
// kernels and strides, no conv biases and two decoder convs in a stage.
func residualCases() map[string]config.Model {
	a := config.Default().Model
	a.NumClasses, a.Features = 3, []int{4, 8, 8}
	a.Strides = [][3]int{{1, 1, 1}, {2, 2, 2}, {2, 2, 2}}
	a.Encoder, a.BlocksPerLevel, a.DecoderConvs, a.DeepSupervision = config.EncoderResidual, []int{1, 2, 2}, 1, true

	b := config.Default().Model
	b.InChannels, b.NumClasses, b.Features = 2, 2, []int{4, 6, 8}
	b.KernelSizes = [][3]int{{1, 3, 3}, {3, 3, 3}, {3, 3, 3}}
	b.Strides = [][3]int{{1, 1, 1}, {1, 1, 1}, {1, 2, 2}}
	b.Encoder, b.BlocksPerLevel, b.ConvBias = config.EncoderResidual, []int{2, 1, 2}, false
	b.DecoderConvs = 2
	return map[string]config.Model{"a": a, "b": b}
}

// nnunetName maps a ResidualEncoderUNet state-dict key to voxtrain's
// parameter name for a network of L levels ("" for a key voxtrain has no
// parameter for: the seg layers of stages without deep supervision).
func nnunetName(key string, levels int, deepSup bool) string {
	for _, r := range []struct{ re, to string }{
		{`^encoder\.stem\.convs\.0\.conv\.(weight|bias)$`, "stem.0.$1"},
		{`^encoder\.stem\.convs\.0\.norm\.(weight|bias)$`, "stem.1.$1"},
		{`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.(conv[12])\.conv\.(weight|bias)$`, "enc.$1.$2.$3.0.$4"},
		{`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.(conv[12])\.norm\.(weight|bias)$`, "enc.$1.$2.$3.1.$4"},
		{`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.skip\.[01]\.conv\.weight$`, "enc.$1.$2.skip.0.weight"},
		{`^encoder\.stages\.(\d+)\.blocks\.(\d+)\.skip\.[01]\.norm\.(weight|bias)$`, "enc.$1.$2.skip.1.$3"},
		{`^decoder\.stages\.(\d+)\.convs\.(\d+)\.conv\.(weight|bias)$`, "dec.$1.$2.0.$3"},
		{`^decoder\.stages\.(\d+)\.convs\.(\d+)\.norm\.(weight|bias)$`, "dec.$1.$2.1.$3"},
		{`^decoder\.transpconvs\.(\d+)\.(weight|bias)$`, "up.$1.$2"},
	} {
		if re := regexp.MustCompile(r.re); re.MatchString(key) {
			return re.ReplaceAllString(key, r.to)
		}
	}
	var s int
	var rest string
	if _, err := fmt.Sscanf(key, "decoder.seg_layers.%d.%s", &s, &rest); err == nil {
		switch {
		case s == levels-2:
			return "head." + rest
		case deepSup:
			return fmt.Sprintf("ds.%d.%s", s, rest)
		}
		return ""
	}
	panic("unknown key " + key)
}

// TestResidualEncoderMatchesPyTorch loads the fixture's weights into a
// residual-encoder U-Net and holds its outputs and every parameter's
// gradient (of Σ outputs·R for the fixture's R) to nnU-Net's network.
func TestResidualEncoderMatchesPyTorch(t *testing.T) {
	fx := testutil.ReadSafetensors(t, "testdata/resenc.safetensors")
	for name, cfg := range residualCases() {
		t.Run(name, func(t *testing.T) {
			dev := cpu.New(cpu.Options{})
			m, err := nn.NewUNet(dev, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			L := len(cfg.Features)
			var init []nn.HostTensor
			grads := map[string]nn.HostTensor{}
			for key, ht := range fx {
				k, ok := strings.CutPrefix(key, name+".init.")
				if !ok {
					continue
				}
				vn := nnunetName(k, L, cfg.DeepSupervision)
				if vn == "" {
					continue
				}
				ht.Name = vn
				init = append(init, ht)
				g := fx[name+".grad."+k]
				g.Name = vn
				grads[vn] = g
			}
			// nnU-Net's transposed convs have a bias only with conv_bias;
			// voxtrain's always: zero, and its gradient unchecked.
			for _, p := range m.Params() {
				if _, ok := grads[p.Name]; !ok && strings.HasPrefix(p.Name, "up.") && strings.HasSuffix(p.Name, ".bias") && !cfg.ConvBias {
					init = append(init, nn.HostTensor{Name: p.Name, Shape: p.TorchShape, Data: make([]float32, p.TorchShape.Len())})
				}
			}
			if len(init) != len(m.Params()) {
				t.Fatalf("fixture gives %d parameters, the model has %d", len(init), len(m.Params()))
			}
			if err := nn.ImportParams(dev, m.Params(), init); err != nil {
				t.Fatal(err)
			}
			x := fx[name+".input"]
			ws, err := m.NewWorkspace(x.Shape[0], [3]int{x.Shape[2], x.Shape[3], x.Shape[4]}, true)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Free()
			outs := m.Forward(ws, upload(t, dev, x.Shape, x.Data))
			var dlogits []nn.Tensor
			for i, o := range outs {
				want := fx[fmt.Sprintf("%s.logits.%d", name, i)]
				if e := relErr(toNCDHW(t, dev, o), want.Data); e > 1e-5 {
					t.Errorf("logits %d: relative error %.2e > 1e-5", i, e)
				} else {
					t.Logf("logits %d: relative error %.2e", i, e)
				}
				r := fx[fmt.Sprintf("%s.dlogits.%d", name, i)]
				d := dev.Alloc(o.Shape())
				dev.NCDHWToNDHWC(upload(t, dev, r.Shape, r.Data), d)
				dlogits = append(dlogits, d)
			}
			m.Backward(ws, dlogits)
			got, err := nn.ExportGrads(dev, m.Params())
			if err != nil {
				t.Fatal(err)
			}
			worst, worstName := 0.0, ""
			for _, g := range got {
				want, ok := grads[g.Name]
				if !ok {
					continue // up.*.bias without conv_bias (above)
				}
				if !want.Shape.Equal(g.Shape) {
					t.Fatalf("%s: gradient shape %v, PyTorch %v", g.Name, g.Shape, want.Shape)
				}
				// A conv bias right before an instance norm has a zero
				// gradient (rounding noise in PyTorch; exactly 0 here).
				if strings.HasSuffix(g.Name, ".0.bias") && !strings.HasPrefix(g.Name, "up.") && !strings.HasPrefix(g.Name, "ds.") {
					for _, v := range want.Data {
						if v > 1e-4 || v < -1e-4 {
							t.Errorf("%s: PyTorch's gradient %v is not ~0", g.Name, v)
							break
						}
					}
					continue
				}
				if e := relErr(g.Data, want.Data); e > worst {
					worst, worstName = e, g.Name
				}
			}
			if worst > 1e-4 {
				t.Errorf("gradients differ from PyTorch's: worst %s, relative error %.2e > 1e-4", worstName, worst)
			}
			t.Logf("gradients: worst relative error %.2e (%s) over %d parameters", worst, worstName, len(got))
		})
	}
}
