package devcheck

import (
	"fmt"
	"math"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// bf16Bits rounds f to bfloat16 bits as the devices do (to nearest, ties
// to even; NaNs stay NaN).
func bf16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// RoundBF16 returns x's values rounded to bfloat16 (as float32s).
func RoundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = math.Float32frombits(uint32(bf16Bits(v)) << 16)
	}
	return out
}

// narrowActivations returns dev as an nn.ActivationAllocator whose
// activations are narrower than float32, or nil.
func narrowActivations(dev nn.Device) nn.ActivationAllocator {
	a, ok := dev.(nn.ActivationAllocator)
	if !ok || a.ActivationBytes() >= 4 {
		return nil
	}
	return a
}

// activation returns an activation tensor of the device under test
// (AllocActivation) holding data rounded to its type, and the CPU
// tensor holding the same (rounded) values.
func (k *checker) activation(a nn.ActivationAllocator, shape nn.Shape, data []float32) pair {
	k.t.Helper()
	return k.narrowTensor(a.AllocActivation, shape, data)
}

// narrowTensor returns a tensor of the device under test from alloc
// holding data rounded to its type, and the CPU tensor holding the same
// (rounded) values.
func (k *checker) narrowTensor(alloc func(nn.Shape) nn.Tensor, shape nn.Shape, data []float32) pair {
	k.t.Helper()
	x := alloc(shape)
	k.t.Cleanup(func() { k.dev.Free(x) })
	s := k.dev.ComputeStream()
	if err := k.dev.Upload(s, x, data); err != nil {
		k.t.Fatalf("upload %v to %s: %v", shape, k.dev.Name(), err)
	}
	s.Synchronize()
	return pair{x, cpu.NewTensor(shape, download(k.t, k.dev, x))}
}

// sameBF16 compares a bf16 activation of the device with the CPU's
// float32 result rounded to bf16: the float32 op's result on the same
// (rounded) inputs, rounded once. Within tol widened by one bf16 ulp
// (2⁻⁷ relative), since a float32 difference within tol may round to
// the neighbouring bf16 value; bit-exact when tol is.
func (k *checker) sameBF16(what string, p pair, tol Tol) {
	k.t.Helper()
	if tol != Exact {
		tol.Rtol += 0x1p-7
	}
	compare(k.t, k.name, what+" (bf16)", download(k.t, k.dev, p.dev), RoundBF16(p.ref.(*cpu.Tensor).Data()), tol)
}

