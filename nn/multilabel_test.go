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
func directMultiLabel(z []float32, lab []float32, n, c int, batch, ignore bool, smooth float64) (bce, dice float64) {
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
			count += float64(c)
			for j := 0; j < c; j++ {
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
		for j := 0; j < c; j++ {
			var i, p, t float64
			for b := 0; b < n; b++ {
				i, p, t = i+inter[b*c+j], p+psum[b*c+j], t+tsum[b*c+j]
			}
			mean += dc(i, p, t) / float64(c)
		}
	} else {
		for k := range inter {
			mean += dc(inter[k], psum[k], tsum[k]) / float64(n*c)
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
		bce, dice := directMultiLabel(z, lab, n, c, tc.batch, tc.ignore, cfg.Smooth)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*(1+math.Abs(b)) }
		if !near(got.BCE, bce) || !near(got.Dice, dice) || !near(got.Total, tc.wBCE*bce+dice) {
			t.Errorf("%+v: loss %+v, direct BCE %v Dice %v total %v", tc, got, bce, dice, tc.wBCE*bce+dice)
		}
		tp, fp, fn, err := dev.SegCountsMultiLabel(logits, labels, tc.ignore)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < c; j++ {
			var wtp, wfp, wfn int64
			for i, l := range lab {
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
			if tp[j] != wtp || fp[j] != wfp || fn[j] != wfn {
				t.Errorf("%+v class %d: TP/FP/FN %d/%d/%d, want %d/%d/%d", tc, j, tp[j], fp[j], fn[j], wtp, wfp, wfn)
			}
		}
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
