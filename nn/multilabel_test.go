package nn_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
)

// directMultiLabel is nnU-Net's DC_and_BCE_loss written out in float64
// over (N, V, C) logits and bit-packed labels (255 ignored when ignore):
// BCE averaged over the kept voxels' elements, soft Dice on σ per channel
// (per sample, or over the batch), every channel counted.
//
// unknown (nil: none) marks per sample the classes its crop does not
// annotate: those (sample, class) pairs are in no term and no count, and
// a class no sample knows is left out of the batch Dice's mean.
func directMultiLabel(z []float32, lab []float32, n, c int, batch, ignore bool, smooth float64, unknown []uint8) (bce, dice float64) {
	known := func(b, j int) bool { return unknown == nil || unknown[b]>>j&1 == 0 }
	v := len(lab) / n
	inter := make([]float64, n*c)
	psum := make([]float64, n*c)
	tsum := make([]float64, n*c)
	var count float64
	for b := 0; b < n; b++ {
		for i := 0; i < v; i++ {
			l := int(lab[b*v+i])
			if ignore && l == 255 {
				continue
			}
			for j := 0; j < c; j++ {
				if !known(b, j) {
					continue
				}
				count++
				x := float64(z[(b*v+i)*c+j])
				p := 1 / (1 + math.Exp(-x))
				t := float64(l >> j & 1)
				bce += -(t*math.Log(p) + (1-t)*math.Log(1-p))
				inter[b*c+j] += p * t
				psum[b*c+j] += p
				tsum[b*c+j] += t
			}
		}
	}
	bce /= count
	dc := func(i, p, t float64) float64 { return (2*i + smooth) / math.Max(p+t+smooth, 1e-8) }
	var mean float64
	if batch {
		var terms []float64
		for j := 0; j < c; j++ {
			var i, p, t float64
			some := false
			for b := 0; b < n; b++ {
				if known(b, j) {
					i, p, t, some = i+inter[b*c+j], p+psum[b*c+j], t+tsum[b*c+j], true
				}
			}
			if some {
				terms = append(terms, dc(i, p, t))
			}
		}
		for _, x := range terms {
			mean += x / float64(len(terms))
		}
	} else {
		var terms []float64
		for k := range inter {
			if known(k/c, k%c) {
				terms = append(terms, dc(inter[k], psum[k], tsum[k]))
			}
		}
		for _, x := range terms {
			mean += x / float64(len(terms))
		}
	}
	return bce, 1 - mean
}

// TestMultiLabelLossValue holds dice_bce's value to the direct
// computation, with overlapping classes, with and without ignored voxels
// and batch Dice, and its validation counts to a direct count of
// σ > 0.5 against each bit.
func TestMultiLabelLossValue(t *testing.T) {
	dev := cpu.New(cpu.Options{Threads: 2})
	for _, tc := range []struct {
		batch, ignore bool
		wBCE          float64
	}{{false, false, 1}, {true, false, 1}, {false, true, 0.5}, {true, true, 2}} {
		const n, c = 2, 3
		s := nn.Shape{n, 3, 4, 5, c}
		rng := rand.New(rand.NewPCG(5, 9))
		z := randn(rng, s.Len(), 2)
		lab := randomLabels(rng, n, s[1], s[2], s[3], 1<<c)
		if tc.ignore {
			for i := range lab {
				if rng.IntN(5) == 0 {
					lab[i] = 255
				}
			}
		}
		cfg := loss("dice_bce", func(l *config.Loss) {
			l.BatchDice, l.CEWeight = tc.batch, ptr(tc.wBCE)
			if tc.ignore {
				l.IgnoreLabel = ptr(255)
			}
		})
		crit, err := nn.NewCriterion(dev, cfg, []nn.Shape{s})
		if err != nil {
			t.Fatal(err)
		}
		logits, labels := upload(t, dev, s, z), upload(t, dev, s[:4], lab)
		got, err := crit.Compute([]nn.Tensor{logits}, labels)
		if err != nil {
			t.Fatal(err)
		}
		bce, dice := directMultiLabel(z, lab, n, c, tc.batch, tc.ignore, cfg.Smooth, nil)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*(1+math.Abs(b)) }
		if !near(got.BCE, bce) || !near(got.Dice, dice) || !near(got.Total, tc.wBCE*bce+dice) {
			t.Errorf("%+v: loss %+v, direct BCE %v Dice %v total %v", tc, got, bce, dice, tc.wBCE*bce+dice)
		}
		tp, fp, fn, err := dev.SegCountsMultiLabel(logits, labels, tc.ignore)
		if err != nil {
			t.Fatal(err)
		}
		// Per sample and class: a sample's unknown classes are left out
		// of the validation counts by the caller.
		v := len(lab) / n
		for b := 0; b < n; b++ {
			for j := 0; j < c; j++ {
				var wtp, wfp, wfn int64
				for i := b * v; i < (b+1)*v; i++ {
					l := lab[i]
					if tc.ignore && l == 255 {
						continue
					}
					pred, truth := z[i*c+j] > 0, int(l)>>j&1 == 1
					switch {
					case pred && truth:
						wtp++
					case pred:
						wfp++
					case truth:
						wfn++
					}
				}
				if k := b*c + j; tp[k] != wtp || fp[k] != wfp || fn[k] != wfn {
					t.Errorf("%+v sample %d class %d: TP/FP/FN %d/%d/%d, want %d/%d/%d", tc, b, j, tp[k], fp[k], fn[k], wtp, wfp, wfn)
				}
			}
		}
	}
}

