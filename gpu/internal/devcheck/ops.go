package devcheck

import (
	"fmt"
	"strings"

	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/nn"
)

type opTest struct {
	name string
	run  func(k *checker, s [4]int)
}

// act returns the activation shape (N, D, H, W, c).
func act(s [4]int, c int) nn.Shape { return nn.Shape{s[0], s[1], s[2], s[3], c} }

// lab returns the label shape (N, D, H, W).
func lab(s [4]int) nn.Shape { return nn.Shape{s[0], s[1], s[2], s[3]} }

// geoms are the convolutions of a U-Net (and some that are not), on the
// activation size s.
func geoms(s [4]int) []struct {
	name string
	g    geom.Conv
} {
	n, d, h, w := s[0], s[1], s[2], s[3]
	return []struct {
		name string
		g    geom.Conv
	}{
		{"3x3x3 pad 1", geom.Conv{N: n, InD: d, InH: h, InW: w, InC: 3, OutC: 5, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}},
		{"3x3x3 stride 2 pad 1", geom.Conv{N: n, InD: d, InH: h, InW: w, InC: 4, OutC: 6, KD: 3, KH: 3, KW: 3, SD: 2, SH: 2, SW: 2, PD: 1, PH: 1, PW: 1}},
		{"1x3x3 stride (1,2,2)", geom.Conv{N: n, InD: d, InH: h, InW: w, InC: 2, OutC: 3, KD: 1, KH: 3, KW: 3, SD: 1, SH: 2, SW: 2, PD: 0, PH: 1, PW: 1}},
		{"2x2x2 stride 2 (transposed conv's adjoint)", geom.Conv{N: n, InD: d, InH: h, InW: w, InC: 3, OutC: 4, KD: 2, KH: 2, KW: 2, SD: 2, SH: 2, SW: 2}},
		{"1x1x1 head", geom.Conv{N: n, InD: d, InH: h, InW: w, InC: 6, OutC: 3, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}},
	}
}

