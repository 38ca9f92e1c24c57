package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/voxtrain/voxtrain/config"
)

// UNet is a 3D U-Net built from a config.Model (PyTorch reference module:
// nn/testdata/make_fixtures.py, class UNet3D; parameter names are its
// state_dict keys).
type UNet struct {
	cfg     config.Model
	dev     Device
	params  []*Param
	enc     [][]*block    // [level][block]; a residual encoder's are in stem and res
	stem    *block        // residual encoder: level 0's conv block before its residual blocks
	res     [][]*resBlock // residual encoder: [level][block]
	up      []*conv       // [stage]: ConvTranspose3d from level L-1-stage to L-2-stage
	dec     [][]*block    // [stage][block]
	head    *conv
	deepSup []*conv // [stage] deep-supervision heads, stages 0..L-3
	slope   float32
	eps     float32
}

// NewUNet builds a U-Net on dev with weights initialised from seed like
// nnU-Net (InitWeights_He(1e-2)); cfg is checked first (config.Model.Validate).
func NewUNet(dev Device, cfg config.Model, seed uint64) (*UNet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &UNet{cfg: cfg, dev: dev, slope: slope(cfg), eps: float32(cfg.NormEps)}
	L := len(cfg.Features)
	norm := cfg.Norm == "instance"

	newParam := func(name string, kind ParamKind, shape Shape) *Param {
		p := &Param{Name: name, Kind: kind, TorchShape: shape}
		p.W = dev.Alloc(p.DeviceShape())
		p.G = dev.Alloc(p.DeviceShape())
		m.params = append(m.params, p)
		return p
	}
	newConv := func(prefix string, in, out int, k, s [3]int, bias, transposed bool) *conv {
		c := &conv{inC: in, outC: out, kernel: k, stride: s, transposed: transposed}
		if transposed {
			c.weight = newParam(prefix+".weight", ConvTransposeWeight, Shape{in, out, k[0], k[1], k[2]})
		} else {
			c.pad = [3]int{(k[0] - 1) / 2, (k[1] - 1) / 2, (k[2] - 1) / 2}
			c.weight = newParam(prefix+".weight", ConvWeight, Shape{out, in, k[0], k[1], k[2]})
		}
		if bias {
			c.bias = newParam(prefix+".bias", Vector, Shape{out})
		}
		return c
	}
	newBlock := func(prefix string, in, out int, k, s [3]int, bias bool) *block {
		b := &block{conv: *newConv(prefix+".0", in, out, k, s, bias, false)}
		if norm {
			b.gamma = newParam(prefix+".1.weight", Vector, Shape{out})
			b.gamma.initOne = true
			b.beta = newParam(prefix+".1.bias", Vector, Shape{out})
		}
		return b
	}

	prev := cfg.InChannels
	if cfg.Residual() {
		m.stem = newBlock("stem", prev, cfg.Features[0], cfg.KernelSize(0), [3]int{1, 1, 1}, cfg.ConvBias)
		prev = cfg.Features[0]
	}
	for l, f := range cfg.Features {
		if cfg.Residual() {
			var lvl []*resBlock
			for k := 0; k < cfg.ResidualBlocks(l); k++ {
				s, in := [3]int{1, 1, 1}, f
				if k == 0 {
					s, in = cfg.Stride(l), prev
				}
				lvl = append(lvl, newResBlock(newBlock, fmt.Sprintf("enc.%d.%d", l, k), in, f, cfg.KernelSize(l), s, cfg.ConvBias))
			}
			m.res = append(m.res, lvl)
			prev = f
			continue
		}
		var lvl []*block
		for k := 0; k < cfg.ConvsPerLevel; k++ {
			s := [3]int{1, 1, 1}
			in := f
			if k == 0 {
				s, in = cfg.Stride(l), prev
			}
			lvl = append(lvl, newBlock(fmt.Sprintf("enc.%d.%d", l, k), in, f, cfg.KernelSize(l), s, cfg.ConvBias))
		}
		m.enc = append(m.enc, lvl)
		prev = f
	}
	for d := 0; d < L-1; d++ {
		l := L - 2 - d
		st := cfg.Stride(l + 1)
		m.up = append(m.up, newConv(fmt.Sprintf("up.%d", d), cfg.Features[l+1], cfg.Features[l], st, st, true, true))
	}
	for d := 0; d < L-1; d++ {
		l := L - 2 - d
		f := cfg.Features[l]
		var stage []*block
		for k := 0; k < cfg.DecoderConvsPerStage(); k++ {
			in := f
			if k == 0 {
				in = 2 * f
			}
			stage = append(stage, newBlock(fmt.Sprintf("dec.%d.%d", d, k), in, f, cfg.KernelSize(l), [3]int{1, 1, 1}, cfg.ConvBias))
		}
		m.dec = append(m.dec, stage)
	}
	one := [3]int{1, 1, 1}
	m.head = newConv("head", cfg.Features[0], cfg.NumClasses, one, one, true, false)
	if cfg.DeepSupervision {
		for d := 0; d < L-2; d++ {
			l := L - 2 - d
			m.deepSup = append(m.deepSup, newConv(fmt.Sprintf("ds.%d", d), cfg.Features[l], cfg.NumClasses, one, one, true, false))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x766f787472616e))
	if err := initHe(dev, m.params, 1e-2, rng); err != nil {
		return nil, err
	}
	for _, b := range m.blocks() {
		if p := b.normedBias(); p != nil {
			dev.Fill(p.G, 0) // its gradient, never written (layers.go)
		}
	}
	return m, nil
}