// TestMultiLabelUnknownClasses: a (sample, class) pair SetUnknown marks
// unknown contributes nothing: the loss is the direct computation that
// leaves those pairs out (a class no sample knows out of the batch Dice's
// mean), and with those channels' logits replaced the loss and every
// other gradient are the same to the bit while theirs is zero; per-sample
// and batch Dice, with and without ignored voxels, with deep supervision.
func TestMultiLabelUnknownClasses(t *testing.T) {
	dev := cpu.New(cpu.Options{Threads: 2})
	const n, c = 3, 3
	for _, tc := range []struct {
		batch, ignore bool
		unknown       []uint8
	}{
		{false, false, []uint8{0b010, 0, 0b101}},
		{true, false, []uint8{0b010, 0, 0b101}},
		{false, true, []uint8{0b100, 0b110, 0b100}},
		{true, true, []uint8{0b100, 0b110, 0b100}}, // class 2 unknown everywhere
	} {
		shapes := []nn.Shape{{n, 4, 4, 6, c}, {n, 2, 2, 3, c}, {n, 1, 1, 2, c}}
		rng := rand.New(rand.NewPCG(8, 1))
		z := make([][]float32, len(shapes))
		for i, s := range shapes {
			z[i] = randn(rng, s.Len(), 2)
		}
		lab := randomLabels(rng, n, 4, 4, 6, 1<<c)
		if tc.ignore {
			for i := range lab {
				if rng.IntN(5) == 0 {
					lab[i] = 255
				}
			}
		}
		cfg := loss("dice_bce", func(l *config.Loss) {
			l.BatchDice = tc.batch
			if tc.ignore {
				l.IgnoreLabel = ptr(255)
			}
		})
		crit, err := nn.NewCriterion(dev, cfg, shapes)
		if err != nil {
			t.Fatal(err)
		}
		crit.SetUnknown(tc.unknown)
		labels := upload(t, dev, shapes[0][:4], lab)
		if _, err := crit.Compute([]nn.Tensor{upload(t, dev, shapes[0], z[0]), upload(t, dev, shapes[1], z[1]), upload(t, dev, shapes[2], z[2])}, labels); err == nil || !strings.Contains(err.Error(), "AllowUnknown") {
			t.Fatalf("%+v: unknown classes without AllowUnknown: error %v", tc, err)
		}
		if err := crit.AllowUnknown(); err != nil {
			t.Fatal(err)
		}
		run := func(z [][]float32) (nn.LossValue, [][]float32) {
			outs := make([]nn.Tensor, len(shapes))
			for i, s := range shapes {
				outs[i] = upload(t, dev, s, z[i])
			}
			v, err := crit.Compute(outs, labels)
			if err != nil {
				t.Fatal(err)
			}
			var g [][]float32
			for _, d := range crit.Grads() {
				g = append(g, download(t, dev, d))
			}
			return v, g
		}
		got, grads := run(z)
		bce, dice := directMultiLabel(z[0], lab, n, c, tc.batch, tc.ignore, cfg.Smooth, tc.unknown)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*(1+math.Abs(b)) }
		if !near(got.BCE, bce) || !near(got.Dice, dice) {
			t.Errorf("%+v: BCE %v Dice %v, direct %v %v", tc, got.BCE, got.Dice, bce, dice)
		}
		if full, _ := directMultiLabel(z[0], lab, n, c, tc.batch, tc.ignore, cfg.Smooth, nil); near(full, bce) {
			t.Fatalf("%+v: the unknown classes do not change the direct BCE: the test cannot tell", tc)
		}
		// The unknown channels' logits replaced.
		z2 := make([][]float32, len(z))
		for i := range z {
			z2[i] = append([]float32(nil), z[i]...)
			for e := range z2[i] {
				if b, ch := e/(len(z2[i])/n), e%c; tc.unknown[b]>>ch&1 != 0 {
					z2[i][e] = 5 * float32(rng.NormFloat64())
				}
			}
		}
		got2, grads2 := run(z2)
		if got2 != got {
			t.Errorf("%+v: loss %+v with the unknown channels' logits changed, %+v before", tc, got2, got)
		}
		for i := range grads {
			per := len(grads[i]) / n
			for e, g := range grads[i] {
				b, ch := e/per, e%c
				switch {
				case tc.unknown[b]>>ch&1 != 0 && (g != 0 || grads2[i][e] != 0):
					t.Fatalf("%+v output %d: sample %d's unknown class %d has gradient %v (%v)", tc, i, b, ch, g, grads2[i][e])
				case g != grads2[i][e]:
					t.Fatalf("%+v output %d: element %d's gradient %v changed to %v with the unknown logits", tc, i, e, g, grads2[i][e])
				}
			}
		}
		crit.Free()
	}
}

