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

// TestIgnoreLabelIsRemoval: with loss.ignore_label, a batch whose last
// planes are all ignored has the loss (every term) of the same batch with
// those planes cut off, the cut batch's gradient on the kept voxels and a
// zero gradient on the ignored ones; and changing the ignored voxels'
// logits moves nothing.
func TestIgnoreLabelIsRemoval(t *testing.T) {
	const classes, ignore = 3, 3
	for _, cfg := range []config.Loss{
		loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = ptr(ignore) }),
		loss("dice", func(l *config.Loss) { l.BatchDice, l.DoBackground, l.IgnoreLabel = true, true, ptr(ignore) }),
	} {
		dev := cpu.New(cpu.Options{Threads: 2})
		rng := rand.New(rand.NewPCG(7, 1))
		n, d, h, w, keep := 2, 5, 4, 6, 3 // planes keep..d-1 ignored
		full := nn.Shape{n, d, h, w, classes}
		cut := nn.Shape{n, keep, h, w, classes}
		z := randn(rng, full.Len(), 1.5)
		lab := randomLabels(rng, n, d, h, w, classes)
		plane := h * w
		var zc, lc []float32
		for b := 0; b < n; b++ {
			for p := 0; p < d; p++ {
				vox := (b*d + p) * plane
				if p >= keep {
					for i := vox; i < vox+plane; i++ {
						lab[i] = ignore
					}
					continue
				}
				lc = append(lc, lab[vox:vox+plane]...)
				zc = append(zc, z[vox*classes:(vox+plane)*classes]...)
			}
		}
		plain := cfg
		plain.IgnoreLabel = nil
		run := func(c config.Loss, s nn.Shape, z, lab []float32) (nn.LossValue, []float32) {
			crit, err := nn.NewCriterion(dev, c, []nn.Shape{s})
			if err != nil {
				t.Fatal(err)
			}
			v, err := crit.Compute([]nn.Tensor{upload(t, dev, s, z)}, upload(t, dev, s[:4], lab))
			if err != nil {
				t.Fatal(err)
			}
			return v, append([]float32(nil), data(crit.Grads()[0])...)
		}
		got, g := run(cfg, full, z, lab)
		want, gc := run(plain, cut, zc, lc)
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*(1+math.Abs(b)) }
		if !near(got.Total, want.Total) || !near(got.CE, want.CE) || !near(got.Dice, want.Dice) {
			t.Errorf("%s: loss with ignored planes %+v, with them cut off %+v", cfg.Name, got, want)
		}
		k := 0
		for b := 0; b < n; b++ {
			for p := 0; p < d; p++ {
				for i := (b*d + p) * plane * classes; i < (b*d+p+1)*plane*classes; i++ {
					if p >= keep {
						if g[i] != 0 {
							t.Fatalf("%s: gradient %v at an ignored voxel", cfg.Name, g[i])
						}
						continue
					}
					if math.Abs(float64(g[i]-gc[k])) > 1e-6 {
						t.Fatalf("%s: gradient %v, cut batch's %v", cfg.Name, g[i], gc[k])
					}
					k++
				}
			}
		}
		// Validation counts leave the ignored voxels out too.
		tp, fp, fn, err := dev.SegCountsIgnore(upload(t, dev, full, z), upload(t, dev, full[:4], lab), ignore)
		if err != nil {
			t.Fatal(err)
		}
		ctp, cfp, cfn, err := dev.SegCounts(upload(t, dev, cut, zc), upload(t, dev, cut[:4], lc))
		if err != nil {
			t.Fatal(err)
		}
		for j := range ctp {
			if tp[j] != ctp[j] || fp[j] != cfp[j] || fn[j] != cfn[j] {
				t.Errorf("class %d: counts with ignored planes %d/%d/%d, cut %d/%d/%d", j, tp[j], fp[j], fn[j], ctp[j], cfp[j], cfn[j])
			}
		}
		// Ignored voxels' logits do not matter.
		z2 := append([]float32(nil), z...)
		for i := range lab {
			if lab[i] == ignore {
				for j := 0; j < classes; j++ {
					z2[i*classes+j] = float32(rng.NormFloat64() * 10)
				}
			}
		}
		got2, g2 := run(cfg, full, z2, lab)
		if got2 != got {
			t.Errorf("%s: changing ignored logits moved the loss: %+v → %+v", cfg.Name, got, got2)
		}
		for i := range g {
			if g[i] != g2[i] {
				t.Fatalf("%s: changing ignored logits moved the gradient at %d", cfg.Name, i)
			}
		}
	}
}

// TestIgnoreLabelEdges: an all-ignored batch has zero loss terms and zero
// gradient (nnU-Net skips CE then), a label that is neither a class nor the
// ignore label is still an error, and an ignore label inside the classes
// is refused, as is a device without the ignore ops.
func TestIgnoreLabelEdges(t *testing.T) {
	dev := cpu.New(cpu.Options{Threads: 1})
	s := nn.Shape{1, 2, 2, 2, 2}
	cfg := loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = ptr(2) })
	crit, err := nn.NewCriterion(dev, cfg, []nn.Shape{s})
	if err != nil {
		t.Fatal(err)
	}
	z := upload(t, dev, s, randn(rand.New(rand.NewPCG(1, 1)), s.Len(), 1))
	all := make([]float32, 8)
	for i := range all {
		all[i] = 2
	}
	v, err := crit.Compute([]nn.Tensor{z}, upload(t, dev, s[:4], all))
	if err != nil {
		t.Fatal(err)
	}
	if v.CE != 0 || math.IsNaN(v.Total) {
		t.Errorf("all ignored: %+v, want CE 0 and a number", v)
	}
	for _, x := range data(crit.Grads()[0]) {
		if x != 0 {
			t.Fatalf("all ignored: gradient %v", x)
		}
	}
	bad := append([]float32(nil), all...)
	bad[3] = 7
	if _, err := crit.Compute([]nn.Tensor{z}, upload(t, dev, s[:4], bad)); err == nil || !strings.Contains(err.Error(), "label 7") {
		t.Errorf("label 7 with ignore 2: %v", err)
	}
	inside := loss("dice_ce", func(l *config.Loss) { l.IgnoreLabel = ptr(1) })
	if _, err := nn.NewCriterion(dev, inside, []nn.Shape{s}); err == nil || !strings.Contains(err.Error(), "loss.ignore_label") {
		t.Errorf("ignore label 1 of 2 classes: %v", err)
	}
	// A device without the ignore ops (here the CPU device hidden behind
	// nn.Device) is refused, not used to train the ignored voxels.
	if _, err := nn.NewCriterion(struct{ nn.Device }{dev}, cfg, []nn.Shape{s}); err == nil || !strings.Contains(err.Error(), "cannot leave ignored voxels out") {
		t.Errorf("device without IgnoreLossDevice: %v", err)
	}
}
