package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// conv is a Conv3d (or, with transposed set, a ConvTranspose3d) layer's
// parameters and hyper-parameters.
type conv struct {
	w, b       *Param // b is nil without bias
	inC, outC  int
	k, s, p    [3]int
	transposed bool
}

// geom returns the layer's geometry for a batch of n inputs of spatial size
// in. For a transposed conv it is the geometry of the adjoint convolution,
// which maps the transposed conv's output (size out) back to its input.
func (c *conv) geom(n int, in [3]int) geom.Conv {
	return geom.Conv{N: n, InD: in[0], InH: in[1], InW: in[2], InC: c.inC, OutC: c.outC,
		KD: c.k[0], KH: c.k[1], KW: c.k[2], SD: c.s[0], SH: c.s[1], SW: c.s[2], PD: c.p[0], PH: c.p[1], PW: c.p[2]}
}

// tgeom returns a transposed conv's adjoint geometry for output size out.
func (c *conv) tgeom(n int, out [3]int) geom.Conv {
	return geom.Conv{N: n, InD: out[0], InH: out[1], InW: out[2], InC: c.outC, OutC: c.inC,
		KD: c.k[0], KH: c.k[1], KW: c.k[2], SD: c.s[0], SH: c.s[1], SW: c.s[2], PD: c.p[0], PH: c.p[1], PW: c.p[2]}
}

// block is one conv → instance norm → nonlinearity unit.
type block struct {
	conv        conv
	gamma, beta *Param // nil without norm
}

// UNet is a 3D U-Net built from a UNetConfig (PyTorch reference module:
// nn/testdata/make_fixtures.py, class UNet3D; parameter names are its
// state_dict keys).
type UNet struct {
	cfg    UNetConfig
	dev    Device
	params []*Param
	enc    [][]*block // [level][block]
	up     []*conv    // [stage]: ConvTranspose3d from level L-1-stage to L-2-stage
	dec    [][]*block // [stage][block]
	head   *conv
	ds     []*conv // [stage] deep-supervision heads, stages 0..L-3
	slope  float32
	eps    float32
}

// NewUNet builds a U-Net on dev with weights initialised from seed like
// nnU-Net (InitWeights_He(1e-2)). cfg gets its defaults applied.
func NewUNet(dev Device, cfg UNetConfig, seed uint64) (*UNet, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &UNet{cfg: cfg, dev: dev, slope: cfg.slope(), eps: float32(cfg.NormEps)}
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
		c := &conv{inC: in, outC: out, k: k, s: s, transposed: transposed}
		if transposed {
			c.w = newParam(prefix+".weight", ConvTransposeWeight, Shape{in, out, k[0], k[1], k[2]})
		} else {
			c.p = [3]int{(k[0] - 1) / 2, (k[1] - 1) / 2, (k[2] - 1) / 2}
			c.w = newParam(prefix+".weight", ConvWeight, Shape{out, in, k[0], k[1], k[2]})
		}
		if bias {
			c.b = newParam(prefix+".bias", Vector, Shape{out})
		}
		return c
	}
	newBlock := func(prefix string, in, out int, k, s [3]int) *block {
		b := &block{conv: *newConv(prefix+".0", in, out, k, s, *cfg.ConvBias, false)}
		if norm {
			b.gamma = newParam(prefix+".1.weight", Vector, Shape{out})
			b.gamma.initOne = true
			b.beta = newParam(prefix+".1.bias", Vector, Shape{out})
		}
		return b
	}

	prev := cfg.InChannels
	for l, f := range cfg.Features {
		var lvl []*block
		for k := 0; k < cfg.ConvsPerLevel; k++ {
			s := [3]int{1, 1, 1}
			in := f
			if k == 0 {
				s, in = cfg.Strides[l], prev
			}
			lvl = append(lvl, newBlock(fmt.Sprintf("enc.%d.%d", l, k), in, f, cfg.KernelSizes[l], s))
		}
		m.enc = append(m.enc, lvl)
		prev = f
	}
	for d := 0; d < L-1; d++ {
		l := L - 2 - d
		st := cfg.Strides[l+1]
		m.up = append(m.up, newConv(fmt.Sprintf("up.%d", d), cfg.Features[l+1], cfg.Features[l], st, st, true, true))
	}
	for d := 0; d < L-1; d++ {
		l := L - 2 - d
		f := cfg.Features[l]
		var stage []*block
		for k := 0; k < cfg.ConvsPerLevel; k++ {
			in := f
			if k == 0 {
				in = 2 * f
			}
			stage = append(stage, newBlock(fmt.Sprintf("dec.%d.%d", d, k), in, f, cfg.KernelSizes[l], [3]int{1, 1, 1}))
		}
		m.dec = append(m.dec, stage)
	}
	one := [3]int{1, 1, 1}
	m.head = newConv("head", cfg.Features[0], cfg.NumClasses, one, one, true, false)
	if cfg.DeepSupervision {
		for d := 0; d < L-2; d++ {
			l := L - 2 - d
			m.ds = append(m.ds, newConv(fmt.Sprintf("ds.%d", d), cfg.Features[l], cfg.NumClasses, one, one, true, false))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x766f787472616e))
	if err := initHe(dev, m.params, 1e-2, rng); err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns the model's configuration (defaults applied).