// TestMultiLabelErrors: a byte with a bit of a class the model does not
// have, or 255 without an ignore label, is an error naming the value; more
// than 7 classes, and a device without the multi-label ops, are refused.
func TestMultiLabelErrors(t *testing.T) {
	dev := cpu.New(cpu.Options{Threads: 1})
	s := nn.Shape{1, 2, 2, 2, 2}
	z := upload(t, dev, s, make([]float32, s.Len()))
	for _, tc := range []struct {
		label  float32
		ignore bool
	}{{4, false}, {4, true}, {255, false}, {1.5, true}} {
		cfg := loss("dice_bce", nil)
		if tc.ignore {
			cfg.IgnoreLabel = ptr(255)
		}
		crit, err := nn.NewCriterion(dev, cfg, []nn.Shape{s})
		if err != nil {
			t.Fatal(err)
		}
		lab := []float32{0, 1, 2, 3, 0, 1, 2, tc.label}
		_, err = crit.Compute([]nn.Tensor{z}, upload(t, dev, s[:4], lab))
		if err == nil || !strings.Contains(err.Error(), "bit-packed") {
			t.Errorf("label %v (ignore %v): err = %v, want one naming the bit-packed byte", tc.label, tc.ignore, err)
		}
	}
	if _, err := nn.NewCriterion(dev, loss("dice_bce", nil), []nn.Shape{{1, 2, 2, 2, 8}}); err == nil || !strings.Contains(err.Error(), "model.num_classes") {
		t.Errorf("8 classes: err = %v", err)
	}
	// Embedding hides every method but nn.Device's.
	plain := struct{ nn.Device }{dev}
	if _, err := nn.NewCriterion(plain, loss("dice_bce", nil), []nn.Shape{s}); err == nil || !strings.Contains(err.Error(), "multi-label") {
		t.Errorf("device without the ops: err = %v", err)
	}
}
