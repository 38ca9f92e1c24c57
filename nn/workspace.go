// A U-Net's memory for one batch shape: activations, gradient buffers and
// convolution geometries, allocated once (Workspace).

package nn

import (
	"fmt"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// blockBuf is the memory of one block for one batch shape.
type blockBuf struct {
	geom    geom.Conv
	convOut Tensor // conv output (nil without norm: then out holds it)
	out     Tensor // block output
	stats   Tensor // (N, C, 2) mean, rstd
}

// Workspace holds the activations (and, for training, the gradient
// buffers) of a U-Net for one batch shape, allocated once so that a
// training step allocates no tensor memory.
type Workspace struct {
	m           *UNet
	batch       int
	size        [3]int   // input spatial size
	sizes       [][3]int // spatial size per level
	train       bool
	inputNDHWC  Tensor // channels-last input when InChannels > 1
	input       Tensor // channels-last view of the last input
	enc         [][]blockBuf
	stem        blockBuf    // residual encoder
	res         [][]resBuf  // residual encoder: [level][block]
	upGeom      []geom.Conv // adjoint geometry per stage
	up          []Tensor    // transposed-conv output per stage
	cat         []Tensor    // concat(up, skip) per stage
	dec         [][]blockBuf
	headGeom    geom.Conv
	deepSupGeom []geom.Conv
	logits      []Tensor // [level]: 0 = head, l ≥ 1 = deep supervision at level l

	// Gradient buffers per level (training only). The blocks of a level
	// alternate between actGrad and actGradSpare: each reads its output's
	// gradient from one and writes its input's gradient to the other.
	// skipGrad receives the skip connection's share of an encoder level's
	// output gradient, catGrad the gradient of a decoder stage's concat.
	actGrad, actGradSpare []Tensor
	skipGrad, catGrad     []Tensor
	// A residual encoder's scratch gradients per level (training), of
	// the level's activations' shape: the two a residual block's backward
	// needs besides its input and output gradients (resBackward).
	resGrad, resGradSpare []Tensor
}

// LevelSizes returns the spatial size of every level for an input of
// spatial size size, or an error if the size does not divide evenly
// through the strides (the decoder could not restore it).
func (m *UNet) LevelSizes(size [3]int) ([][3]int, error) {
	sizes := [][3]int{}
	cur := size
	for l := range m.levels() {
		c := m.levelConv(l)
		var next [3]int
		for a := 0; a < 3; a++ {
			next[a] = (cur[a]+2*c.pad[a]-c.kernel[a])/c.stride[a] + 1
			if next[a] < 1 {
				return nil, fmt.Errorf("patch %v too small for level %d", size, l)
			}
		}
		if l > 0 {
			for a := 0; a < 3; a++ {
				if next[a]*c.stride[a] != cur[a] {
					return nil, fmt.Errorf("patch %v: axis %d has size %d at level %d, not divisible by the stride %d of level %d (each axis must be divisible by the product of the strides)", size, a, cur[a], l-1, c.stride[a], l)
				}
			}
		}
		sizes = append(sizes, next)
		cur = next
	}
	return sizes, nil
}

// NewWorkspace allocates the buffers for batches of n samples of spatial
// size (D, H, W); with train false only what inference needs. On a device
// that stores activations in a narrower type (ActivationAllocator), the
// activations are allocated through it; on one that stores their
// gradients in a narrower type (ActivationGradientAllocator), the
// gradient buffers are.
//
// On a device that times its convolution algorithms (ConvPreparer), every
// pass the workspace's steps run is timed first, before any of its memory
// is allocated.
func (m *UNet) NewWorkspace(n int, size [3]int, train bool) (*Workspace, error) {
	if err := m.prepareConvs(n, size, train); err != nil {
		return nil, err
	}
	return m.newWorkspace(n, size, train, m.allocators())
}

// allocators are how a workspace allocates each kind of tensor: float32
// ones (inputs, norm statistics, logits), activations and activation
// gradients, with the bytes per element of the last two.
type allocators struct {
	f32, act, grad      func(Shape) Tensor
	actBytes, gradBytes int
}

// allocators returns the device's: its ActivationAllocator for
// activations and its ActivationGradientAllocator for their gradients
// where these are narrower than float32, else Alloc.
func (m *UNet) allocators() allocators {
	a := allocators{f32: m.dev.Alloc, act: m.dev.Alloc, grad: m.dev.Alloc, actBytes: 4, gradBytes: 4}
	if d, ok := m.dev.(ActivationAllocator); ok && d.ActivationBytes() < 4 {
		a.act, a.actBytes = d.AllocActivation, d.ActivationBytes()
	}
	if d, ok := m.dev.(ActivationGradientAllocator); ok && d.ActivationGradientBytes() < 4 {
		a.grad, a.gradBytes = d.AllocActivationGradient, d.ActivationGradientBytes()
	}
	return a
}

// WorkspaceBytes is the memory NewWorkspace would allocate (float32
// tensors, activations of the device's ActivationBytes and activation
// gradients of its ActivationGradientBytes), computed without
// allocating: so a patch or batch the device cannot hold is refused with
// a message, not a crash.
func (m *UNet) WorkspaceBytes(n int, size [3]int, train bool) (int64, error) {
	var total int64
	_, err := m.dryWorkspace(n, size, train, func(bytes int64) { total += bytes })
	return total, err
}

// dryWorkspace builds the workspace NewWorkspace would, without memory:
// every tensor is nil, and count, unless nil, is told the bytes each
// would take (float32, activations of the device's ActivationBytes,
// activation gradients of its ActivationGradientBytes). Its sizes and
// convolution geometries are the real workspace's.
func (m *UNet) dryWorkspace(n int, size [3]int, train bool, count func(bytes int64)) (*Workspace, error) {
	counter := func(elemBytes int) func(Shape) Tensor {
		return func(s Shape) Tensor {
			if count != nil {
				e := int64(elemBytes)
				for _, d := range s {
					e *= int64(d)
				}
				count(e)
			}
			return nil
		}
	}
	a := m.allocators()
	a.f32, a.act, a.grad = counter(4), counter(a.actBytes), counter(a.gradBytes)
	return m.newWorkspace(n, size, train, a)
}

// newWorkspace builds a workspace with the allocators a.
func (m *UNet) newWorkspace(n int, size [3]int, train bool, a allocators) (*Workspace, error) {
	if n < 1 {
		return nil, fmt.Errorf("batch size %d, want >= 1", n)
	}
	sizes, err := m.LevelSizes(size)
	if err != nil {
		return nil, err
	}
	// Two tensors of different element types cannot share memory as one
	// tensor: the sharings between gradients and activations below only
	// happen when activations and their gradients have the same type
	// (both float32, or both narrow).
	share := a.actBytes == a.gradBytes
	L := m.levels()
	ws := &Workspace{m: m, batch: n, size: size, sizes: sizes, train: train}
	shape := func(l, c int) Shape { s := sizes[l]; return Shape{n, s[0], s[1], s[2], c} }
	act := func(l, c int) Tensor { return a.act(shape(l, c)) }   // activations
	grad := func(l, c int) Tensor { return a.grad(shape(l, c)) } // their gradients
	in := size
	if m.cfg.InChannels > 1 {
		ws.inputNDHWC = a.f32(Shape{n, size[0], size[1], size[2], m.cfg.InChannels})
	}
	if train {
		// Allocated first: the forward's transient tensors borrow them
		// (below).
		for l, f := range m.cfg.Features {
			ws.actGrad = append(ws.actGrad, grad(l, f))
			ws.actGradSpare = append(ws.actGradSpare, grad(l, f))
		}
	}
	newBuf := func(b *block, in [3]int, l int) blockBuf {
		bb := blockBuf{geom: b.conv.geometry(n, in)}
		bb.out = act(l, b.conv.outC)
		if b.gamma != nil {
			// Training keeps the conv output for the norm's backward;
			// inference normalises it in place (InstanceNormActForward's
			// y may alias x).
			bb.convOut = bb.out
			if train {
				bb.convOut = act(l, b.conv.outC)
			}
			bb.stats = a.f32(Shape{n, b.conv.outC, 2})
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
	if m.res != nil {
		ws.stem = newBuf(m.stem, size, 0)
		if train {
			for l, f := range m.cfg.Features {
				ws.resGrad = append(ws.resGrad, grad(l, f))
				ws.resGradSpare = append(ws.resGradSpare, grad(l, f))
			}
		}
		for l, lvl := range m.res {
			var bufs []resBuf
			for _, r := range lvl {
				// The skip's input gradient has the block's input's
				// shape: a pooling block's input is the level above's
				// output, whose scratch is idle while this level runs
				// its backward (the levels run from the deepest); a
				// projection without pooling needs a tensor of its own.
				var poolGrad Tensor
				switch {
				case !train:
				case r.pooled() && l > 0 && r.conv1.conv.inC == m.cfg.Features[l-1]:
					poolGrad = ws.resGrad[l-1]
				case r.pooled() || r.proj != nil:
					s := sizes[l]
					if r.pooled() {
						s = in
					}
					poolGrad = a.grad(Shape{n, s[0], s[1], s[2], r.conv1.conv.inC})
				}
				bufs = append(bufs, newResBuf(r, newBuf, act, grad, in, sizes[l], l, train, poolGrad))
				in = sizes[l]
			}
			ws.res = append(ws.res, bufs)
		}
	}
	for d, u := range m.up {
		l := L - 2 - d
		g := u.adjointGeometry(n, sizes[l])
		if g.OutD() != sizes[l+1][0] || g.OutH() != sizes[l+1][1] || g.OutW() != sizes[l+1][2] {
			return nil, fmt.Errorf("patch %v: transposed conv of stage %d gives %v from %v, skip has %v", size, d, sizes[l], sizes[l+1], sizes[l])
		}
		ws.upGeom = append(ws.upGeom, g)
		// The transposed conv's output lives only until the concat (its
		// backward needs its input, not its output), while the level's
		// gradient buffer is idle in the forward pass: they share memory
		// (when of one element type).
		if train && share && u.outC == m.cfg.Features[l] {
			ws.up = append(ws.up, ws.actGrad[l])
		} else {
			ws.up = append(ws.up, act(l, u.outC))
		}
		ws.cat = append(ws.cat, act(l, 2*u.outC))
		var bufs []blockBuf
		for _, b := range m.dec[d] {
			bufs = append(bufs, newBuf(b, sizes[l], l))
		}
		ws.dec = append(ws.dec, bufs)
	}
	ws.logits = make([]Tensor, 1+len(m.deepSup))
	ws.headGeom = m.head.geometry(n, sizes[0])
	logits := func(l int) Tensor { return a.f32(shape(l, m.cfg.NumClasses)) }
	ws.logits[0] = logits(0)
	for d, h := range m.deepSup {
		l := L - 2 - d
		ws.deepSupGeom = append(ws.deepSupGeom, h.geometry(n, sizes[l]))
		ws.logits[l] = logits(l)
	}
	if train {
		// Two more lifetimes that never overlap (see BackwardReady):
		//   - a decoder stage's concat is dead once its first block's
		//     backward-weight has read it, just before the backward-data
		//     writes the concat's gradient: catGrad is cat (when of one
		//     element type; else catGrad has its own memory);
		//   - the skip connection's share of the gradient waits from the
		//     end of the decoder stage at level l to the start of encoder
		//     level l, a time in which only the level's actGrad is written
		//     (by the level below's first block): skipGrad is actGradSpare.
		// The gradient check tests (gradcheck_test.go) hold the result to
		// finite differences.
		for l := range L - 1 {
			ws.skipGrad = append(ws.skipGrad, ws.actGradSpare[l])
			if share {
				ws.catGrad = append(ws.catGrad, ws.cat[L-2-l])
			} else {
				ws.catGrad = append(ws.catGrad, grad(l, 2*m.up[L-2-l].outC))
			}
		}
	}
	return ws, nil
}

// Free releases the workspace's memory.
func (ws *Workspace) Free() {
	dev := ws.m.dev
	freed := map[Tensor]bool{} // shared tensors (see newWorkspace) once
	free := func(ts ...Tensor) {
		for _, t := range ts {
			if t != nil && !freed[t] {
				freed[t] = true
				dev.Free(t)
			}
		}
	}
	freeBufs := func(bs [][]blockBuf) {
		for _, lvl := range bs {
			for _, b := range lvl {
				free(b.convOut, b.out, b.stats)
			}
		}
	}
	free(ws.inputNDHWC)
	freeBufs(ws.enc)
	freeBufs([][]blockBuf{{ws.stem}})
	for _, lvl := range ws.res {
		for _, r := range lvl {
			freeBufs([][]blockBuf{{r.conv1, r.conv2, r.proj}})
			free(r.pooled, r.poolGrad, r.projGrad)
		}
	}
	free(ws.resGrad...)
	free(ws.resGradSpare...)
	freeBufs(ws.dec)
	free(ws.up...)
	free(ws.cat...)
	free(ws.logits...)
	free(ws.actGrad...)
	free(ws.actGradSpare...)
	free(ws.skipGrad...)
	free(ws.catGrad...)
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
	return Shape{ws.batch, ws.m.cfg.InChannels, ws.size[0], ws.size[1], ws.size[2]}
}

// LabelShape returns the (N, D, H, W) label shape of the workspace.
func (ws *Workspace) LabelShape() Shape {
	s := ws.InputShape()
	return Shape{s[0], s[2], s[3], s[4]}
}

// levelOutput returns the output of encoder level l.
func (ws *Workspace) levelOutput(l int) Tensor {
	if ws.res != nil {
		b := ws.res[l]
		return b[len(b)-1].out()
	}
	b := ws.enc[l]
	return b[len(b)-1].out
}

// stageOutput returns the output of decoder stage d.
func (ws *Workspace) stageOutput(d int) Tensor { b := ws.dec[d]; return b[len(b)-1].out }

// ForwardFLOPs returns the analytic FLOPs (2 × multiply-adds) of the
// convolutions, transposed convolutions and heads of one forward pass for
// the workspace's batch, counted like bench/torch_unet_step.py.
func (ws *Workspace) ForwardFLOPs() int64 {
	var macs int64
	for _, lvl := range ws.enc {
		for _, b := range lvl {
			macs += b.geom.MACs()
		}
	}
	if ws.res != nil {
		macs += ws.stem.geom.MACs()
		for l, lvl := range ws.res {
			for k, b := range lvl {
				macs += b.conv1.geom.MACs() + b.conv2.geom.MACs()
				if ws.m.res[l][k].proj != nil {
					macs += b.proj.geom.MACs()
				}
			}
		}
	}
	for d := range ws.dec {
		macs += ws.upGeom[d].MACs()
		for _, b := range ws.dec[d] {
			macs += b.geom.MACs()
		}
	}
	macs += ws.headGeom.MACs()
	for _, g := range ws.deepSupGeom {
		macs += g.MACs()
	}
	return 2 * macs
}