func (m *UNet) Config() UNetConfig { return m.cfg }

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

// blockBuf is the memory of one block for one batch shape.
type blockBuf struct {
	g     geom.Conv
	z     Tensor // conv output (nil without norm: then a holds it)
	a     Tensor // block output
	stats Tensor // (N, C, 2) mean, rstd
}

// Workspace holds the activations (and, for training, the gradient
// buffers) of a U-Net for one batch shape, allocated once so that a
// training step allocates no tensor memory.
type Workspace struct {
	m      *UNet
	n      int
	size   [3]int   // input spatial size
	sizes  [][3]int // spatial size per level
	train  bool
	x      Tensor // channels-last input when InChannels > 1
	in     Tensor // channels-last view of the last input
	enc    [][]blockBuf
	upG    []geom.Conv // adjoint geometry per stage
	up     []Tensor    // transposed-conv output per stage
	cat    []Tensor    // concat(up, skip) per stage
	dec    [][]blockBuf
	headG  geom.Conv
	dsG    []geom.Conv
	logits []Tensor // [level]: 0 = head, l ≥ 1 = deep supervision at level l

	ga, gb, gskip, gcat []Tensor // gradient buffers per level
}

// LevelSizes returns the spatial size of every level for an input of
// spatial size size, or an error if the size does not divide evenly
// through the strides (the decoder could not restore it).
func (m *UNet) LevelSizes(size [3]int) ([][3]int, error) {
	sizes := [][3]int{}
	cur := size
	for l, lvl := range m.enc {
		c := lvl[0].conv
		var next [3]int
		for a := 0; a < 3; a++ {
			next[a] = (cur[a]+2*c.p[a]-c.k[a])/c.s[a] + 1
			if next[a] < 1 {
				return nil, fmt.Errorf("patch %v too small for level %d", size, l)
			}
		}
		if l > 0 {
			for a := 0; a < 3; a++ {
				if next[a]*c.s[a] != cur[a] {
					return nil, fmt.Errorf("patch %v: axis %d has size %d at level %d, not divisible by the stride %d of level %d (each axis must be divisible by the product of the strides)", size, a, cur[a], l-1, c.s[a], l)
				}
			}
		}
		sizes = append(sizes, next)
		cur = next
	}
	return sizes, nil
}

