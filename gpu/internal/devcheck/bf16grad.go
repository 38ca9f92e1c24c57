package devcheck

import (
	"fmt"

	"github.com/voxtrain/voxtrain/nn"
)

// narrowGradients returns dev as an nn.ActivationGradientAllocator whose
// activation gradients are narrower than float32 (and its activations as
// narrow), or nil.
func narrowGradients(dev nn.Device) (nn.ActivationAllocator, nn.ActivationGradientAllocator) {
	a := narrowActivations(dev)
	g, ok := dev.(nn.ActivationGradientAllocator)
	if a == nil || !ok || g.ActivationGradientBytes() >= 4 {
		return nil, nil
	}
	return a, g
}

// bf16Gradients checks the ops nn applies to activation gradients with
// bf16 operands where nn passes them (nn.ActivationGradientAllocator),
// against the CPU's float32 ops on the same bf16 values: skipped on a
// device whose activation gradients are float32.
func bf16Gradients(k *checker, s [4]int) {
	a, ga := narrowGradients(k.dev)
	if ga == nil {
		k.t.Skip("the device stores activation gradients as float32")
	}
	newAct := func(shape nn.Shape, data []float32) pair { return k.activation(a, shape, data) }
	newGrad := func(shape nn.Shape, data []float32) pair {
		return k.narrowTensor(ga.AllocActivationGradient, shape, data)
	}
	// Storage: MemoryInUse counts ActivationGradientBytes per element.
	shape := act(s, 3)
	before, _ := k.dev.MemoryInUse()
	z := newGrad(shape, make([]float32, shape.Len()))
	after, _ := k.dev.MemoryInUse()
	if got, want := after-before, int64(ga.ActivationGradientBytes()*shape.Len()); got != want {
		k.t.Errorf("MemoryInUse grew by %d bytes for a %v activation gradient, want %d", got, shape, want)
	}
	compare(k.t, k.name, "AllocActivationGradient (zero-filled)", download(k.t, k.dev, z.dev), make([]float32, shape.Len()), Exact)

	for _, gc := range geoms(s) {
		g := gc.g
		w := k.both(g.WeightShape(), k.uniform(g.WeightLen(), -1, 1))
		// A block's backward: weight and bias gradients from a bf16
		// activation and output gradient, the input gradient in bf16.
		xa := newAct(g.InShape(), k.uniform(g.InLen(), -1, 1))
		dy := newGrad(g.OutShape(), k.uniform(g.OutLen(), -1, 1))
		dw := k.both(g.WeightShape(), k.uniform(g.WeightLen(), 5, 6))
		db := k.both(nn.Shape{g.OutC}, k.uniform(g.OutC, 5, 6))
		k.dev.Conv3DBackwardWeight(g, xa.dev, dy.dev, dw.dev, db.dev)
		k.ref.Conv3DBackwardWeight(g, xa.ref, dy.ref, dw.ref, db.ref)
		k.same("Conv3DBackwardWeight (dw) bf16 x, bf16 dy "+gc.name, dw, k.tol.Conv)
		k.same("Conv3DBackwardWeight (db) bf16 dy "+gc.name, db, k.tol.Reduce)
		dx := newGrad(g.InShape(), k.uniform(g.InLen(), 5, 6))
		k.dev.Conv3DBackwardData(g, dy.dev, w.dev, dx.dev)
		k.ref.Conv3DBackwardData(g, dy.ref, w.ref, dx.ref)
		k.sameBF16("Conv3DBackwardData bf16 dy → bf16 dx "+gc.name, dx, k.tol.Conv)
		// A head's: the float32 loss gradient into a bf16 input gradient.
		dl := k.both(g.OutShape(), k.uniform(g.OutLen(), -1, 1))
		k.dev.Conv3DBackwardData(g, dl.dev, w.dev, dx.dev)
		k.ref.Conv3DBackwardData(g, dl.ref, w.ref, dx.ref)
		k.sameBF16("Conv3DBackwardData float32 dy → bf16 dx "+gc.name, dx, k.tol.Conv)
		// The transposed conv's backward (g its adjoint): its input's
		// gradient is g's forward of the output gradient, its weight
		// gradient g's backward-weight with the gradient as x.
		gx := newGrad(g.InShape(), k.uniform(g.InLen(), -1, 1))
		gy := newGrad(g.OutShape(), k.uniform(g.OutLen(), 5, 6))
		k.dev.Conv3DForward(g, gx.dev, w.dev, nil, gy.dev)
		k.ref.Conv3DForward(g, gx.ref, w.ref, nil, gy.ref)
		k.sameBF16("Conv3DForward bf16 dy → bf16 dx (transposed conv's backward) "+gc.name, gy, k.tol.Conv)
		ya := newAct(g.OutShape(), k.uniform(g.OutLen(), -1, 1))
		k.dev.Conv3DBackwardWeight(g, gx.dev, ya.dev, dw.dev, nil)
		k.ref.Conv3DBackwardWeight(g, gx.ref, ya.ref, dw.ref, nil)
		k.same("Conv3DBackwardWeight (dw) bf16 gradient as x "+gc.name, dw, k.tol.Conv)
		cs := k.both(nn.Shape{g.InC}, k.uniform(g.InC, 5, 6))
		k.dev.ChannelSum(gx.dev, cs.dev)
		k.ref.ChannelSum(gx.ref, cs.ref)
		k.same("ChannelSum bf16 "+gc.name, cs, k.tol.Reduce)
	}

	for _, c := range []int{1, 6, 33, 40} { // 40: the kernels' 8-channel paths
		shape := act(s, c)
		xs := k.uniform(shape.Len(), -2, 3)
		for i := range xs[:c] {
			xs[i] += 5
		}
		gamma := k.both(nn.Shape{c}, k.uniform(c, 0.5, 1.5))
		beta := k.both(nn.Shape{c}, k.uniform(c, -0.5, 0.5))
		dyv := k.uniform(shape.Len(), -1, 1)
		for _, slope := range []float32{0.01, 0} {
			tag := fmt.Sprintf("(%d channels, slope %g)", c, slope)
			x := newAct(shape, xs)
			stats := k.zeros(nn.Shape{s[0], c, 2})
			y := newAct(shape, make([]float32, shape.Len()))
			k.dev.InstanceNormActForward(x.dev, gamma.dev, beta.dev, y.dev, stats.dev, 1e-5, slope)
			k.ref.InstanceNormActForward(x.ref, gamma.ref, beta.ref, y.ref, stats.ref, 1e-5, slope)
			// In place, as nn runs it.
			dy := newGrad(shape, dyv)
			dg, dbt := k.zeros(nn.Shape{c}), k.zeros(nn.Shape{c})
			k.dev.InstanceNormActBackward(x.dev, gamma.dev, beta.dev, stats.dev, dy.dev, dy.dev, dg.dev, dbt.dev, slope)
			k.ref.InstanceNormActBackward(x.ref, gamma.ref, beta.ref, stats.ref, dy.ref, dy.ref, dg.ref, dbt.ref, slope)
			k.sameBF16("InstanceNormActBackward bf16 x, dy: dx "+tag, dy, k.tol.Norm)
			k.same("InstanceNormActBackward bf16 x, dy: dgamma "+tag, dg, k.tol.Norm)
			k.same("InstanceNormActBackward bf16 x, dy: dbeta "+tag, dbt, k.tol.Norm)
		}
	}

	for _, slope := range []float32{0.01, 0} {
		shape := act(s, 4)
		y := newAct(shape, k.uniform(shape.Len(), -1, 1))
		dy := newGrad(shape, k.uniform(shape.Len(), -1, 1))
		k.dev.ActBackward(y.dev, dy.dev, dy.dev, slope)
		k.ref.ActBackward(y.ref, dy.ref, dy.ref, slope)
		k.sameBF16(fmt.Sprintf("ActBackward bf16 y, dy in place slope %g", slope), dy, Exact)
	}

	// A deep-supervision head's gradient added to the decoder's; a
	// concat's gradient split into the transposed conv's and the skip's.
	// 8 and 16 channels: the kernels' 8-element paths.
	for _, cc := range [][2]int{{3, 5}, {8, 16}} {
		ca, cb := cc[0], cc[1]
		tag := fmt.Sprintf(" (%d+%d channels)", ca, cb)
		shape = act(s, cb)
		sum := newGrad(shape, k.uniform(shape.Len(), -1, 1))
		add := newGrad(shape, k.uniform(shape.Len(), -1, 1))
		k.dev.Add(sum.dev, add.dev)
		k.ref.Add(sum.ref, add.ref)
		k.sameBF16("Add bf16 += bf16"+tag, sum, Exact)
		cat := newGrad(act(s, ca+cb), k.uniform(act(s, ca+cb).Len(), -1, 1))
		up := newGrad(act(s, ca), make([]float32, act(s, ca).Len()))
		skip := newGrad(act(s, cb), make([]float32, act(s, cb).Len()))
		k.dev.SplitChannels(cat.dev, up.dev, skip.dev)
		k.ref.SplitChannels(cat.ref, up.ref, skip.ref)
		k.sameBF16("SplitChannels bf16 (first part)"+tag, up, Exact)
		k.sameBF16("SplitChannels bf16 (second part)"+tag, skip, Exact)
	}

	// The residual encoder's pooled skip, backward: bf16 dy to bf16 dx
	// (stale values in dx overwritten).
	win := [3]int{min(2, s[1]), min(2, s[2]), min(2, s[3])}
	for _, c := range []int{3, 8} {
		ps := nn.Shape{s[0], s[1] / win[0], s[2] / win[1], s[3] / win[2], c}
		dy := newGrad(ps, k.uniform(ps.Len(), -1, 1))
		dx := newGrad(act(s, c), k.uniform(act(s, c).Len(), 5, 6))
		k.dev.AvgPoolBackward(dy.dev, dx.dev, win)
		k.ref.AvgPoolBackward(dy.ref, dx.ref, win)
		k.sameBF16(fmt.Sprintf("AvgPoolBackward bf16 -> bf16 (%d channels)", c), dx, Exact)
	}
}