var opTests = []opTest{
	{"BF16Activations", bf16Activations},
	{"BF16Gradients", bf16Gradients},
	{"AllocUploadDownload", func(k *checker, s [4]int) {
		shape := act(s, 3)
		z := k.dev.Alloc(shape)
		defer k.dev.Free(z)
		compare(k.t, k.name, "Alloc (zero-filled)", download(k.t, k.dev, z), make([]float32, shape.Len()), Exact)
		x := k.uniform(shape.Len(), -3, 3)
		p := k.both(shape, x)
		k.same("Upload then Download", p, Exact)
		v := k.dev.View(p.dev, nn.Shape{shape.Len()})
		compare(k.t, k.name, "View", download(k.t, k.dev, v), x, Exact)
		cur, peak := k.dev.MemoryInUse()
		if cur < 4*int64(shape.Len()) || peak < cur {
			k.t.Errorf("MemoryInUse = %d, %d with a %d-byte tensor live", cur, peak, 4*shape.Len())
		}
		// Download on another stream, ordered after the compute stream by an event.
		cs := k.dev.NewStream()
		k.dev.Fill(p.dev, 2)
		cs.Wait(k.dev.ComputeStream().Record())
		got := make([]float32, shape.Len())
		if err := k.dev.Download(cs, got, p.dev); err != nil {
			k.t.Fatal(err)
		}
		cs.Record().Synchronize()
		want := make([]float32, len(got))
		for i := range want {
			want[i] = 2
		}
		compare(k.t, k.name, "Download on a second stream after an event", got, want, Exact)
		if err := k.dev.Upload(k.dev.ComputeStream(), p.dev, make([]float32, 3)); err == nil {
			k.t.Errorf("Upload of 3 floats into %v accepted", shape)
		}
	}},
	{"Fill", func(k *checker, s [4]int) {
		p := k.zeros(act(s, 3))
		k.dev.Fill(p.dev, -1.5)
		k.ref.Fill(p.ref, -1.5)
		k.same("Fill", p, Exact)
	}},
	{"CopyAddScale", func(k *checker, s [4]int) {
		shape := act(s, 5)
		a := k.both(shape, k.uniform(shape.Len(), -2, 2))
		b := k.both(shape, k.uniform(shape.Len(), -2, 2))
		c := k.zeros(shape)
		k.dev.Copy(c.dev, a.dev)
		k.ref.Copy(c.ref, a.ref)
		k.same("Copy", c, Exact)
		k.dev.Add(c.dev, b.dev)
		k.ref.Add(c.ref, b.ref)
		k.same("Add", c, k.tol.Elementwise)
		k.dev.Scale(c.dev, -0.37)
		k.ref.Scale(c.ref, -0.37)
		k.same("Scale", c, k.tol.Elementwise)
	}},
	{"Layout", func(k *checker, s [4]int) {
		n, c := s[0], 3
		first := nn.Shape{n, c, s[1], s[2], s[3]}
		a := k.both(first, k.uniform(first.Len(), -1, 1))
		last := k.zeros(act(s, c))
		k.dev.NCDHWToNDHWC(a.dev, last.dev)
		k.ref.NCDHWToNDHWC(a.ref, last.ref)
		k.same("NCDHWToNDHWC", last, Exact)
		back := k.zeros(first)
		k.dev.NDHWCToNCDHW(last.dev, back.dev)
		k.ref.NDHWCToNCDHW(last.ref, back.ref)
		k.same("NDHWCToNCDHW", back, Exact)
	}},
	{"ConcatSplit", func(k *checker, s [4]int) {
		// 8 and 16: the kernels' 8-channel paths.
		for _, cc := range [][2]int{{3, 5}, {8, 16}} {
			ca, cb := cc[0], cc[1]
			tag := fmt.Sprintf(" (%d+%d channels)", ca, cb)
			a := k.both(act(s, ca), k.uniform(act(s, ca).Len(), -1, 1))
			b := k.both(act(s, cb), k.uniform(act(s, cb).Len(), -1, 1))
			cat := k.zeros(act(s, ca+cb))
			k.dev.ConcatChannels(a.dev, b.dev, cat.dev)
			k.ref.ConcatChannels(a.ref, b.ref, cat.ref)
			k.same("ConcatChannels"+tag, cat, Exact)
			a2, b2 := k.zeros(act(s, ca)), k.zeros(act(s, cb))
			k.dev.SplitChannels(cat.dev, a2.dev, b2.dev)
			k.ref.SplitChannels(cat.ref, a2.ref, b2.ref)
			k.same("SplitChannels (first)"+tag, a2, Exact)
			k.same("SplitChannels (rest)"+tag, b2, Exact)
		}
	}},
	{"ChannelBiasSum", func(k *checker, s [4]int) {
		for _, c := range []int{1, 7, 40} {
			x := k.both(act(s, c), k.uniform(act(s, c).Len(), -1, 1))
			bias := k.both(nn.Shape{c}, k.uniform(c, -1, 1))
			k.dev.AddChannelBias(x.dev, bias.dev)
			k.ref.AddChannelBias(x.ref, bias.ref)
			k.same(fmt.Sprintf("AddChannelBias (%d channels)", c), x, k.tol.Elementwise)
			sum := k.zeros(nn.Shape{c})
			k.dev.ChannelSum(x.dev, sum.dev)
			k.ref.ChannelSum(x.ref, sum.ref)
			k.same(fmt.Sprintf("ChannelSum (%d channels)", c), sum, k.tol.Reduce)
		}
	}},
	{"DownsampleLabels", func(k *checker, s [4]int) {
		src := k.both(lab(s), k.labels(lab(s).Len(), 4))
		for _, o := range [][3]int{{(s[1] + 1) / 2, (s[2] + 1) / 2, (s[3] + 1) / 2}, {s[1], (s[2] + 3) / 4, 1}} {
			dst := k.zeros(nn.Shape{s[0], o[0], o[1], o[2]})
			k.dev.DownsampleLabels(src.dev, dst.dev)
			k.ref.DownsampleLabels(src.ref, dst.ref)
			k.same(fmt.Sprintf("DownsampleLabels to %v", o), dst, Exact)
		}
	}},
	{"AvgPool", func(k *checker, s [4]int) {
		for _, c := range []int{3, 8} {
			x := k.both(act(s, c), k.uniform(act(s, c).Len(), -1, 1))
			for _, w := range [][3]int{{1, 1, 1}, {min(2, s[1]), min(2, s[2]), min(2, s[3])}, {1, min(3, s[2]), min(2, s[3])}} {
				ps := nn.Shape{s[0], s[1] / w[0], s[2] / w[1], s[3] / w[2], c}
				y := k.zeros(ps)
				k.dev.AvgPool(x.dev, y.dev, w)
				k.ref.AvgPool(x.ref, y.ref, w)
				k.same(fmt.Sprintf("AvgPool window %v (%d channels)", w, c), y, Exact)
				dy := k.both(ps, k.uniform(ps.Len(), -1, 1))
				dx := k.both(act(s, c), k.uniform(act(s, c).Len(), 5, 6)) // overwritten
				k.dev.AvgPoolBackward(dy.dev, dx.dev, w)
				k.ref.AvgPoolBackward(dy.ref, dx.ref, w)
				k.same(fmt.Sprintf("AvgPoolBackward window %v (%d channels)", w, c), dx, Exact)
			}
		}
	}},
	{"Conv3D", func(k *checker, s [4]int) {
		for _, gc := range geoms(s) {
			g := gc.g
			x := k.both(g.InShape(), k.uniform(g.InLen(), -1, 1))
			w := k.both(g.WeightShape(), k.uniform(g.WeightLen(), -1, 1))
			b := k.both(nn.Shape{g.OutC}, k.uniform(g.OutC, -1, 1))
			dy := k.both(g.OutShape(), k.uniform(g.OutLen(), -1, 1))
			y := k.zeros(g.OutShape())
			k.dev.Conv3DForward(g, x.dev, w.dev, b.dev, y.dev)
			k.ref.Conv3DForward(g, x.ref, w.ref, b.ref, y.ref)
			k.same("Conv3DForward "+gc.name, y, k.tol.Conv)
			k.dev.Conv3DForward(g, x.dev, w.dev, nil, y.dev)
			k.ref.Conv3DForward(g, x.ref, w.ref, nil, y.ref)
			k.same("Conv3DForward without bias "+gc.name, y, k.tol.Conv)
			// Garbage in dx and dw first: both are overwritten.
			dx := k.both(g.InShape(), k.uniform(g.InLen(), 5, 6))
			k.dev.Conv3DBackwardData(g, dy.dev, w.dev, dx.dev)
			k.ref.Conv3DBackwardData(g, dy.ref, w.ref, dx.ref)
			k.same("Conv3DBackwardData "+gc.name, dx, k.tol.Conv)
			dw := k.both(g.WeightShape(), k.uniform(g.WeightLen(), 5, 6))
			db := k.both(nn.Shape{g.OutC}, k.uniform(g.OutC, 5, 6))
			k.dev.Conv3DBackwardWeight(g, x.dev, dy.dev, dw.dev, db.dev)
			k.ref.Conv3DBackwardWeight(g, x.ref, dy.ref, dw.ref, db.ref)
			k.same("Conv3DBackwardWeight (dw) "+gc.name, dw, k.tol.Conv)
			k.same("Conv3DBackwardWeight (db) "+gc.name, db, k.tol.Reduce)
			k.dev.Conv3DBackwardWeight(g, x.dev, dy.dev, dw.dev, nil)
			k.ref.Conv3DBackwardWeight(g, x.ref, dy.ref, dw.ref, nil)
			k.same("Conv3DBackwardWeight without db "+gc.name, dw, k.tol.Conv)
		}
	}},
	{"InstanceNormAct", func(k *checker, s [4]int) {
		for _, c := range []int{1, 6, 33, 40} { // 40: the kernels' 8-channel paths
			shape := act(s, c)
			xs := k.uniform(shape.Len(), -2, 3)
			for i := range xs[:c] {
				xs[i] += 5 // an outlier voxel per channel
			}
			x := k.both(shape, xs)
			gamma := k.both(nn.Shape{c}, k.uniform(c, 0.5, 1.5))
			beta := k.both(nn.Shape{c}, k.uniform(c, -0.5, 0.5))
			dyv := k.uniform(shape.Len(), -1, 1)
			for _, slope := range []float32{0.01, 0, 1} {
				tag := fmt.Sprintf("(%d channels, slope %g)", c, slope)
				y, stats := k.zeros(shape), k.zeros(nn.Shape{s[0], c, 2})
				k.dev.InstanceNormActForward(x.dev, gamma.dev, beta.dev, y.dev, stats.dev, 1e-5, slope)
				k.ref.InstanceNormActForward(x.ref, gamma.ref, beta.ref, y.ref, stats.ref, 1e-5, slope)
				k.same("InstanceNormActForward stats "+tag, stats, k.tol.Reduce)
				k.same("InstanceNormActForward y "+tag, y, k.tol.Norm)
				// dx aliases dy, as in nn.
				dy := k.both(shape, dyv)
				dg, dbt := k.zeros(nn.Shape{c}), k.zeros(nn.Shape{c})
				k.dev.InstanceNormActBackward(x.dev, gamma.dev, beta.dev, stats.dev, dy.dev, dy.dev, dg.dev, dbt.dev, slope)
				k.ref.InstanceNormActBackward(x.ref, gamma.ref, beta.ref, stats.ref, dy.ref, dy.ref, dg.ref, dbt.ref, slope)
				k.same("InstanceNormActBackward dx "+tag, dy, k.tol.Norm)
				k.same("InstanceNormActBackward dgamma "+tag, dg, k.tol.Norm)
				k.same("InstanceNormActBackward dbeta "+tag, dbt, k.tol.Norm)
			}
		}
	}},
	{"Activation", func(k *checker, s [4]int) {
		shape := act(s, 4)
		xv := k.uniform(shape.Len(), -1, 1)
		for _, slope := range []float32{0.01, 0, 1} {
			x := k.both(shape, xv)
			y := k.zeros(shape)
			k.dev.ActForward(x.dev, y.dev, slope)
			k.ref.ActForward(x.ref, y.ref, slope)
			k.same(fmt.Sprintf("ActForward slope %g", slope), y, k.tol.Elementwise)
			k.dev.ActForward(x.dev, x.dev, slope) // in place
			k.ref.ActForward(x.ref, x.ref, slope)
			k.same(fmt.Sprintf("ActForward in place slope %g", slope), x, k.tol.Elementwise)
			dy := k.both(shape, k.uniform(shape.Len(), -1, 1))
			dx := k.zeros(shape)
			k.dev.ActBackward(y.dev, dy.dev, dx.dev, slope)
			k.ref.ActBackward(y.ref, dy.ref, dx.ref, slope)
			k.same(fmt.Sprintf("ActBackward slope %g", slope), dx, k.tol.Elementwise)
		}
	}},
	{"SoftmaxLoss", func(k *checker, s [4]int) {
		for _, c := range []int{2, 3, 7} {
			shape := act(s, c)
			logits := k.both(shape, k.uniform(shape.Len(), -4, 4))
			labels := k.both(lab(s), k.labels(lab(s).Len(), c))
			probs := k.zeros(shape)
			k.dev.Softmax(logits.dev, probs.dev)
			k.ref.Softmax(logits.ref, probs.ref)
			k.same(fmt.Sprintf("Softmax (%d classes)", c), probs, k.tol.Softmax)
			probs = k.zeros(shape)
			got, err := k.dev.SoftmaxLoss(logits.dev, labels.dev, probs.dev)
			if err != nil {
				k.t.Fatal(err)
			}
			want, err := k.ref.SoftmaxLoss(logits.ref, labels.ref, probs.ref)
			if err != nil {
				k.t.Fatal(err)
			}
			k.same(fmt.Sprintf("SoftmaxLoss probs (%d classes)", c), probs, k.tol.Softmax)
			compare(k.t, k.name, "SoftmaxLoss CE", got.CE, want.CE, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLoss Intersect", got.Intersect, want.Intersect, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLoss PredSum", got.PredSum, want.PredSum, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLoss TargetSum", got.TargetSum, want.TargetSum, Exact)
			if got.N != want.N || got.C != want.C || got.Voxels != want.Voxels {
				k.t.Errorf("SegStats header (%d, %d, %d), cpu (%d, %d, %d)", got.N, got.C, got.Voxels, want.N, want.C, want.Voxels)
			}
			for _, withExtra := range []bool{false, true} {
				var ed, ec nn.Tensor
				if withExtra {
					e := k.both(shape, k.uniform(shape.Len(), -0.5, 0.5))
					ed, ec = e.dev, e.ref
				}
				ce := k.uniform(s[0], 0.1, 1)
				al, be := k.uniform(s[0]*c, -1, 1), k.uniform(s[0]*c, -1, 1)
				dl := k.zeros(shape)
				k.dev.SoftmaxLossBackward(probs.dev, labels.dev, ce, al, be, ed, dl.dev)
				k.ref.SoftmaxLossBackward(probs.ref, labels.ref, ce, al, be, ec, dl.ref)
				k.same(fmt.Sprintf("SoftmaxLossBackward (%d classes, extra %v)", c, withExtra), dl, k.tol.Softmax)
			}
		}
		// A bad label is an error naming the first bad voxel on both devices.
		c := 3
		shape := act(s, c)
		lv := k.labels(lab(s).Len(), c)
		lv[len(lv)-2], lv[len(lv)/2] = 3, 0.5
		logits := k.both(shape, k.uniform(shape.Len(), -4, 4))
		labels := k.both(lab(s), lv)
		_, gerr := k.dev.SoftmaxLoss(logits.dev, labels.dev, k.zeros(shape).dev)
		_, werr := k.ref.SoftmaxLoss(logits.ref, labels.ref, k.zeros(shape).ref)
		sameError(k, "SoftmaxLoss", gerr, werr)
	}},
	{"LossIgnore", func(k *checker, s [4]int) {
		// loss.ignore_label: nn.IgnoreLossDevice's ops against the CPU's,
		// with about a third of the voxels and all of the last sample
		// labelled ignore.
		idev, ok := k.dev.(nn.IgnoreLossDevice)
		if !ok {
			k.t.Fatalf("%s does not implement nn.IgnoreLossDevice", k.dev.Name())
		}
		for _, c := range []int{2, 3} {
			ignore := c + 1
			shape := act(s, c)
			lv := k.labels(lab(s).Len(), c+1)
			per := lab(s).Len() / s[0]
			for i, l := range lv {
				if int(l) == c || i >= (s[0]-1)*per {
					lv[i] = float32(ignore)
				}
			}
			logits := k.both(shape, k.uniform(shape.Len(), -4, 4))
			labels := k.both(lab(s), lv)
			probs := k.zeros(shape)
			got, err := idev.SoftmaxLossIgnore(logits.dev, labels.dev, probs.dev, ignore)
			if err != nil {
				k.t.Fatal(err)
			}
			want, err := k.ref.SoftmaxLossIgnore(logits.ref, labels.ref, probs.ref, ignore)
			if err != nil {
				k.t.Fatal(err)
			}
			tag := fmt.Sprintf("(%d classes, ignore %d)", c, ignore)
			k.same("SoftmaxLossIgnore probs "+tag, probs, k.tol.Softmax)
			compare(k.t, k.name, "SoftmaxLossIgnore CE "+tag, got.CE, want.CE, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLossIgnore Counted "+tag, got.Counted, want.Counted, Exact)
			compare(k.t, k.name, "SoftmaxLossIgnore Intersect "+tag, got.Intersect, want.Intersect, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLossIgnore PredSum "+tag, got.PredSum, want.PredSum, k.tol.Sum64)
			compare(k.t, k.name, "SoftmaxLossIgnore TargetSum "+tag, got.TargetSum, want.TargetSum, Exact)
			ce := k.uniform(s[0], 0.1, 1)
			al, be := k.uniform(s[0]*c, -1, 1), k.uniform(s[0]*c, -1, 1)
			dl := k.both(shape, k.uniform(shape.Len(), 5, 6)) // stale values are overwritten
			idev.SoftmaxLossBackwardIgnore(probs.dev, labels.dev, ce, al, be, nil, dl.dev, ignore)
			k.ref.SoftmaxLossBackwardIgnore(probs.ref, labels.ref, ce, al, be, nil, dl.ref, ignore)
			k.same("SoftmaxLossBackwardIgnore "+tag, dl, k.tol.Softmax)
			tp, fp, fn, err := idev.SegCountsIgnore(logits.dev, labels.dev, ignore)
			if err != nil {
				k.t.Fatal(err)
			}
			wtp, wfp, wfn, err := k.ref.SegCountsIgnore(logits.ref, labels.ref, ignore)
			if err != nil {
				k.t.Fatal(err)
			}
			compare(k.t, k.name, "SegCountsIgnore TP "+tag, f64(tp), f64(wtp), Exact)
			compare(k.t, k.name, "SegCountsIgnore FP "+tag, f64(fp), f64(wfp), Exact)
			compare(k.t, k.name, "SegCountsIgnore FN "+tag, f64(fn), f64(wfn), Exact)
		}
	}},
	{"MultiLabelLoss", multiLabelLoss},
	{"MultiLabelCriterion", multiLabelCriterion},
	{"SigmoidBCE", func(k *checker, s [4]int) {
		shape := act(s, 1)
		logits := k.both(shape, k.uniform(shape.Len(), -6, 6))
		labels := k.both(lab(s), k.labels(lab(s).Len(), 2))
		dl := k.zeros(shape)
		got, err := k.dev.SigmoidBCE(logits.dev, labels.dev, 2.5, 0.3, dl.dev)
		if err != nil {
			k.t.Fatal(err)
		}
		want, err := k.ref.SigmoidBCE(logits.ref, labels.ref, 2.5, 0.3, dl.ref)
		if err != nil {
			k.t.Fatal(err)
		}
		compare(k.t, k.name, "SigmoidBCE sums", got, want, k.tol.Sum64)
		k.same("SigmoidBCE dlogits", dl, k.tol.Softmax)
		lv := k.labels(lab(s).Len(), 2)
		lv[7] = 2
		bad := k.both(lab(s), lv)
		_, gerr := k.dev.SigmoidBCE(logits.dev, bad.dev, 1, 1, k.zeros(shape).dev)
		_, werr := k.ref.SigmoidBCE(logits.ref, bad.ref, 1, 1, k.zeros(shape).ref)
		sameError(k, "SigmoidBCE", gerr, werr)
	}},
	{"OneHot", func(k *checker, s [4]int) {
		c := 4
		labels := k.both(lab(s), k.labels(lab(s).Len(), c))
		dst := k.both(act(s, c), k.uniform(act(s, c).Len(), 3, 4))
		if err := k.dev.OneHot(labels.dev, dst.dev); err != nil {
			k.t.Fatal(err)
		}
		if err := k.ref.OneHot(labels.ref, dst.ref); err != nil {
			k.t.Fatal(err)
		}
		k.same("OneHot", dst, Exact)
		lv := k.labels(lab(s).Len(), c)
		lv[3] = -1
		bad := k.both(lab(s), lv)
		sameError(k, "OneHot", k.dev.OneHot(bad.dev, k.zeros(act(s, c)).dev), k.ref.OneHot(bad.ref, k.zeros(act(s, c)).ref))
	}},
	{"SoftSkeleton", func(k *checker, s [4]int) {
		c := 2
		shape := act(s, c)
		xv := make([]float32, shape.Len())
		for i := range xv {
			xv[i] = float32(k.rng.IntN(5)) / 4 // ties, as in probability maps
		}
		x := k.both(shape, xv)
		for _, it := range []struct{ iters, fromC int }{{3, 1}, {0, 0}} {
			tag := fmt.Sprintf("(%d iterations, from channel %d)", it.iters, it.fromC)
			sk := k.zeros(shape)
			k.dev.SoftSkeleton(x.dev, sk.dev, it.iters, it.fromC)
			k.ref.SoftSkeleton(x.ref, sk.ref, it.iters, it.fromC)
			k.same("SoftSkeleton "+tag, sk, k.tol.Elementwise)
			ds := k.both(shape, k.uniform(shape.Len(), -1, 1))
			dx := k.both(shape, k.uniform(shape.Len(), -1, 1))
			k.dev.SoftSkeletonBackward(x.dev, ds.dev, dx.dev, it.iters, it.fromC)
			k.ref.SoftSkeletonBackward(x.ref, ds.ref, dx.ref, it.iters, it.fromC)
			k.same("SoftSkeletonBackward "+tag, dx, k.tol.Elementwise)
		}
	}},
	{"ChannelDotAffine", func(k *checker, s [4]int) {
		for _, c := range []int{1, 4} {
			shape := act(s, c)
			a := k.both(shape, k.uniform(shape.Len(), -1, 1))
			b := k.both(shape, k.uniform(shape.Len(), -1, 1))
			compare(k.t, k.name, fmt.Sprintf("ChannelDot a·b (%d channels)", c), k.dev.ChannelDot(a.dev, b.dev), k.ref.ChannelDot(a.ref, b.ref), k.tol.Sum64)
			compare(k.t, k.name, fmt.Sprintf("ChannelDot sums (%d channels)", c), k.dev.ChannelDot(a.dev, nil), k.ref.ChannelDot(a.ref, nil), k.tol.Sum64)
			al, be := k.uniform(s[0]*c, -1, 1), k.uniform(s[0]*c, -1, 1)
			dst := k.both(shape, k.uniform(shape.Len(), -1, 1))
			k.dev.ChannelAffineAdd(dst.dev, a.dev, al, be)
			k.ref.ChannelAffineAdd(dst.ref, a.ref, al, be)
			k.same(fmt.Sprintf("ChannelAffineAdd alpha·a + beta (%d channels)", c), dst, k.tol.Elementwise)
			k.dev.ChannelAffineAdd(dst.dev, nil, nil, be)
			k.ref.ChannelAffineAdd(dst.ref, nil, nil, be)
			k.same(fmt.Sprintf("ChannelAffineAdd beta only (%d channels)", c), dst, k.tol.Elementwise)
			k.dev.ChannelAffineAdd(dst.dev, a.dev, al, nil)
			k.ref.ChannelAffineAdd(dst.ref, a.ref, al, nil)
			k.same(fmt.Sprintf("ChannelAffineAdd alpha·a only (%d channels)", c), dst, k.tol.Elementwise)
		}
	}},
	{"SegCounts", func(k *checker, s [4]int) {
		for _, c := range []int{1, 3} {
			kc := max(c, 2)
			lv := k.uniform(act(s, c).Len(), -1, 1)
			for i := 0; i+1 < len(lv) && c > 1; i += 17 {
				lv[i+1] = lv[i] // ties go to the lower class on both devices
			}
			logits := k.both(act(s, c), lv)
			labels := k.both(lab(s), k.labels(lab(s).Len(), kc))
			tp, fp, fn, err := k.dev.SegCounts(logits.dev, labels.dev)
			if err != nil {
				k.t.Fatal(err)
			}
			wtp, wfp, wfn, err := k.ref.SegCounts(logits.ref, labels.ref)
			if err != nil {
				k.t.Fatal(err)
			}
			compare(k.t, k.name, fmt.Sprintf("SegCounts TP (%d channels)", c), f64(tp), f64(wtp), Exact)
			compare(k.t, k.name, fmt.Sprintf("SegCounts FP (%d channels)", c), f64(fp), f64(wfp), Exact)
			compare(k.t, k.name, fmt.Sprintf("SegCounts FN (%d channels)", c), f64(fn), f64(wfn), Exact)
		}
		lv := k.labels(lab(s).Len(), 3)
		lv[11] = 3
		bad := k.both(lab(s), lv)
		logits := k.both(act(s, 3), k.uniform(act(s, 3).Len(), -1, 1))
		_, _, _, gerr := k.dev.SegCounts(logits.dev, bad.dev)
		_, _, _, werr := k.ref.SegCounts(logits.ref, bad.ref)
		sameError(k, "SegCounts", gerr, werr)
	}},
	{"Optimisers", func(k *checker, s [4]int) {
		n := s[0]*s[1]*s[2]*s[3]*3 + 1
		var ds, cs []nn.Tensor
		for i := 0; i < 3; i++ {
			p := k.both(nn.Shape{n - i}, k.uniform(n-i, -2, 2))
			ds, cs = append(ds, p.dev), append(cs, p.ref)
		}
		compare(k.t, k.name, "SumSquares of 3 tensors", k.dev.SumSquares(ds), k.ref.SumSquares(cs), k.tol.Sum64)
		// Every parameter in one call: tensors of n, 1 and n-2 elements.
		sizes := []int{n, 1, n - 2}
		params := func(fill func(n int) []float32) []pair {
			var ps []pair
			for _, m := range sizes {
				ps = append(ps, k.both(nn.Shape{m}, fill(m)))
			}
			return ps
		}
		sides := func(ps []pair) (dev, ref []nn.Tensor) {
			for _, p := range ps {
				dev, ref = append(dev, p.dev), append(ref, p.ref)
			}
			return dev, ref
		}
		uniform := func(m int) []float32 { return k.uniform(m, -1, 1) }
		zeros := func(m int) []float32 { return make([]float32, m) }
		w, g, buf := params(uniform), params(uniform), params(zeros)
		wd, wr := sides(w)
		gd, gr := sides(g)
		bd, br := sides(buf)
		for _, a := range []nn.SGDArgs{
			{LR: 0.01, Momentum: 0.99, WeightDecay: 3e-5, Nesterov: true, GradScale: 1},
			{LR: 0.02, Momentum: 0.9, GradScale: 0.5},
			{LR: 0.05, GradScale: 1, WeightDecay: 1e-4}, // the buffers are left alone
		} {
			k.dev.SGDUpdate(wd, gd, bd, a)
			k.ref.SGDUpdate(wr, gr, br, a)
			for i := range sizes {
				k.same(fmt.Sprintf("SGDUpdate w[%d] (%+v)", i, a), w[i], k.tol.Elementwise)
				k.same(fmt.Sprintf("SGDUpdate momentum buffer[%d] (%+v)", i, a), buf[i], k.tol.Elementwise)
			}
		}
		m, v := params(zeros), params(zeros)
		md, mr := sides(m)
		vd, vr := sides(v)
		for step := 1; step <= 3; step++ {
			a := nn.AdamWArgs{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step, GradScale: 0.8}
			k.dev.AdamWUpdate(wd, gd, md, vd, a)
			k.ref.AdamWUpdate(wr, gr, mr, vr, a)
			for i := range sizes {
				k.same(fmt.Sprintf("AdamWUpdate w[%d] (step %d)", i, step), w[i], k.tol.Elementwise)
				k.same(fmt.Sprintf("AdamWUpdate m[%d] (step %d)", i, step), m[i], k.tol.Elementwise)
				k.same(fmt.Sprintf("AdamWUpdate v[%d] (step %d)", i, step), v[i], k.tol.Elementwise)
			}
		}
	}},
}

// sameError checks that both devices reject an input, with errors naming
// the same label and voxel.
func sameError(k *checker, op string, got, want error) {
	k.t.Helper()
	if want == nil {
		k.t.Fatalf("%s: the CPU device accepted the bad labels", op)
	}
	if got == nil {
		k.t.Errorf("%s on %s accepted bad labels; the CPU says %v", op, k.name, want)
		return
	}
	// Messages name the op first; compare from the label on.
	g, w := got.Error(), want.Error()
	if i := strings.Index(g, "label"); i >= 0 {
		g = g[i:]
	}
	if i := strings.Index(w, "label"); i >= 0 {
		w = w[i:]
	}
	if g != w {
		k.t.Errorf("%s: error %q, the CPU says %q", op, got, want)
	}
	k.t.Logf("%s vs cpu: %s rejects bad labels as the CPU does: %v", k.name, op, got)
}

func f64[T int64 | float32](x []T) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