// NewWorkspace allocates the buffers for batches of n samples of spatial
// size (D, H, W); with train false only what inference needs.
func (m *UNet) NewWorkspace(n int, size [3]int, train bool) (*Workspace, error) {
	if n < 1 {
		return nil, fmt.Errorf("batch size %d, want >= 1", n)
	}
	sizes, err := m.LevelSizes(size)
	if err != nil {
		return nil, err
	}
	dev := m.dev
	L := len(m.enc)
	ws := &Workspace{m: m, n: n, size: size, sizes: sizes, train: train}
	act := func(l, c int) Tensor { s := sizes[l]; return dev.Alloc(Shape{n, s[0], s[1], s[2], c}) }
	in := size
	if m.cfg.InChannels > 1 {
		ws.x = dev.Alloc(Shape{n, size[0], size[1], size[2], m.cfg.InChannels})
	}
	newBuf := func(b *block, in [3]int, l int) blockBuf {
		bb := blockBuf{g: b.conv.geom(n, in)}
		bb.a = act(l, b.conv.outC)
		if b.gamma != nil {
			bb.z = act(l, b.conv.outC)
			bb.stats = dev.Alloc(Shape{n, b.conv.outC, 2})
		}
		return bb
	}
	for l, lvl := range m.enc {
		var bufs []blockBuf
		for _, b := range lvl {
			bufs = append(bufs, newBuf(b, in, l))
			in = sizes[l]
		}
		ws.enc = append(ws.enc, bufs)
	}
	for d, u := range m.up {
		l := L - 2 - d
		g := u.tgeom(n, sizes[l])
		if g.OutD() != sizes[l+1][0] || g.OutH() != sizes[l+1][1] || g.OutW() != sizes[l+1][2] {
			return nil, fmt.Errorf("patch %v: transposed conv of stage %d gives %v from %v, skip has %v", size, d, sizes[l], sizes[l+1], sizes[l])
		}
		ws.upG = append(ws.upG, g)
		ws.up = append(ws.up, act(l, u.outC))
		ws.cat = append(ws.cat, act(l, 2*u.outC))
		var bufs []blockBuf
		for _, b := range m.dec[d] {
			bufs = append(bufs, newBuf(b, sizes[l], l))
		}
		ws.dec = append(ws.dec, bufs)
	}
	ws.logits = make([]Tensor, 1+len(m.ds))
	ws.headG = m.head.geom(n, sizes[0])
	ws.logits[0] = act(0, m.cfg.NumClasses)
	for d, h := range m.ds {
		l := L - 2 - d
		ws.dsG = append(ws.dsG, h.geom(n, sizes[l]))
		ws.logits[l] = act(l, m.cfg.NumClasses)
	}
	if train {
		for l, f := range m.cfg.Features {
			ws.ga = append(ws.ga, act(l, f))
			ws.gb = append(ws.gb, act(l, f))
			if l < L-1 {
				ws.gskip = append(ws.gskip, act(l, f))
				ws.gcat = append(ws.gcat, act(l, 2*f))
			}
		}
	}
	return ws, nil
}

// Free releases the workspace's memory.
func (ws *Workspace) Free() {
	dev := ws.m.dev
	free := func(ts ...Tensor) {
		for _, t := range ts {
			if t != nil {
				dev.Free(t)
			}
		}
	}
	freeBufs := func(bs [][]blockBuf) {
		for _, lvl := range bs {
			for _, b := range lvl {
				free(b.z, b.a, b.stats)
			}
		}
	}
	free(ws.x)
	freeBufs(ws.enc)
	freeBufs(ws.dec)
	free(ws.up...)
	free(ws.cat...)
	free(ws.logits...)
	free(ws.ga...)
	free(ws.gb...)
	free(ws.gskip...)
	free(ws.gcat...)
}

// Outputs returns the logits of the last Forward: [0] at full resolution
// (N, D, H, W, classes), then with deep supervision one per lower level,
// highest resolution first (nnU-Net's order).
func (ws *Workspace) Outputs() []Tensor { return ws.logits }

// OutputShapes returns the shapes of the outputs (see Outputs).
func (ws *Workspace) OutputShapes() []Shape {
	s := make([]Shape, len(ws.logits))
	for i, t := range ws.logits {
		s[i] = t.Shape().Clone()
	}
	return s
}

// InputShape returns the NCDHW input shape the workspace expects.
func (ws *Workspace) InputShape() Shape {
	return Shape{ws.n, ws.m.cfg.InChannels, ws.size[0], ws.size[1], ws.size[2]}
}

// LabelShape returns the (N, D, H, W) label shape of the workspace.
func (ws *Workspace) LabelShape() Shape {
	s := ws.InputShape()
	return Shape{s[0], s[2], s[3], s[4]}
}

