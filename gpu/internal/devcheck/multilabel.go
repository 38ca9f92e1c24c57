package devcheck

import (
	"fmt"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// multiLabels returns n random bit-packed labels of c classes (any subset
// of the bits: overlapping classes); with ignore about a quarter of them,
// and all of the last sample (per voxels each), are the ignore byte 255.
func (k *checker) multiLabels(n, per, c int, ignore bool) []float32 {
	x := k.labels(n, 1<<c)
	if ignore {
		for i := range x {
			if k.rng.IntN(4) == 0 || i >= n-per {
				x[i] = 255
			}
		}
	}
	return x
}

// multiLabelLoss compares nn.MultiLabelLossDevice's ops (loss dice_bce on
// sigmoid outputs) with the CPU's: 1, 3 and 7 channels, with and without
// ignored voxels (all of the last sample among them), then bad labels.
// (Four of the six pairs: these run under emulation in every make test.)
func multiLabelLoss(k *checker, s [4]int) {
	mdev, ok := k.dev.(nn.MultiLabelLossDevice)
	if !ok {
		k.t.Fatalf("%s does not implement nn.MultiLabelLossDevice", k.dev.Name())
	}
	per := lab(s).Len() / s[0]
	for _, tc := range []struct {
		c      int
		ignore bool
	}{{1, true}, {3, false}, {3, true}, {7, false}} {
		c, ignore := tc.c, tc.ignore
		shape := act(s, c)
		tag := fmt.Sprintf("(%d channels, ignore %v)", c, ignore)
		logits := k.both(shape, k.uniform(shape.Len(), -6, 6))
		labels := k.both(lab(s), k.multiLabels(lab(s).Len(), per, c, ignore))
		probs := k.zeros(shape)
		got, err := mdev.SigmoidMultiLabelLoss(logits.dev, labels.dev, probs.dev, ignore)
		if err != nil {
			k.t.Fatal(err)
		}
		want, err := k.ref.SigmoidMultiLabelLoss(logits.ref, labels.ref, probs.ref, ignore)
		if err != nil {
			k.t.Fatal(err)
		}
		k.same("SigmoidMultiLabelLoss probs "+tag, probs, k.tol.Softmax)
		compare(k.t, k.name, "SigmoidMultiLabelLoss BCE "+tag, got.CE, want.CE, k.tol.Sum64)
		compare(k.t, k.name, "SigmoidMultiLabelLoss Counted "+tag, got.Counted, want.Counted, Exact)
		compare(k.t, k.name, "SigmoidMultiLabelLoss Intersect "+tag, got.Intersect, want.Intersect, k.tol.Sum64)
		compare(k.t, k.name, "SigmoidMultiLabelLoss PredSum "+tag, got.PredSum, want.PredSum, k.tol.Sum64)
		compare(k.t, k.name, "SigmoidMultiLabelLoss TargetSum "+tag, got.TargetSum, want.TargetSum, Exact)
		if got.N != want.N || got.C != want.C || got.Voxels != want.Voxels {
			k.t.Errorf("SegStats header (%d, %d, %d), cpu (%d, %d, %d)", got.N, got.C, got.Voxels, want.N, want.C, want.Voxels)
		}
		// Per sample and channel; sample 0's last channel unknown (all
		// three zero: a zero gradient).
		bs := k.uniform(s[0]*c, 0.1, 1)
		al, be := k.uniform(s[0]*c, -1, 1), k.uniform(s[0]*c, -1, 1)
		bs[c-1], al[c-1], be[c-1] = 0, 0, 0
		dl := k.both(shape, k.uniform(shape.Len(), 5, 6)) // stale values are overwritten
		mdev.SigmoidMultiLabelLossBackward(probs.dev, labels.dev, bs, al, be, dl.dev, ignore)
		k.ref.SigmoidMultiLabelLossBackward(probs.ref, labels.ref, bs, al, be, dl.ref, ignore)
		k.same("SigmoidMultiLabelLossBackward "+tag, dl, k.tol.Softmax)
		tp, fp, fn, err := mdev.SegCountsMultiLabel(logits.dev, labels.dev, ignore)
		if err != nil {
			k.t.Fatal(err)
		}
		wtp, wfp, wfn, err := k.ref.SegCountsMultiLabel(logits.ref, labels.ref, ignore)
		if err != nil {
			k.t.Fatal(err)
		}
		compare(k.t, k.name, "SegCountsMultiLabel TP "+tag, f64(tp), f64(wtp), Exact)
		compare(k.t, k.name, "SegCountsMultiLabel FP "+tag, f64(fp), f64(wfp), Exact)
		compare(k.t, k.name, "SegCountsMultiLabel FN "+tag, f64(fn), f64(wfn), Exact)
	}
	// Bad labels (a bit ≥ C, a fraction, 255 without ignore) are an error
	// naming the first on both devices.
	const c = 3
	shape := act(s, c)
	for _, ignore := range []bool{false, true} {
		lv := k.multiLabels(lab(s).Len(), per, c, false)
		lv[len(lv)-2], lv[len(lv)/2], lv[len(lv)/3] = 8, 2.5, 255
		logits := k.both(shape, k.uniform(shape.Len(), -4, 4))
		labels := k.both(lab(s), lv)
		_, gerr := mdev.SigmoidMultiLabelLoss(logits.dev, labels.dev, k.zeros(shape).dev, ignore)
		_, werr := k.ref.SigmoidMultiLabelLoss(logits.ref, labels.ref, k.zeros(shape).ref, ignore)
		sameError(k, fmt.Sprintf("SigmoidMultiLabelLoss (ignore %v)", ignore), gerr, werr)
		_, _, _, gerr = mdev.SegCountsMultiLabel(logits.dev, labels.dev, ignore)
		_, _, _, werr = k.ref.SegCountsMultiLabel(logits.ref, labels.ref, ignore)
		sameError(k, fmt.Sprintf("SegCountsMultiLabel (ignore %v)", ignore), gerr, werr)
	}
}

// multiLabelCriterion runs nn's dice_bce Criterion (nnU-Net's
// DC_and_BCE_loss on sigmoid outputs) on three deep-supervised outputs of
// 3 channels on both devices, per-sample and batch Dice, with and without
// ignored voxels and unknown classes (each sample's crop leaving one class
// out), and compares the loss and the gradient of each output.
func multiLabelCriterion(k *checker, s [4]int) {
	const c = 3
	half := func(x [4]int) [4]int { return [4]int{x[0], (x[1] + 1) / 2, (x[2] + 1) / 2, (x[3] + 1) / 2} }
	sizes := [][4]int{s, half(s), half(half(s))}
	per := lab(s).Len() / s[0]
	unknown := make([]uint8, s[0])
	for b := range unknown {
		unknown[b] = 1 << (b % c)
	}
	for _, tc := range []struct{ batch, ignore, unknown bool }{{false, false, false}, {true, true, false}, {false, true, false}, {false, false, true}, {true, true, true}} {
		cfg := Loss("dice_bce", tc.batch)
		// nnU-Net's weights give the lowest output 0: weigh all three.
		cfg.DeepSupervisionWeights = []float64{4, 2, 1}
		if tc.ignore {
			ig := 255
			cfg.IgnoreLabel = &ig
		}
		var shapes []nn.Shape
		var outs []pair
		for _, z := range sizes {
			shapes = append(shapes, act(z, c))
			outs = append(outs, k.both(act(z, c), k.uniform(act(z, c).Len(), -4, 4)))
		}
		labels := k.both(lab(s), k.multiLabels(lab(s).Len(), per, c, tc.ignore))
		tag := fmt.Sprintf("(batch Dice %v, ignore %v, unknown classes %v)", tc.batch, tc.ignore, tc.unknown)
		run := func(dev nn.Device, side func(pair) nn.Tensor) (nn.LossValue, []nn.Tensor) {
			crit, err := nn.NewCriterion(dev, cfg, shapes)
			if err != nil {
				k.t.Fatalf("%s: %v", dev.Name(), err)
			}
			k.t.Cleanup(crit.Free)
			if tc.unknown {
				if err := crit.AllowUnknown(); err != nil {
					k.t.Fatal(err)
				}
				crit.SetUnknown(unknown)
			}
			var ts []nn.Tensor
			for _, o := range outs {
				ts = append(ts, side(o))
			}
			v, err := crit.Compute(ts, side(labels))
			if err != nil {
				k.t.Fatalf("%s: dice_bce %s: %v", dev.Name(), tag, err)
			}
			return v, crit.Grads()
		}
		got, gg := run(k.dev, func(p pair) nn.Tensor { return p.dev })
		want, wg := run(k.ref, func(p pair) nn.Tensor { return p.ref })
		if want.BCE == 0 || want.Dice == 0 {
			k.t.Fatalf("dice_bce %s: CPU loss %+v has a zero term", tag, want)
		}
		compare(k.t, k.name, "dice_bce Total, BCE, Dice "+tag, []float64{got.Total, got.BCE, got.Dice}, []float64{want.Total, want.BCE, want.Dice}, k.tol.Sum64)
		// The gradients are of the order of 1/voxels: compared relative
		// to their largest, as the op tests' gradients of order 1 are.
		for i := range gg {
			g, w := download(k.t, k.dev, gg[i]), append([]float32(nil), wg[i].(*cpu.Tensor).Data()...)
			m := float32(0)
			for _, x := range w {
				m = max(m, x, -x)
			}
			if m == 0 {
				k.t.Fatalf("dice_bce %s: the CPU's gradient of output %d is zero", tag, i)
			}
			for j := range w {
				g[j], w[j] = g[j]/m, w[j]/m
			}
			compare(k.t, k.name, fmt.Sprintf("dice_bce gradient of output %d / its max %.3g %s", i, m, tag), g, w, k.tol.Softmax)
		}
	}
}
