package nn

import (
	"fmt"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// ConvPasses returns every convolution pass a step on the workspace runs,
// each once: the forward pass's (Forward, and the transposed convolutions'
// BackwardData) for an inference workspace, and for a training one the
// backward pass's too — the first convolution
// computes no input gradient (the image needs none).
// TestConvPassesAreTheStepsConvolutions holds it to the calls a step makes.
func (ws *Workspace) ConvPasses() []ConvPass {
	var out []ConvPass
	seen := map[ConvPass]bool{}
	add := func(k ConvKind, g geom.Conv) {
		p := ConvPass{Kind: k, Geom: g}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	// conv adds a convolution's forward pass, or with backward its
	// backward passes (the input gradient unless noDx).
	conv := func(g geom.Conv, backward, noDx bool) {
		if !backward {
			add(ConvForward, g)
			return
		}
		add(ConvBackwardWeight, g)
		if !noDx {
			add(ConvBackwardData, g)
		}
	}
	// The transposed convolution runs its adjoint g backwards: data
	// gradient forward, weight gradient and forward in the backward pass.
	convT := func(g geom.Conv, backward bool) {
		if !backward {
			add(ConvBackwardData, g)
			return
		}
		add(ConvBackwardWeight, g)
		add(ConvForward, g)
	}
	passes := []bool{false}
	if ws.train {
		passes = append(passes, true)
	}
	for _, backward := range passes {
		first := true // the network's first convolution (its input is the image)
		for _, lvl := range ws.enc {
			for _, b := range lvl {
				conv(b.geom, backward, first)
				first = false
			}
		}
		if ws.res != nil {
			conv(ws.stem.geom, backward, true)
			for l, lvl := range ws.res {
				for k, b := range lvl {
					conv(b.conv1.geom, backward, false)
					conv(b.conv2.geom, backward, false)
					if ws.m.res[l][k].proj != nil {
						conv(b.proj.geom, backward, false)
					}
				}
			}
		}
		for d := range ws.dec {
			convT(ws.upGeom[d], backward)
			for _, b := range ws.dec[d] {
				conv(b.geom, backward, false)
			}
		}
		conv(ws.headGeom, backward, false)
		for _, g := range ws.deepSupGeom {
			conv(g, backward, false)
		}
	}
	return out
}

// prepareConvs hands the convolution passes of a workspace of this shape
// to a device that times its algorithms (ConvPreparer) before the
// workspace is allocated: the passes come from a workspace built without
// memory (dryWorkspace).
func (m *UNet) prepareConvs(n int, size [3]int, train bool) error {
	p, ok := m.dev.(ConvPreparer)
	if !ok {
		return nil
	}
	dry, err := m.dryWorkspace(n, size, train, nil)
	if err != nil {
		return err
	}
	if err := p.PrepareConvs(dry.ConvPasses()); err != nil {
		return fmt.Errorf("timing the convolutions' algorithms: %w", err)
	}
	return nil
}