// blockForward runs conv → norm → activation.
func (m *UNet) blockForward(b *block, bb *blockBuf, in Tensor) {
	var bias Tensor
	if b.conv.b != nil {
		bias = b.conv.b.W
	}
	if b.gamma != nil {
		m.dev.Conv3DForward(bb.g, in, b.conv.w.W, bias, bb.z)
		m.dev.InstanceNormActForward(bb.z, b.gamma.W, b.beta.W, bb.a, bb.stats, m.eps, m.slope)
		return
	}
	m.dev.Conv3DForward(bb.g, in, b.conv.w.W, bias, bb.a)
	if m.slope != 1 {
		m.dev.ActForward(bb.a, bb.a, m.slope)
	}
}

// blockBackward takes the gradient of the block's output in da (which it
// overwrites), accumulates nothing, sets the block's parameter gradients
// and, when dx is not nil, writes the gradient of the block's input to dx.
func (m *UNet) blockBackward(b *block, bb *blockBuf, in, da, dx Tensor) {
	if b.gamma != nil {
		m.dev.InstanceNormActBackward(bb.z, b.gamma.W, b.beta.W, bb.stats, da, da, b.gamma.G, b.beta.G, m.slope)
	} else if m.slope != 1 {
		m.dev.ActBackward(bb.a, da, da, m.slope)
	}
	convBackward(m.dev, &b.conv, bb.g, in, da, dx)
}

// convForward runs a plain conv layer.
func convForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	var bias Tensor
	if c.b != nil {
		bias = c.b.W
	}
	dev.Conv3DForward(g, in, c.w.W, bias, out)
}

// convBackward sets a plain conv layer's gradients from dy and writes the
// input gradient to dx when it is not nil.
func convBackward(dev Device, c *conv, g geom.Conv, in, dy, dx Tensor) {
	var db Tensor
	if c.b != nil {
		db = c.b.G
	}
	dev.Conv3DBackwardWeight(g, in, dy, c.w.G, db)
	if dx != nil {
		dev.Conv3DBackwardData(g, dy, c.w.W, dx)
	}
}

// convTForward runs a transposed conv layer.
func convTForward(dev Device, c *conv, g geom.Conv, in, out Tensor) {
	var b Tensor
	if c.b != nil {
		b = c.b.W
	}
	ConvTransposeForward(dev, g, in, c.w.W, b, out)
}

// convTBackward sets a transposed conv layer's gradients.
func convTBackward(dev Device, c *conv, g geom.Conv, in, dy, dx Tensor) {
	var db Tensor
	if c.b != nil {
		db = c.b.G
	}
	ConvTransposeBackward(dev, g, in, dy, c.w.W, dx, c.w.G, db)
}

// ConvTransposeForward computes a ConvTranspose3d, y = convT(x, w) + b, as
// the data gradient of its adjoint convolution g: g maps the transposed
// conv's output (g.InShape(): (N, D, H, W, Cout)) to its input
// (g.OutShape(): (N, d, h, w, Cin)), and w has g.WeightShape() = (Cin, kD,
// kH, kW, Cout), PyTorch's (Cin, Cout, kD, kH, kW) with Cout moved last.
// b may be nil.
func ConvTransposeForward(dev Device, g geom.Conv, x, w, b, y Tensor) {
	dev.Conv3DBackwardData(g, x, w, y)
	if b != nil {
		dev.AddChannelBias(y, b)
	}
}

// ConvTransposeBackward computes the gradients of ConvTransposeForward from
// dy: dw (overwritten) is the adjoint conv's weight gradient with input and
// output swapped, db (overwritten, may be nil) the channel sums of dy, and
// dx (overwritten, skipped when nil) the adjoint's forward applied to dy.
func ConvTransposeBackward(dev Device, g geom.Conv, x, dy, w, dx, dw, db Tensor) {
	dev.Conv3DBackwardWeight(g, dy, x, dw, nil)
	if db != nil {
		dev.ChannelSum(dy, db)
	}
	if dx != nil {
		dev.Conv3DForward(g, dy, w, nil, dx)
	}
}

// levelOutput returns the output of encoder level l.
func (ws *Workspace) levelOutput(l int) Tensor { b := ws.enc[l]; return b[len(b)-1].a }

