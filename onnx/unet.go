package onnx

import (
	"fmt"
	"sort"
	"strings"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nn"
)

const (
	// Opset is the version of the default ONNX operator set (ai.onnx) the
	// exported graphs import.
	Opset = 17
	// IRVersion is the IR version released with opset 17 (ONNX 1.12);
	// runtimes load files whose IR version they know.
	IRVersion = 8
)

// UNetOptions are ExportUNet's settings beyond the network.
type UNetOptions struct {
	// ProducerVersion is stored as the model's producer_version
	// (producer_name is "voxtrain").
	ProducerVersion string
	// Metadata are extra metadata_props, written after the exporter's own
	// (voxtrain.spatial_multiple).
	Metadata []Property
}

// ExportUNet returns the ONNX model of the U-Net that nn.NewUNet builds
// from cfg, with the weights params (PyTorch layout, named by state_dict
// keys: what nn.ExportParams returns). See the package doc for the graph.
//
// The graph mirrors nn.UNet.Forward layer by layer; the parameter names
// and shapes are checked against what cfg implies, so a checkpoint of
// another architecture is an error naming the parameter. The deep
// supervision heads (ds.*) are the only parameters left out.
func ExportUNet(cfg config.Model, params []nn.HostTensor, o UNetOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &unetBuilder{cfg: cfg, params: map[string]nn.HostTensor{}, used: map[string]bool{}}
	for _, p := range params {
		if _, dup := b.params[p.Name]; dup {
			return nil, fmt.Errorf("onnx export: parameter %q given twice", p.Name)
		}
		b.params[p.Name] = p
	}
	out := b.build()
	if b.err != nil {
		return nil, fmt.Errorf("onnx export: %w", b.err)
	}
	var unused []string
	for name := range b.params {
		if !b.used[name] && !(cfg.DeepSupervision && strings.HasPrefix(name, "ds.")) {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("onnx export: parameters %q are not part of the U-Net of this model config (a checkpoint of another architecture?)", unused)
	}

	// The spatial size each axis must be a multiple of: the product of
	// the strides down to the lowest level.
	mult := [3]int{1, 1, 1}
	for l := range cfg.Features {
		s := cfg.Stride(l)
		for a := range mult {
			mult[a] *= s[a]
		}
	}
	dyn := func(c int) []Dim {
		return []Dim{{Param: "N"}, {Value: int64(c)}, {Param: "D"}, {Param: "H"}, {Param: "W"}}
	}
	arch := fmt.Sprintf("%d convolution(s) per level", cfg.ConvsPerLevel)
	if cfg.Residual() {
		arch = fmt.Sprintf("residual encoder, %v residual blocks per level, %d convolution(s) per decoder stage", cfg.BlocksPerLevel, cfg.DecoderConvsPerStage())
	} else if cfg.DecoderConvsPerStage() != cfg.ConvsPerLevel {
		arch += fmt.Sprintf(", %d per decoder stage", cfg.DecoderConvsPerStage())
	}
	doc := fmt.Sprintf("voxtrain 3D U-Net (features %v, %s). "+
		"input: float32 (N, %d, D, H, W), preprocessed as in training; D, H, W multiples of %d, %d, %d. "+
		"logits: float32 (N, %d, D, H, W) of the full-resolution head (deep supervision heads are training-only and not exported).",
		cfg.Features, arch, cfg.InChannels, mult[0], mult[1], mult[2], cfg.NumClasses)
	b.g.Name = "voxtrain_unet"
	b.g.DocString = doc
	b.g.Inputs = []ValueInfo{{Name: "input", ElemType: Float, Shape: dyn(cfg.InChannels)}}
	b.g.Outputs = []ValueInfo{{Name: out, ElemType: Float, Shape: dyn(cfg.NumClasses)}}
	m := &Model{
		IRVersion:       IRVersion,
		ProducerName:    "voxtrain",
		ProducerVersion: o.ProducerVersion,
		DocString:       doc,
		Graph:           b.g,
		OpsetImports:    []OpsetID{{Domain: "", Version: Opset}},
		Metadata:        append([]Property{{Key: "voxtrain.spatial_multiple", Value: fmt.Sprintf("%d,%d,%d", mult[0], mult[1], mult[2])}}, o.Metadata...),
	}
	return m, nil
}

// unetBuilder appends the U-Net's nodes and initializers to a graph; the
// first problem is kept in err and later calls carry on harmlessly, so
// build reads as the forward pass it mirrors.
type unetBuilder struct {
	cfg    config.Model
	params map[string]nn.HostTensor
	used   map[string]bool
	g      Graph
	err    error
}

// build adds the whole network and returns the name of its output.
// Layer for layer it is nn.NewUNet's structure run as nn.UNet.Forward.
func (b *unetBuilder) build() string {
	cfg := b.cfg
	L := len(cfg.Features)
	cur, prev := "input", cfg.InChannels
	levelOut := make([]string, L)
	if cfg.Residual() {
		cur = b.block("stem", cur, prev, cfg.Features[0], cfg.KernelSize(0), [3]int{1, 1, 1}, cfg.ConvBias, true)
		prev = cfg.Features[0]
	}
	for l, f := range cfg.Features {
		if cfg.Residual() {
			for k := 0; k < cfg.ResidualBlocks(l); k++ {
				s, in := [3]int{1, 1, 1}, f
				if k == 0 {
					s, in = cfg.Stride(l), prev
				}
				cur = b.residual(fmt.Sprintf("enc.%d.%d", l, k), cur, in, f, cfg.KernelSize(l), s)
			}
			levelOut[l], prev = cur, f
			continue
		}
		for k := 0; k < cfg.ConvsPerLevel; k++ {
			s, in := [3]int{1, 1, 1}, f
			if k == 0 {
				s, in = cfg.Stride(l), prev
			}
			cur = b.block(fmt.Sprintf("enc.%d.%d", l, k), cur, in, f, cfg.KernelSize(l), s, cfg.ConvBias, true)
		}
		levelOut[l], prev = cur, f
	}
	for d := 0; d < L-1; d++ {
		l := L - 2 - d
		st := cfg.Stride(l + 1)
		up := fmt.Sprintf("up.%d", d)
		w := b.param(up+".weight", nn.Shape{cfg.Features[l+1], cfg.Features[l], st[0], st[1], st[2]})
		bias := b.param(up+".bias", nn.Shape{cfg.Features[l]})
		// Kernel = stride, no padding: output size = stride·input, the
		// skip connection's size when the input size divides evenly.
		cur = b.node("ConvTranspose", up+".convT", []string{cur, w, bias}, ints("kernel_shape", st[:]...), ints("strides", st[:]...))
		cur = b.node("Concat", fmt.Sprintf("dec.%d.cat", d), []string{cur, levelOut[l]}, Attribute{Name: "axis", Type: AttrInt, I: 1})
		for k := 0; k < cfg.DecoderConvsPerStage(); k++ {
			in := cfg.Features[l]
			if k == 0 {
				in *= 2
			}
			cur = b.block(fmt.Sprintf("dec.%d.%d", d, k), cur, in, cfg.Features[l], cfg.KernelSize(l), [3]int{1, 1, 1}, cfg.ConvBias, true)
		}
	}
	one := [3]int{1, 1, 1}
	w := b.param("head.weight", nn.Shape{cfg.NumClasses, cfg.Features[0], 1, 1, 1})
	bias := b.param("head.bias", nn.Shape{cfg.NumClasses})
	return b.conv("logits", []string{cur, w, bias}, one, one)
}

// block adds conv → instance norm → nonlinearity (nn's block; without
// the nonlinearity unless act) and returns its output's name.
func (b *unetBuilder) block(prefix, in string, inC, outC int, k, s [3]int, bias, act bool) string {
	cfg := b.cfg
	inputs := []string{in, b.param(prefix+".0.weight", nn.Shape{outC, inC, k[0], k[1], k[2]})}
	if bias {
		inputs = append(inputs, b.param(prefix+".0.bias", nn.Shape{outC}))
	}
	out := b.conv(prefix+".conv", inputs, k, s)
	if cfg.Norm == "instance" {
		gamma := b.param(prefix+".1.weight", nn.Shape{outC})
		beta := b.param(prefix+".1.bias", nn.Shape{outC})
		// nn normalises in float32 with float32(norm_eps), as here.
		out = b.node("InstanceNormalization", prefix+".norm", []string{out, gamma, beta},
			Attribute{Name: "epsilon", Type: AttrFloat, F: float32(cfg.NormEps)})
	}
	if !act {
		return out
	}
	return b.act(prefix+".act", out)
}

// residual adds nn's residual block (nnU-Net's BasicBlockD: two blocks,
// the second without nonlinearity, plus the skip — AveragePool of window
// = stride when it strides, a 1×1×1 conv without bias and a norm when the
// channels change — then the nonlinearity) and returns its output's name.
func (b *unetBuilder) residual(prefix, in string, inC, outC int, k, s [3]int) string {
	one := [3]int{1, 1, 1}
	h := b.block(prefix+".conv1", in, inC, outC, k, s, b.cfg.ConvBias, true)
	h = b.block(prefix+".conv2", h, outC, outC, k, one, b.cfg.ConvBias, false)
	skip := in
	if s != one {
		skip = b.node("AveragePool", prefix+".pool", []string{skip}, ints("kernel_shape", s[:]...), ints("strides", s[:]...))
	}
	if inC != outC {
		skip = b.block(prefix+".skip", skip, inC, outC, one, one, false, false)
	}
	return b.act(prefix+".act", b.node("Add", prefix+".add", []string{h, skip}))
}

// act adds the model's nonlinearity to in (nothing for none or a slope of
// 1) and returns its output's name.
func (b *unetBuilder) act(out, in string) string {
	cfg := b.cfg
	switch {
	case cfg.Nonlinearity == "relu":
		return b.node("Relu", out, []string{in})
	case cfg.Nonlinearity == "leaky_relu" && float32(cfg.NegativeSlope) != 1:
		// nn applies max(z, slope·z) with slope float32(negative_slope),
		// LeakyRelu's definition for slopes in [0, 1); slope 1 is the
		// identity, which nn skips too.
		return b.node("LeakyRelu", out, []string{in},
			Attribute{Name: "alpha", Type: AttrFloat, F: float32(cfg.NegativeSlope)})
	}
	return in
}

// conv adds a Conv with nn's "same" padding (k−1)/2 per side (kernels are
// odd).
func (b *unetBuilder) conv(out string, inputs []string, k, s [3]int) string {
	p := [6]int{(k[0] - 1) / 2, (k[1] - 1) / 2, (k[2] - 1) / 2}
	copy(p[3:], p[:3]) // ONNX pads: all the begins, then all the ends
	return b.node("Conv", out, inputs, ints("kernel_shape", k[:]...), ints("pads", p[:]...), ints("strides", s[:]...))
}

// node appends a node whose single output (and node name) is out.
func (b *unetBuilder) node(op, out string, inputs []string, attrs ...Attribute) string {
	b.g.Nodes = append(b.g.Nodes, Node{Inputs: inputs, Outputs: []string{out}, Name: out, OpType: op, Attrs: attrs})
	return out
}

// param adds the parameter name as an initializer, after checking that
// it exists with the shape the config implies, and returns its name.
func (b *unetBuilder) param(name string, shape nn.Shape) string {
	p, ok := b.params[name]
	switch {
	case b.err != nil:
	case !ok:
		b.err = fmt.Errorf("parameter %q missing (the checkpoint does not match its model config)", name)
	case !p.Shape.Equal(shape):
		b.err = fmt.Errorf("parameter %q: shape %v, the model config implies %v", name, p.Shape, shape)
	case len(p.Data) != shape.Len():
		b.err = fmt.Errorf("parameter %q: %d values for shape %v", name, len(p.Data), shape)
	case !b.used[name]:
		b.used[name] = true
		dims := make([]int64, len(shape))
		for i, d := range shape {
			dims[i] = int64(d)
		}
		b.g.Initializers = append(b.g.Initializers, FloatTensor(name, dims, p.Data))
	}
	return name
}

func ints(name string, vs ...int) Attribute {
	a := Attribute{Name: name, Type: AttrInts, Ints: make([]int64, len(vs))}
	for i, v := range vs {
		a.Ints[i] = int64(v)
	}
	return a
}
