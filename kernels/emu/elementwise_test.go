//go:build cgo

package emu

import (
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// Test volumes: 2 samples of 3×5×7 = 105 voxels (not a multiple of 256 nor
// of the test chunk 37), and a few channel counts.
const (
	tn, td, th, tw = 2, 3, 5, 7
	tv             = td * th * tw
)

func shape5(c int) nn.Shape { return nn.Shape{tn, td, th, tw, c} }

func TestFillScaleAdd(t *testing.T) {
	r := rng(1)
	n := 1000
	x := uniform(r, n, -2, 2)
	y := uniform(r, n, -2, 2)
	atol, rtol := exact()

	b := buf(t, x)
	must(t, ops.Fill(b, n, 1.25))
	ref := tensor(nn.Shape{n}, x)
	dev.Fill(ref, 1.25)
	compare(t, "fill_f32", "cpu.Device.Fill", b.F32(), ref.Data(), 0, 0)

	b = buf(t, x)
	must(t, ops.Scale(b, n, -0.37))
	ref = tensor(nn.Shape{n}, x)
	dev.Scale(ref, -0.37)
	compare(t, "scale_f32", "cpu.Device.Scale", b.F32(), ref.Data(), atol, rtol)

	b = buf(t, x)
	must(t, ops.Copy(b, buf(t, y), n))
	ref = tensor(nn.Shape{n}, x)
	dev.Copy(ref, tensor(nn.Shape{n}, y))
	compare(t, "copy_f32", "cpu.Device.Copy", b.F32(), ref.Data(), 0, 0)

	b = buf(t, x)
	must(t, ops.Add(b, buf(t, y), n))
	ref = tensor(nn.Shape{n}, x)
	dev.Add(ref, tensor(nn.Shape{n}, y))
	compare(t, "add_f32", "cpu.Device.Add", b.F32(), ref.Data(), atol, rtol)

	// fill_i32 has no CPU counterpart (it initialises counters on the GPU).
	c := scratch(t, 4*300)
	must(t, launcher.Launch(kernelNamed(t, "fill_i32"), gridOf(300), c, int32(300), int32(-7)))
	got := c.I32()
	want := make([]float64, len(got))
	for i := range want {
		want[i] = -7
	}
	gotf := make([]float64, len(got))
	for i, v := range got {
		gotf[i] = float64(v)
	}
	compare(t, "fill_i32", "constant (own reference)", gotf, want, 0, 0)
}

func TestActivation(t *testing.T) {
	r := rng(2)
	n := 2*tv*3 + 11
	x := uniform(r, n, -3, 3)
	dy := uniform(r, n, -1, 1)
	atol, rtol := exact()
	for _, slope := range []float32{0.01, 0} {
		// In place, as the U-Net calls it.
		b := buf(t, x)
		must(t, ops.ActForward(b, b, n, slope))
		ref := tensor(nn.Shape{n}, x)
		dev.ActForward(ref, ref, slope)
		compare(t, "act_forward", "cpu.Device.ActForward", b.F32(), ref.Data(), atol, rtol)

		g := buf(t, dy)
		must(t, ops.ActBackward(b, g, g, n, slope))
		gref := tensor(nn.Shape{n}, dy)
		dev.ActBackward(ref, gref, gref, slope)
		compare(t, "act_backward", "cpu.Device.ActBackward", g.F32(), gref.Data(), atol, rtol)
	}
	if err := ops.ActForward(buf(t, x), buf(t, x), n, 1.5); err == nil {
		t.Error("slope 1.5 accepted")
	}
}

func TestChannelBiasAndSum(t *testing.T) {
	r := rng(3)
	for _, c := range []int{1, 5, 300} {
		x := uniform(r, tn*tv*c, -1, 1)
		bias := uniform(r, c, -1, 1)
		atol, rtol := exact()

		b := buf(t, x)
		must(t, ops.AddChannelBias(b, buf(t, bias), tn*tv, c))
		ref := tensor(shape5(c), x)
		dev.AddChannelBias(ref, tensor(nn.Shape{c}, bias))
		compare(t, "add_channel_bias", "cpu.Device.AddChannelBias", b.F32(), ref.Data(), atol, rtol)

		// The bias gradient: both sum in float64 in different orders, then
		// round to float32, so they may differ by an ulp of the sum.
		out := scratch(t, 4*c)
		sc := scratch(t, ops.ScratchBytes(1, tn*tv, c))
		must(t, ops.ChannelSum(buf(t, x), out, sc, tn*tv, c))
		sref := tensor(nn.Shape{c}, make([]float32, c))
		dev.ChannelSum(tensor(shape5(c), x), sref)
		compare(t, "channel_sum_partial+reduce_chunks_f32", "cpu.Device.ChannelSum", out.F32(), sref.Data(), 1e-6, 1e-6)
	}
}

func TestConcatSplit(t *testing.T) {
	r := rng(4)
	ca, cb := 3, 5
	a := uniform(r, tn*tv*ca, -1, 1)
	b := uniform(r, tn*tv*cb, -1, 1)
	dst := scratch(t, 4*tn*tv*(ca+cb))
	must(t, ops.ConcatChannels(buf(t, a), buf(t, b), dst, tn*tv, ca, cb))
	ref := tensor(shape5(ca+cb), make([]float32, tn*tv*(ca+cb)))
	dev.ConcatChannels(tensor(shape5(ca), a), tensor(shape5(cb), b), ref)
	compare(t, "concat_channels", "cpu.Device.ConcatChannels", dst.F32(), ref.Data(), 0, 0)

	src := uniform(r, tn*tv*(ca+cb), -1, 1)
	ga, gb := scratch(t, 4*tn*tv*ca), scratch(t, 4*tn*tv*cb)
	must(t, ops.SplitChannels(buf(t, src), ga, gb, tn*tv, ca, cb))
	ra, rb := tensor(shape5(ca), make([]float32, tn*tv*ca)), tensor(shape5(cb), make([]float32, tn*tv*cb))
	dev.SplitChannels(tensor(shape5(ca+cb), src), ra, rb)
	compare(t, "split_channels", "cpu.Device.SplitChannels (first part)", ga.F32(), ra.Data(), 0, 0)
	compare(t, "split_channels", "cpu.Device.SplitChannels (second part)", gb.F32(), rb.Data(), 0, 0)
}

func TestLayoutTranspose(t *testing.T) {
	r := rng(5)
	c := 4
	x := uniform(r, tn*tv*c, -1, 1)
	out := scratch(t, 4*len(x))
	must(t, ops.NCDHWToNDHWC(buf(t, x), out, tn, c, tv))
	ref := tensor(shape5(c), make([]float32, len(x)))
	dev.NCDHWToNDHWC(tensor(nn.Shape{tn, c, td, th, tw}, x), ref)
	compare(t, "ncdhw_to_ndhwc", "cpu.Device.NCDHWToNDHWC", out.F32(), ref.Data(), 0, 0)

	must(t, ops.NDHWCToNCDHW(buf(t, x), out, tn, c, tv))
	ref = tensor(nn.Shape{tn, c, td, th, tw}, make([]float32, len(x)))
	dev.NDHWCToNCDHW(tensor(shape5(c), x), ref)
	compare(t, "ndhwc_to_ncdhw", "cpu.Device.NDHWCToNCDHW", out.F32(), ref.Data(), 0, 0)
}

func TestChannelAffineAdd(t *testing.T) {
	r := rng(6)
	c := 3
	dst := uniform(r, tn*tv*c, -1, 1)
	a := uniform(r, tn*tv*c, -1, 1)
	alpha := uniform(r, tn*c, -2, 2)
	beta := uniform(r, tn*c, -2, 2)
	atol, rtol := exact()
	for _, tc := range []struct {
		name          string
		withA, withBe bool
	}{{"a and beta", true, true}, {"a only", true, false}, {"beta only", false, true}} {
		var ab, alb, beb *Buffer
		var at nn.Tensor
		var al, be []float32
		if tc.withA {
			ab, alb, at, al = buf(t, a), buf(t, alpha), tensor(shape5(c), a), alpha
		}
		if tc.withBe {
			beb, be = buf(t, beta), beta
		}
		got := buf(t, dst)
		must(t, ops.ChannelAffineAdd(got, ab, alb, beb, tn, tv, c))
		ref := tensor(shape5(c), dst)
		dev.ChannelAffineAdd(ref, at, al, be)
		compare(t, "channel_affine_add", "cpu.Device.ChannelAffineAdd ("+tc.name+")", got.F32(), ref.Data(), atol, rtol)
	}
}

func TestDownsampleLabels(t *testing.T) {
	r := rng(7)
	d, h, w := 7, 9, 10
	labels := labelsOf(r, tn*d*h*w, 4)
	for _, o := range [][3]int{{4, 5, 5}, {2, 3, 4}, {7, 9, 10}, {1, 1, 1}} {
		out := scratch(t, 4*tn*o[0]*o[1]*o[2])
		must(t, ops.DownsampleLabels(buf(t, labels), out, tn, d, h, w, o[0], o[1], o[2]))
		ref := tensor(nn.Shape{tn, o[0], o[1], o[2]}, make([]float32, tn*o[0]*o[1]*o[2]))
		dev.DownsampleLabels(tensor(nn.Shape{tn, d, h, w}, labels), ref)
		compare(t, "downsample_labels", "cpu.Device.DownsampleLabels", out.F32(), ref.Data(), 0, 0)
	}
}

func TestOneHot(t *testing.T) {
	r := rng(8)
	c := 4
	labels := labelsOf(r, tn*tv, c)
	out := scratch(t, 4*tn*tv*c)
	bad := scratch(t, 4)
	must(t, ops.OneHot(buf(t, labels), out, bad, tn*tv, c))
	ref := tensor(shape5(c), make([]float32, tn*tv*c))
	if err := dev.OneHot(tensor(nn.Shape{tn, td, th, tw}, labels), ref); err != nil {
		t.Fatal(err)
	}
	compare(t, "one_hot", "cpu.Device.OneHot", out.F32(), ref.Data(), 0, 0)
	checkBad(t, "one_hot", bad, -1)

	// Invalid labels: the first is reported, as the CPU device reports it.
	labels[150], labels[90], labels[200] = 4, 1.5, -1
	must(t, ops.OneHot(buf(t, labels), out, bad, tn*tv, c))
	err := dev.OneHot(tensor(nn.Shape{tn, td, th, tw}, labels), ref)
	checkBad(t, "one_hot", bad, 90)
	if err == nil {
		t.Error("CPU device accepted label 1.5")
	}
	compare(t, "one_hot", "cpu.Device.OneHot (with invalid labels)", out.F32(), ref.Data(), 0, 0)
}

// checkBad checks a bad-label cell: want < 0 means none.
func checkBad(t *testing.T, kernel string, bad *Buffer, want int) {
	t.Helper()
	got := int(bad.I32()[0])
	if want < 0 {
		want = 0x7fffffff
	}
	if got != want {
		t.Errorf("kernel %s: first bad label at %d, want %d", kernel, got, want)
	} else {
		t.Logf("kernel %s: first bad label cell %d as expected", kernel, got)
	}
}