// blocks returns every conv block of the network: the encoder's (a
// residual encoder's stem and its blocks' convolutions and projections),
// then the decoder's.
func (m *UNet) blocks() []*block {
	var bs []*block
	for _, lvl := range m.enc {
		bs = append(bs, lvl...)
	}
	if m.stem != nil {
		bs = append(bs, m.stem)
	}
	for _, lvl := range m.res {
		for _, r := range lvl {
			bs = append(bs, r.conv1, r.conv2)
			if r.proj != nil {
				bs = append(bs, r.proj)
			}
		}
	}
	for _, st := range m.dec {
		bs = append(bs, st...)
	}
	return bs
}

// levels returns the number of encoder levels.
func (m *UNet) levels() int { return len(m.cfg.Features) }

// levelConv returns the first convolution of encoder level l, the one
// that carries the level's stride.
func (m *UNet) levelConv(l int) *conv {
	if m.res != nil {
		return &m.res[l][0].conv1.conv
	}
	return &m.enc[l][0].conv
}

// Config returns the model's configuration (defaults applied).
func (m *UNet) Config() config.Model { return m.cfg }

// Device returns the device the model lives on.
func (m *UNet) Device() Device { return m.dev }

// Params returns the parameters in PyTorch state_dict order.
func (m *UNet) Params() []*Param { return m.params }

// NumParams returns the number of learnable scalars.
func (m *UNet) NumParams() int {
	n := 0
	for _, p := range m.params {
		n += p.TorchShape.Len()
	}
	return n
}

// Free releases the model's parameter memory.
func (m *UNet) Free() {
	for _, p := range m.params {
		m.dev.Free(p.W)
		m.dev.Free(p.G)
	}
}

// Forward runs the network on x, a device tensor of shape
// ws.InputShape() = (N, C, D, H, W) (channels-first, as batches arrive), and
// returns the logits (see Workspace.Outputs).
func (m *UNet) Forward(ws *Workspace, x Tensor) []Tensor {
	want := ws.InputShape()
	if !x.Shape().Equal(want) {
		panic(fmt.Sprintf("nn.UNet.Forward: input shape %v, workspace expects %v", x.Shape(), want))
	}
	dev := m.dev
	if m.cfg.InChannels == 1 {
		// One channel: NCDHW and NDHWC are the same bytes.
		ws.input = dev.View(x, Shape{want[0], want[2], want[3], want[4], 1})
	} else {
		dev.NCDHWToNDHWC(x, ws.inputNDHWC)
		ws.input = ws.inputNDHWC
	}
	cur := ws.input
	for l, lvl := range m.enc {
		for k, b := range lvl {
			m.blockForward(b, &ws.enc[l][k], cur)
			cur = ws.enc[l][k].out
		}
	}
	if m.stem != nil {
		m.blockForward(m.stem, &ws.stem, cur)
		cur = ws.stem.out
	}
	for l, lvl := range m.res {
		for k, r := range lvl {
			m.resForward(r, &ws.res[l][k], cur)
			cur = ws.res[l][k].out()
		}
	}
	L := m.levels()
	for d, u := range m.up {
		l := L - 2 - d
		convTForward(dev, u, ws.upGeom[d], cur, ws.up[d])
		dev.ConcatChannels(ws.up[d], ws.levelOutput(l), ws.cat[d])
		cur = ws.cat[d]
		for k, b := range m.dec[d] {
			m.blockForward(b, &ws.dec[d][k], cur)
			cur = ws.dec[d][k].out
		}
		if d < len(m.deepSup) {
			convForward(dev, m.deepSup[d], ws.deepSupGeom[d], cur, ws.logits[l])
		}
	}
	convForward(dev, m.head, ws.headGeom, cur, ws.logits[0])
	return ws.logits
}

// Backward computes every parameter's gradient (overwriting G) from the
// gradients of the loss with respect to the outputs of the last Forward on
// ws (same shapes as ws.Outputs()). The dlogits tensors are not modified.
func (m *UNet) Backward(ws *Workspace, dlogits []Tensor) {
	m.BackwardReady(ws, dlogits, nil)
}

