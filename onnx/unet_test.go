package onnx

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

var update = flag.Bool("update", false, "rewrite the golden models and their inputs in testdata (then rerun testdata/make_ort_fixture.py)")

// fixture is a small U-Net with fixed weights, exported to
// testdata/NAME.onnx, and a fixed input (testdata/NAME.input.f32) on
// which onnxruntime's output is testdata/NAME.ort.f32 (raw little-endian
// float32, NCDHW; made by testdata/make_ort_fixture.py).
type fixture struct {
	name  string
	cfg   config.Model
	input [5]int // N, C, D, H, W
	seed  uint64
}

// The configs are written out in full, not derived from config.Default,
// so that a change of defaults does not change the golden files. Non-cubic
// inputs catch a spatial axis taken for another.
var fixtures = []fixture{
	// voxtrain's default block: conv (bias) → InstanceNorm (affine) →
	// LeakyReLU(0.01), two per level, stride 2.
	{name: "unet_small", seed: 1, input: [5]int{1, 1, 16, 12, 8}, cfg: config.Model{
		InChannels: 1, NumClasses: 3, Features: []int{4, 8}, ConvsPerLevel: 2,
		Norm: "instance", NormEps: 1e-5, Nonlinearity: "leaky_relu", NegativeSlope: 0.01, ConvBias: true,
	}},
	// The other branches: two input channels, anisotropic kernels and
	// strides, three levels, one conv per level, no norm, ReLU, no conv
	// bias, deep supervision (its heads left out), a batch of two.
	{name: "unet_variant", seed: 2, input: [5]int{2, 2, 8, 12, 16}, cfg: config.Model{
		InChannels: 2, NumClasses: 2, Features: []int{3, 4, 6}, ConvsPerLevel: 1,
		KernelSizes: [][3]int{{1, 3, 3}, {3, 3, 3}, {3, 1, 3}},
		Strides:     [][3]int{{1, 1, 1}, {1, 2, 2}, {2, 2, 2}},
		Norm:        "none", NormEps: 1e-5, Nonlinearity: "relu", ConvBias: false, DeepSupervision: true,
	}},
	// nnU-Net's residual encoder (ResEnc): a stem, residual blocks with a
	// pooled projection (level 1, 4 → 8 channels at stride 1×2×2) and a
	// pooling-only skip (level 2), one decoder conv per stage.
	{name: "unet_resenc", seed: 3, input: [5]int{1, 1, 8, 12, 16}, cfg: config.Model{
		InChannels: 1, NumClasses: 3, Features: []int{4, 8, 8}, ConvsPerLevel: 2,
		Strides: [][3]int{{1, 1, 1}, {1, 2, 2}, {2, 2, 2}},
		Encoder: config.EncoderResidual, BlocksPerLevel: []int{1, 2, 1}, DecoderConvs: 1,
		Norm: "instance", NormEps: 1e-5, Nonlinearity: "leaky_relu", NegativeSlope: 0.01, ConvBias: true,
	}},
}

func (fx fixture) path(suffix string) string { return filepath.Join("testdata", fx.name+suffix) }