// stageOutput returns the output of decoder stage d.
func (ws *Workspace) stageOutput(d int) Tensor { b := ws.dec[d]; return b[len(b)-1].a }

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
		ws.in = dev.View(x, Shape{want[0], want[2], want[3], want[4], 1})
	} else {
		dev.NCDHWToNDHWC(x, ws.x)
		ws.in = ws.x
	}
	cur := ws.in
	for l, lvl := range m.enc {
		for k, b := range lvl {
			m.blockForward(b, &ws.enc[l][k], cur)
			cur = ws.enc[l][k].a
		}
	}
	L := len(m.enc)
	for d, u := range m.up {
		l := L - 2 - d
		convTForward(dev, u, ws.upG[d], cur, ws.up[d])
		dev.ConcatChannels(ws.up[d], ws.levelOutput(l), ws.cat[d])
		cur = ws.cat[d]
		for k, b := range m.dec[d] {
			m.blockForward(b, &ws.dec[d][k], cur)
			cur = ws.dec[d][k].a
		}
		if d < len(m.ds) {
			convForward(dev, m.ds[d], ws.dsG[d], cur, ws.logits[l])
		}
	}
	convForward(dev, m.head, ws.headG, cur, ws.logits[0])
	return ws.logits
}

// Backward computes every parameter's gradient (overwriting G) from the
// gradients of the loss with respect to the outputs of the last Forward on
// ws (same shapes as ws.Outputs()). The dlogits tensors are not modified.
func (m *UNet) Backward(ws *Workspace, dlogits []Tensor) {
	if !ws.train {
		panic("nn.UNet.Backward: workspace was created for inference")
	}
	if len(dlogits) != len(ws.logits) {
		panic(fmt.Sprintf("nn.UNet.Backward: %d output gradients for %d outputs", len(dlogits), len(ws.logits)))
	}
	dev := m.dev
	L := len(m.enc)
	last := ws.levelOutput(0)
	if L > 1 {
		last = ws.stageOutput(L - 2)
	}
	convBackward(dev, m.head, ws.headG, last, dlogits[0], ws.ga[0])

	for d := L - 2; d >= 0; d-- {
		l := L - 2 - d
		if d < len(m.ds) {
			convBackward(dev, m.ds[d], ws.dsG[d], ws.stageOutput(d), dlogits[l], ws.gb[l])
			dev.Add(ws.ga[l], ws.gb[l])
		}
		da, other := ws.ga[l], ws.gb[l]
		for k := len(m.dec[d]) - 1; k >= 0; k-- {
			in, dx := ws.cat[d], ws.gcat[l]
			if k > 0 {
				in, dx = ws.dec[d][k-1].a, other
			}
			m.blockBackward(m.dec[d][k], &ws.dec[d][k], in, da, dx)
			da, other = other, da
		}
		dev.SplitChannels(ws.gcat[l], ws.ga[l], ws.gskip[l])
		stageIn := ws.levelOutput(l + 1)
		if d > 0 {
			stageIn = ws.stageOutput(d - 1)
		}
		convTBackward(dev, m.up[d], ws.upG[d], stageIn, ws.ga[l], ws.ga[l+1])
	}

	for l := L - 1; l >= 0; l-- {
		if l < L-1 {
			dev.Add(ws.ga[l], ws.gskip[l])
		}
		da, other := ws.ga[l], ws.gb[l]
		for k := len(m.enc[l]) - 1; k >= 0; k-- {
			var in, dx Tensor
			switch {
			case k > 0:
				in, dx = ws.enc[l][k-1].a, other
			case l > 0:
				in, dx = ws.levelOutput(l-1), ws.ga[l-1]
			default:
				in, dx = ws.in, nil
			}
			m.blockBackward(m.enc[l][k], &ws.enc[l][k], in, da, dx)
			da, other = other, da
		}
	}
}

// ForwardFLOPs returns the analytic FLOPs (2 × multiply-adds) of the
// convolutions, transposed convolutions and heads of one forward pass for
// the workspace's batch, counted like bench/torch_unet_step.py.
func (ws *Workspace) ForwardFLOPs() int64 {
	var macs int64
	for _, lvl := range ws.enc {
		for _, b := range lvl {
			macs += b.g.MACs()
		}
	}
	for d := range ws.dec {
		macs += ws.upG[d].MACs()
		for _, b := range ws.dec[d] {
			macs += b.g.MACs()
		}
	}
	macs += ws.headG.MACs()
	for _, g := range ws.dsG {
		macs += g.MACs()
	}
	return 2 * macs
}