// BackwardReady is Backward that calls ready (when not nil) with each
// layer's parameters as soon as the layer's backward ops are issued on
// the device's compute stream: their gradients are then final (no later
// op of the pass writes them), as soon as the stream gets there. Every
// parameter is reported exactly once, in the order backward reaches it —
// the head, then each decoder stage from the finest (its deep-supervision
// head, its blocks last first, its transposed conv), then the encoder's
// blocks from the deepest — which is close to, not exactly, the reverse
// of Params. A data-parallel job starts a bucket's all-reduce there
// (Learner.Sync) while the rest of the pass runs.
func (m *UNet) BackwardReady(ws *Workspace, dlogits []Tensor, ready func(params []*Param)) {
	if ready == nil {
		ready = func([]*Param) {}
	}
	if !ws.train {
		panic("nn.UNet.Backward: workspace was created for inference")
	}
	if len(dlogits) != len(ws.logits) {
		panic(fmt.Sprintf("nn.UNet.Backward: %d output gradients for %d outputs", len(dlogits), len(ws.logits)))
	}
	dev := m.dev
	L := m.levels()
	last := ws.levelOutput(0)
	if L > 1 {
		last = ws.stageOutput(L - 2)
	}
	convBackward(dev, m.head, ws.headGeom, last, dlogits[0], ws.actGrad[0], m.head.biasG())
	ready(m.head.params())

	for d := L - 2; d >= 0; d-- {
		l := L - 2 - d
		if d < len(m.deepSup) {
			convBackward(dev, m.deepSup[d], ws.deepSupGeom[d], ws.stageOutput(d), dlogits[l], ws.actGradSpare[l], m.deepSup[d].biasG())
			ready(m.deepSup[d].params())
			dev.Add(ws.actGrad[l], ws.actGradSpare[l])
		}
		da, other := ws.actGrad[l], ws.actGradSpare[l]
		for k := len(m.dec[d]) - 1; k >= 0; k-- {
			in, dx := ws.cat[d], ws.catGrad[l]
			if k > 0 {
				in, dx = ws.dec[d][k-1].out, other
			}
			m.blockBackward(m.dec[d][k], &ws.dec[d][k], in, da, dx)
			ready(m.dec[d][k].params())
			da, other = other, da
		}
		dev.SplitChannels(ws.catGrad[l], ws.actGrad[l], ws.skipGrad[l])
		stageIn := ws.levelOutput(l + 1)
		if d > 0 {
			stageIn = ws.stageOutput(d - 1)
		}
		convTBackward(dev, m.up[d], ws.upGeom[d], stageIn, ws.actGrad[l], ws.actGrad[l+1])
		ready(m.up[d].params())
	}

	if m.res != nil {
		m.residualEncoderBackward(ws, ready)
		return
	}
	for l := L - 1; l >= 0; l-- {
		if l < L-1 {
			dev.Add(ws.actGrad[l], ws.skipGrad[l])
		}
		da, other := ws.actGrad[l], ws.actGradSpare[l]
		for k := len(m.enc[l]) - 1; k >= 0; k-- {
			var in, dx Tensor
			switch {
			case k > 0:
				in, dx = ws.enc[l][k-1].out, other
			case l > 0:
				in, dx = ws.levelOutput(l-1), ws.actGrad[l-1]
			default:
				in, dx = ws.input, nil
			}
			m.blockBackward(m.enc[l][k], &ws.enc[l][k], in, da, dx)
			ready(m.enc[l][k].params())
			da, other = other, da
		}
	}
}

// residualEncoderBackward is BackwardReady's encoder part for a residual
// encoder: the levels from the deepest, each level's blocks last first,
// then the stem. As in the plain encoder, the blocks of a level alternate
// between actGrad and actGradSpare (the skip connection's share, in
// actGradSpare, has been added by then), and a level's first block writes
// its input's gradient to the level above's actGrad; resGrad and
// resGradSpare are each level's scratch for the blocks' two branches.
func (m *UNet) residualEncoderBackward(ws *Workspace, ready func([]*Param)) {
	L := m.levels()
	var da, other Tensor
	for l := L - 1; l >= 0; l-- {
		if l < L-1 {
			m.dev.Add(ws.actGrad[l], ws.skipGrad[l])
		}
		da, other = ws.actGrad[l], ws.actGradSpare[l]
		for k := len(m.res[l]) - 1; k >= 0; k-- {
			var in, dx Tensor
			switch {
			case k > 0:
				in, dx = ws.res[l][k-1].out(), other
			case l > 0:
				in, dx = ws.levelOutput(l-1), ws.actGrad[l-1]
			default:
				in, dx = ws.stem.out, other
			}
			m.resBackward(m.res[l][k], &ws.res[l][k], in, da, dx, ws.resGrad[l], ws.resGradSpare[l])
			ready(m.res[l][k].params())
			da, other = other, da
		}
	}
	m.blockBackward(m.stem, &ws.stem, ws.input, da, nil) // da: the stem output's gradient
	ready(m.stem.params())
}