// params returns fixed weights for fx's network in PyTorch layout: He
// normal weights, and biases and norm parameters away from their 0 and 1
// initial values so that a bias or scale taken for another shows. They
// come from the test's own generator, not nn's initialisation, so the
// golden files do not depend on it.
func (fx fixture) params(t *testing.T) []nn.HostTensor {
	t.Helper()
	net, err := nn.NewUNet(cpu.New(cpu.Options{Threads: 1}), fx.cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Free()
	rng := rand.New(rand.NewPCG(fx.seed, 0x6f6e6e78))
	var ps []nn.HostTensor
	for _, p := range net.Params() {
		h := nn.HostTensor{Name: p.Name, Shape: p.TorchShape.Clone(), Data: make([]float32, p.TorchShape.Len())}
		std, mean := 0.2, 0.0
		switch {
		case len(h.Shape) == 5:
			std = math.Sqrt(2 / float64(h.Shape[1]*h.Shape[2]*h.Shape[3]*h.Shape[4]))
		case strings.HasSuffix(p.Name, ".1.weight"): // a norm's scale
			mean = 1
		}
		for i := range h.Data {
			h.Data[i] = float32(mean + std*rng.NormFloat64())
		}
		ps = append(ps, h)
	}
	return ps
}

// inputData returns fx's fixed input, NCDHW.
func (fx fixture) inputData() []float32 {
	rng := rand.New(rand.NewPCG(fx.seed, 0x696e707574))
	n := fx.input[0] * fx.input[1] * fx.input[2] * fx.input[3] * fx.input[4]
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func (fx fixture) export(t *testing.T) []byte {
	t.Helper()
	m, err := ExportUNet(fx.cfg, fx.params(t), UNetOptions{ProducerVersion: "golden",
		Metadata: []Property{{Key: "voxtrain.fixture", Value: fx.name}}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Marshal()
}

// initializerParams returns the model's initializers as parameters.
func initializerParams(t *testing.T, m *Model) []nn.HostTensor {
	t.Helper()
	var params []nn.HostTensor
	for i := range m.Graph.Initializers {
		init := &m.Graph.Initializers[i]
		data, err := init.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		shape := make(nn.Shape, len(init.Dims))
		for j, d := range init.Dims {
			shape[j] = int(d)
		}
		params = append(params, nn.HostTensor{Name: init.Name, Shape: shape, Data: data})
	}
	return params
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Fatalf("%s: %d bytes, not whole float32s", path, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func writeF32(t *testing.T, path string, data []float32) {
	t.Helper()
	b := make([]byte, 0, 4*len(data))
	for _, v := range data {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGolden: exporting each fixture network gives the committed .onnx
// file byte for byte (go test ./onnx -run TestGolden -update rewrites
// them and the inputs; then rerun testdata/make_ort_fixture.py), the file
// decodes and re-encodes to the same bytes and passes Check.
func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			got := fx.export(t)
			if *update {
				if err := os.WriteFile(fx.path(".onnx"), got, 0o644); err != nil {
					t.Fatal(err)
				}
				writeF32(t, fx.path(".input.f32"), fx.inputData())
			}
			want, err := os.ReadFile(fx.path(".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Fatalf("export differs from %s (%d vs %d bytes) from byte %d; rerun with -update if the change is meant, then make_ort_fixture.py",
					fx.path(".onnx"), len(got), len(want), i)
			}
			m, err := Unmarshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Marshal(), want) {
				t.Error("decoding and re-encoding the golden file changes its bytes")
			}
		})
	}
}

// TestMatchesOnnxruntime runs each committed golden model's weights (read
// back from the .onnx file) on the CPU device through the inference path
// (infer.DeviceNet: NCDHW in, converted to nn's NDHWC, logits back to
// NCDHW) on the committed input, and requires onnxruntime's outputs
// within 1e-4 (relative, absolute below magnitude 1).
func TestMatchesOnnxruntime(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			raw, err := os.ReadFile(fx.path(".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Unmarshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			params := initializerParams(t, m)
			dev := cpu.New(cpu.Options{Threads: 2})
			net, err := nn.NewUNet(dev, fx.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer net.Free()
			// The exported graph holds every parameter but the deep
			// supervision heads: keep nn's own values for those.
			all, err := nn.ExportParams(dev, net.Params())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range all {
				if strings.HasPrefix(p.Name, "ds.") {
					params = append(params, p)
				}
			}
			if err := nn.ImportParams(dev, net.Params(), params); err != nil {
				t.Fatal(err)
			}
			n, patch := fx.input[0], [3]int{fx.input[2], fx.input[3], fx.input[4]}
			dn, err := infer.NewDeviceNet(net, n, patch)
			if err != nil {
				t.Fatal(err)
			}
			defer dn.Free()
			in := readF32(t, fx.path(".input.f32"))
			if len(in) != n*fx.input[1]*patch[0]*patch[1]*patch[2] {
				t.Fatalf("%s: %d values for input %v", fx.path(".input.f32"), len(in), fx.input)
			}
			want := readF32(t, fx.path(".ort.f32"))
			got := make([]float32, n*fx.cfg.NumClasses*patch[0]*patch[1]*patch[2])
			if len(want) != len(got) {
				t.Fatalf("%s: %d values, the network gives %d", fx.path(".ort.f32"), len(want), len(got))
			}
			if err := dn.Forward(n, in, got); err != nil {
				t.Fatal(err)
			}
			// testutil.CloseTo's rule: relative above magnitude 1, absolute below.
			var maxErr, maxAbs float64
			bad := 0
			for i, w := range want {
				e := math.Abs(float64(got[i])-float64(w)) / math.Max(1, math.Abs(float64(w)))
				if !(e <= 1e-4) {
					if bad++; bad <= 5 {
						t.Errorf("logit %d: voxtrain %v, onnxruntime %v", i, got[i], w)
					}
				}
				maxErr, maxAbs = max(maxErr, e), max(maxAbs, math.Abs(float64(w)))
			}
			t.Logf("largest error %.2g (relative above 1, absolute below) over %d logits up to %.3g; %d beyond 1e-4", maxErr, len(want), maxAbs, bad)
		})
	}
}

// TestExportRefuses: a checkpoint that does not fit its config is an
// error naming the parameter.
func TestExportRefuses(t *testing.T) {
	fx := fixtures[0]
	base := fx.params(t)
	edit := func(f func([]nn.HostTensor) []nn.HostTensor) []nn.HostTensor {
		ps := make([]nn.HostTensor, len(base))
		copy(ps, base)
		return f(ps)
	}
	for _, c := range []struct {
		name, want string
		params     []nn.HostTensor
	}{
		{"missing", `"head.bias" missing`, edit(func(ps []nn.HostTensor) []nn.HostTensor { return ps[:len(ps)-1] })},
		{"shape", `"enc.0.0.0.weight": shape (4, 1, 3, 3, 1)`, edit(func(ps []nn.HostTensor) []nn.HostTensor {
			ps[0].Shape = nn.Shape{4, 1, 3, 3, 1}
			return ps
		})},
		{"surplus", `["extra.weight"]`, edit(func(ps []nn.HostTensor) []nn.HostTensor {
			return append(ps, nn.HostTensor{Name: "extra.weight", Shape: nn.Shape{1}, Data: []float32{0}})
		})},
		{"twice", `"head.bias" given twice`, edit(func(ps []nn.HostTensor) []nn.HostTensor { return append(ps, ps[len(ps)-1]) })},
	} {
		_, err := ExportUNet(fx.cfg, c.params, UNetOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %s", c.name, err, c.want)
		}
	}
	bad := fx.cfg
	bad.Norm = "batch"
	if _, err := ExportUNet(bad, base, UNetOptions{}); err == nil || !strings.Contains(err.Error(), "model.norm") {
		t.Errorf("batch norm config: %v", err)
	}
}

// TestGraphStructure spells out the small fixture's graph: the operators
// in order, their attributes, the dynamic input and output and the
// metadata, so a change of the export shows here with its meaning, not
// only as different golden bytes.
func TestGraphStructure(t *testing.T) {
	fx := fixtures[0]
	m, err := ExportUNet(fx.cfg, fx.params(t), UNetOptions{ProducerVersion: "v"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, n := range m.Graph.Nodes {
		var attrs []string
		for _, a := range n.Attrs {
			switch a.Type {
			case AttrInts:
				attrs = append(attrs, fmt.Sprintf("%s=%v", a.Name, a.Ints))
			case AttrInt:
				attrs = append(attrs, fmt.Sprintf("%s=%d", a.Name, a.I))
			case AttrFloat:
				attrs = append(attrs, fmt.Sprintf("%s=%g", a.Name, a.F))
			}
		}
		ops = append(ops, fmt.Sprintf("%s(%s)%v->%s", n.OpType, strings.Join(n.Inputs, ","), attrs, n.Outputs[0]))
	}
	want := []string{
		"Conv(input,enc.0.0.0.weight,enc.0.0.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[1 1 1]]->enc.0.0.conv",
		"InstanceNormalization(enc.0.0.conv,enc.0.0.1.weight,enc.0.0.1.bias)[epsilon=1e-05]->enc.0.0.norm",
		"LeakyRelu(enc.0.0.norm)[alpha=0.01]->enc.0.0.act",
		"Conv(enc.0.0.act,enc.0.1.0.weight,enc.0.1.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[1 1 1]]->enc.0.1.conv",
		"InstanceNormalization(enc.0.1.conv,enc.0.1.1.weight,enc.0.1.1.bias)[epsilon=1e-05]->enc.0.1.norm",
		"LeakyRelu(enc.0.1.norm)[alpha=0.01]->enc.0.1.act",
		"Conv(enc.0.1.act,enc.1.0.0.weight,enc.1.0.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[2 2 2]]->enc.1.0.conv",
		"InstanceNormalization(enc.1.0.conv,enc.1.0.1.weight,enc.1.0.1.bias)[epsilon=1e-05]->enc.1.0.norm",
		"LeakyRelu(enc.1.0.norm)[alpha=0.01]->enc.1.0.act",
		"Conv(enc.1.0.act,enc.1.1.0.weight,enc.1.1.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[1 1 1]]->enc.1.1.conv",
		"InstanceNormalization(enc.1.1.conv,enc.1.1.1.weight,enc.1.1.1.bias)[epsilon=1e-05]->enc.1.1.norm",
		"LeakyRelu(enc.1.1.norm)[alpha=0.01]->enc.1.1.act",
		"ConvTranspose(enc.1.1.act,up.0.weight,up.0.bias)[kernel_shape=[2 2 2] strides=[2 2 2]]->up.0.convT",
		"Concat(up.0.convT,enc.0.1.act)[axis=1]->dec.0.cat",
		"Conv(dec.0.cat,dec.0.0.0.weight,dec.0.0.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[1 1 1]]->dec.0.0.conv",
		"InstanceNormalization(dec.0.0.conv,dec.0.0.1.weight,dec.0.0.1.bias)[epsilon=1e-05]->dec.0.0.norm",
		"LeakyRelu(dec.0.0.norm)[alpha=0.01]->dec.0.0.act",
		"Conv(dec.0.0.act,dec.0.1.0.weight,dec.0.1.0.bias)[kernel_shape=[3 3 3] pads=[1 1 1 1 1 1] strides=[1 1 1]]->dec.0.1.conv",
		"InstanceNormalization(dec.0.1.conv,dec.0.1.1.weight,dec.0.1.1.bias)[epsilon=1e-05]->dec.0.1.norm",
		"LeakyRelu(dec.0.1.norm)[alpha=0.01]->dec.0.1.act",
		"Conv(dec.0.1.act,head.weight,head.bias)[kernel_shape=[1 1 1] pads=[0 0 0 0 0 0] strides=[1 1 1]]->logits",
	}
	if strings.Join(ops, "\n") != strings.Join(want, "\n") {
		t.Errorf("graph:\n%s\nwant:\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}
	if m.IRVersion != 8 || len(m.OpsetImports) != 1 || m.OpsetImports[0] != (OpsetID{Version: 17}) || m.ProducerName != "voxtrain" || m.ProducerVersion != "v" {
		t.Errorf("model header: ir %d, opsets %v, producer %q %q", m.IRVersion, m.OpsetImports, m.ProducerName, m.ProducerVersion)
	}
	in, out := m.Graph.Inputs, m.Graph.Outputs
	dims := func(v ValueInfo) string { return fmt.Sprint(v.Shape) }
	if len(in) != 1 || in[0].Name != "input" || in[0].ElemType != Float || dims(in[0]) != "[{0 N} {1 } {0 D} {0 H} {0 W}]" ||
		len(out) != 1 || out[0].Name != "logits" || dims(out[0]) != "[{0 N} {3 } {0 D} {0 H} {0 W}]" {
		t.Errorf("inputs %+v, outputs %+v", in, out)
	}
	if len(m.Metadata) != 1 || m.Metadata[0] != (Property{"voxtrain.spatial_multiple", "2,2,2"}) {
		t.Errorf("metadata %v", m.Metadata)
	}
	// Weights in ONNX's layout, which is PyTorch's: the values handed in,
	// unpermuted, named by state_dict key (in first use, which is here
	// state_dict order).
	testutil.SameBits(t, "initializers vs parameters", initializerParams(t, m), fx.params(t))
}