// bf16Activations checks the ops nn applies to activations with bf16
// operands where nn passes them (nn.ActivationAllocator), against the
// CPU's float32 ops on the same bf16 values: skipped on a device whose
// activations are float32.
func bf16Activations(k *checker, s [4]int) {
	a := narrowActivations(k.dev)
	if a == nil {
		k.t.Skip("the device stores activations as float32")
	}
	// Storage: upload rounds, download widens, views keep the type,
	// MemoryInUse counts ActivationBytes per element.
	shape := act(s, 3)
	before, _ := k.dev.MemoryInUse()
	xv := k.uniform(shape.Len(), -3, 3)
	x := k.activation(a, shape, xv)
	after, _ := k.dev.MemoryInUse()
	if got, want := after-before, int64(a.ActivationBytes()*shape.Len()); got != want {
		k.t.Errorf("MemoryInUse grew by %d bytes for a %v activation, want %d", got, shape, want)
	}
	compare(k.t, k.name, "Upload then Download of an activation", download(k.t, k.dev, x.dev), RoundBF16(xv), Exact)
	v := k.dev.View(x.dev, nn.Shape{shape.Len()})
	compare(k.t, k.name, "View of an activation", download(k.t, k.dev, v), RoundBF16(xv), Exact)
	z := a.AllocActivation(shape)
	compare(k.t, k.name, "AllocActivation (zero-filled)", download(k.t, k.dev, z), make([]float32, shape.Len()), Exact)
	k.dev.Free(z)

	for _, gc := range geoms(s) {
		g := gc.g
		w := k.both(g.WeightShape(), k.uniform(g.WeightLen(), -1, 1))
		b := k.both(nn.Shape{g.OutC}, k.uniform(g.OutC, -1, 1))
		xa := k.activation(a, g.InShape(), k.uniform(g.InLen(), -1, 1))
		xf := k.both(g.InShape(), k.uniform(g.InLen(), -1, 1))
		// Forward: block convs (activation to activation), the first
		// block (float32 input), the heads (activation to float32 logits).
		ya := k.activation(a, g.OutShape(), make([]float32, g.OutLen()))
		k.dev.Conv3DForward(g, xa.dev, w.dev, b.dev, ya.dev)
		k.ref.Conv3DForward(g, xa.ref, w.ref, b.ref, ya.ref)
		k.sameBF16("Conv3DForward bf16 → bf16 "+gc.name, ya, k.tol.Conv)
		k.dev.Conv3DForward(g, xf.dev, w.dev, nil, ya.dev)
		k.ref.Conv3DForward(g, xf.ref, w.ref, nil, ya.ref)
		k.sameBF16("Conv3DForward float32 → bf16 "+gc.name, ya, k.tol.Conv)
		yf := k.zeros(g.OutShape())
		k.dev.Conv3DForward(g, xa.dev, w.dev, b.dev, yf.dev)
		k.ref.Conv3DForward(g, xa.ref, w.ref, b.ref, yf.ref)
		k.same("Conv3DForward bf16 → float32 "+gc.name, yf, k.tol.Conv)
		// Backward-weight with a bf16 input and a float32 output gradient
		// (a block's conv), and with the roles of the transposed conv's
		// backward: a float32 gradient as x, a bf16 activation as dy.
		dy := k.both(g.OutShape(), k.uniform(g.OutLen(), -1, 1))
		dw := k.both(g.WeightShape(), k.uniform(g.WeightLen(), 5, 6))
		db := k.both(nn.Shape{g.OutC}, k.uniform(g.OutC, 5, 6))
		k.dev.Conv3DBackwardWeight(g, xa.dev, dy.dev, dw.dev, db.dev)
		k.ref.Conv3DBackwardWeight(g, xa.ref, dy.ref, dw.ref, db.ref)
		k.same("Conv3DBackwardWeight (dw) bf16 x "+gc.name, dw, k.tol.Conv)
		k.same("Conv3DBackwardWeight (db) bf16 x "+gc.name, db, k.tol.Reduce)
		dya := k.activation(a, g.OutShape(), k.uniform(g.OutLen(), -1, 1))
		k.dev.Conv3DBackwardWeight(g, xf.dev, dya.dev, dw.dev, nil)
		k.ref.Conv3DBackwardWeight(g, xf.ref, dya.ref, dw.ref, nil)
		k.same("Conv3DBackwardWeight (dw) bf16 dy "+gc.name, dw, k.tol.Conv)
		// Backward-data as the transposed conv's forward: bf16 in, bf16
		// out, then its bias added in bf16.
		dxa := k.activation(a, g.InShape(), k.uniform(g.InLen(), 5, 6))
		k.dev.Conv3DBackwardData(g, dya.dev, w.dev, dxa.dev)
		k.ref.Conv3DBackwardData(g, dya.ref, w.ref, dxa.ref)
		k.sameBF16("Conv3DBackwardData bf16 → bf16 "+gc.name, dxa, k.tol.Conv)
		bias := k.both(nn.Shape{g.InC}, k.uniform(g.InC, -1, 1))
		up := k.activation(a, g.InShape(), k.uniform(g.InLen(), -1, 1))
		k.dev.AddChannelBias(up.dev, bias.dev)
		k.ref.AddChannelBias(up.ref, bias.ref)
		k.sameBF16("AddChannelBias bf16 "+gc.name, up, k.tol.Elementwise)
	}

	for _, c := range []int{1, 6, 33, 40} { // 40: the kernels' 8-channel paths
		shape := act(s, c)
		xs := k.uniform(shape.Len(), -2, 3)
		for i := range xs[:c] {
			xs[i] += 5 // an outlier voxel per channel
		}
		gamma := k.both(nn.Shape{c}, k.uniform(c, 0.5, 1.5))
		beta := k.both(nn.Shape{c}, k.uniform(c, -0.5, 0.5))
		dyv := k.uniform(shape.Len(), -1, 1)
		for _, slope := range []float32{0.01, 0} {
			tag := fmt.Sprintf("(%d channels, slope %g)", c, slope)
			x := k.activation(a, shape, xs)
			y := k.activation(a, shape, make([]float32, shape.Len()))
			stats := k.zeros(nn.Shape{s[0], c, 2})
			k.dev.InstanceNormActForward(x.dev, gamma.dev, beta.dev, y.dev, stats.dev, 1e-5, slope)
			k.ref.InstanceNormActForward(x.ref, gamma.ref, beta.ref, y.ref, stats.ref, 1e-5, slope)
			k.same("InstanceNormActForward bf16 stats "+tag, stats, k.tol.Reduce)
			k.sameBF16("InstanceNormActForward bf16 y "+tag, y, k.tol.Norm)
			dy := k.both(shape, dyv)
			dg, dbt := k.zeros(nn.Shape{c}), k.zeros(nn.Shape{c})
			k.dev.InstanceNormActBackward(x.dev, gamma.dev, beta.dev, stats.dev, dy.dev, dy.dev, dg.dev, dbt.dev, slope)
			k.ref.InstanceNormActBackward(x.ref, gamma.ref, beta.ref, stats.ref, dy.ref, dy.ref, dg.ref, dbt.ref, slope)
			k.same("InstanceNormActBackward bf16 x: dx "+tag, dy, k.tol.Norm)
			k.same("InstanceNormActBackward bf16 x: dgamma "+tag, dg, k.tol.Norm)
			k.same("InstanceNormActBackward bf16 x: dbeta "+tag, dbt, k.tol.Norm)
			// In place, as inference normalises conv outputs.
			stats2 := k.zeros(nn.Shape{s[0], c, 2})
			k.dev.InstanceNormActForward(x.dev, gamma.dev, beta.dev, x.dev, stats2.dev, 1e-5, slope)
			k.ref.InstanceNormActForward(x.ref, gamma.ref, beta.ref, x.ref, stats2.ref, 1e-5, slope)
			k.sameBF16("InstanceNormActForward bf16 in place "+tag, x, k.tol.Norm)
		}
	}

	for _, slope := range []float32{0.01, 0} {
		shape := act(s, 4)
		x := k.activation(a, shape, k.uniform(shape.Len(), -1, 1))
		k.dev.ActForward(x.dev, x.dev, slope)
		k.ref.ActForward(x.ref, x.ref, slope)
		k.sameBF16(fmt.Sprintf("ActForward bf16 in place slope %g", slope), x, Exact)
		dy := k.both(shape, k.uniform(shape.Len(), -1, 1))
		dx := k.zeros(shape)
		k.dev.ActBackward(x.dev, dy.dev, dx.dev, slope)
		k.ref.ActBackward(x.ref, dy.ref, dx.ref, slope)
		k.same(fmt.Sprintf("ActBackward bf16 y slope %g", slope), dx, k.tol.Elementwise)
	}

	for _, cc := range [][2]int{{3, 5}, {8, 16}} { // 8 and 16: the 8-channel path
		ca, cb := cc[0], cc[1]
		ua := k.activation(a, act(s, ca), k.uniform(act(s, ca).Len(), -1, 1))
		sa := k.activation(a, act(s, cb), k.uniform(act(s, cb).Len(), -1, 1))
		cat := k.activation(a, act(s, ca+cb), make([]float32, act(s, ca+cb).Len()))
		k.dev.ConcatChannels(ua.dev, sa.dev, cat.dev)
		k.ref.ConcatChannels(ua.ref, sa.ref, cat.ref)
		k.sameBF16(fmt.Sprintf("ConcatChannels bf16 (%d+%d channels)", ca, cb), cat, Exact)
	}

	// The residual encoder's average pool: bf16 to bf16 directly, and the
	// mixes through float32 copies (each bf16 output rounded once).
	win := [3]int{min(2, s[1]), min(2, s[2]), min(2, s[3])}
	for _, c := range []int{3, 8} {
		ps := nn.Shape{s[0], s[1] / win[0], s[2] / win[1], s[3] / win[2], c}
		xa := k.activation(a, act(s, c), k.uniform(act(s, c).Len(), -1, 1))
		ya := k.activation(a, ps, make([]float32, ps.Len()))
		k.dev.AvgPool(xa.dev, ya.dev, win)
		k.ref.AvgPool(xa.ref, ya.ref, win)
		k.sameBF16(fmt.Sprintf("AvgPool bf16 -> bf16 (%d channels)", c), ya, Exact)
		yf := k.zeros(ps)
		k.dev.AvgPool(xa.dev, yf.dev, win)
		k.ref.AvgPool(xa.ref, yf.ref, win)
		k.same(fmt.Sprintf("AvgPool bf16 -> float32 (%d channels)", c), yf, Exact)
		xf := k.both(act(s, c), k.uniform(act(s, c).Len(), -1, 1))
		k.dev.AvgPool(xf.dev, ya.dev, win)
		k.ref.AvgPool(xf.ref, ya.ref, win)
		k.sameBF16(fmt.Sprintf("AvgPool float32 -> bf16 (%d channels)", c), ya, Exact)
	}
}
