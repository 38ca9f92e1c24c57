package nn_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/nn"
)

// demoCase is one z-scored image and its labels, (D, H, W) = (z, y, x).
type demoCase struct {
	size       [3]int
	img, label []float32
}

// loadDemoCase reads an image/label pair with package nifti.
func loadDemoCase(t *testing.T, dir, name string) demoCase {
	t.Helper()
	hi, img, err := nifti.ReadFloat32(filepath.Join(dir, "imagesTr", name))
	if err != nil {
		t.Fatal(err)
	}
	hl, lab, err := nifti.ReadFloat32(filepath.Join(dir, "labelsTr", name))
	if err != nil {
		t.Fatal(err)
	}
	s := hi.Shape()
	if ls := hl.Shape(); len(s) != 3 || len(ls) != 3 || s[0] != ls[0] || s[1] != ls[1] || s[2] != ls[2] {
		t.Fatalf("%s: image %v and label %v shapes", name, s, hl.Shape())
	}
	var mean, sq float64
	for _, v := range img {
		mean += float64(v)
	}
	mean /= float64(len(img))
	for _, v := range img {
		sq += (float64(v) - mean) * (float64(v) - mean)
	}
	std := math.Sqrt(sq/float64(len(img))) + 1e-8
	for i, v := range img {
		img[i] = float32((float64(v) - mean) / std)
	}
	for i, v := range lab {
		lab[i] = float32(math.Round(float64(v)))
	}
	// NIfTI order is x fastest: (nx, ny, nz) is (W, H, D).
	return demoCase{size: [3]int{s[2], s[1], s[0]}, img: img, label: lab}
}

// crop copies the patch of size p at offset o (zero outside the volume)
// into img and lab.
func (c demoCase) crop(o, p [3]int, img, lab []float32) {
	for d := 0; d < p[0]; d++ {
		for h := 0; h < p[1]; h++ {
			for w := 0; w < p[2]; w++ {
				i := (d*p[1]+h)*p[2] + w
				sd, sh, sw := o[0]+d, o[1]+h, o[2]+w
				if sd < 0 || sh < 0 || sw < 0 || sd >= c.size[0] || sh >= c.size[1] || sw >= c.size[2] {
					img[i], lab[i] = 0, 0
					continue
				}
				j := (sd*c.size[1]+sh)*c.size[2] + sw
				img[i], lab[i] = c.img[j], c.label[j]
			}
		}
	}
}

// TestDemoTrainingLearns trains a small U-Net on real hippocampus MRI and
// checks that the training loss falls and the validation Dice rises.
func TestDemoTrainingLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on the demo data: skipped under -short")
	}
	testutil.SkipUnderRace(t, "trains on the demo data")
	// The bundled 80 cases are enough: the test reads at most 60.
	dir := testutil.DemoDir(t)
	start := time.Now()
	entries, err := os.ReadDir(filepath.Join(dir, "imagesTr"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".nii.gz") || strings.HasSuffix(e.Name(), ".nii") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	// The README's split: sorted index multiple of 5 is validation.
	var train, val []demoCase
	for i, n := range names {
		switch {
		case i%5 == 0 && len(val) < 12:
			val = append(val, loadDemoCase(t, dir, n))
		case i%5 != 0 && len(train) < 48:
			train = append(train, loadDemoCase(t, dir, n))
		}
	}
	if len(train) < 4 || len(val) < 2 {
		t.Skipf("%s has %d training and %d validation cases, need 4 and 2", dir, len(train), len(val))
	}
	t.Logf("loaded %d training and %d validation cases in %v", len(train), len(val), time.Since(start).Round(time.Millisecond))

	dev := cpu.New(cpu.Options{})
	m, err := nn.NewUNet(dev, model([]int{8, 16, 32}, func(m *config.Model) { m.NumClasses = 3 }), 1)
	if err != nil {
		t.Fatal(err)
	}
	const batch, steps = 2, 160
	patch := [3]int{24, 40, 32}
	adamw := optim("adamw", func(o *config.Optim) { o.LR, o.WeightDecay = ptr(3e-3), ptr(1e-4) })
	l, err := nn.NewLearner(m, batch, patch, loss("dice_ce", nil), adamw)
	if err != nil {
		t.Fatal(err)
	}
	pv := patch[0] * patch[1] * patch[2]
	img, lab := make([]float32, batch*pv), make([]float32, batch*pv)
	x, y := dev.Alloc(l.WS.InputShape()), dev.Alloc(l.WS.LabelShape())
	center := func(c demoCase) [3]int {
		return [3]int{(c.size[0] - patch[0]) / 2, (c.size[1] - patch[1]) / 2, (c.size[2] - patch[2]) / 2}
	}
	validate := func() float64 {
		tp, fp, fn := make([]int64, 3), make([]int64, 3), make([]int64, 3)
		for i := 0; i+batch <= len(val); i += batch {
			for b := 0; b < batch; b++ {
				val[i+b].crop(center(val[i+b]), patch, img[b*pv:(b+1)*pv], lab[b*pv:(b+1)*pv])
			}
			if err := dev.Upload(dev.ComputeStream(), x, img); err != nil {
				t.Fatal(err)
			}
			if err := dev.Upload(dev.ComputeStream(), y, lab); err != nil {
				t.Fatal(err)
			}
			out := m.Forward(l.WS, x)
			a, b, c, err := dev.SegCounts(out[0], y)
			if err != nil {
				t.Fatal(err)
			}
			for k := range tp {
				tp[k] += a[k]
				fp[k] += b[k]
				fn[k] += c[k]
			}
		}
		var dice float64
		for k := 1; k < 3; k++ {
			dice += float64(2*tp[k]) / float64(2*tp[k]+fp[k]+fn[k]) / 2
		}
		return dice
	}

	dice0 := validate()
	rng := rand.New(rand.NewPCG(2024, 1))
	sched := adamw.Schedule
	var losses []float64
	for s := 0; s < steps; s++ {
		for b := 0; b < batch; b++ {
			c := train[rng.IntN(len(train))]
			o := center(c)
			for a := 0; a < 3; a++ {
				o[a] += rng.IntN(7) - 3 // jitter the crop by up to 3 voxels
			}
			c.crop(o, patch, img[b*pv:(b+1)*pv], lab[b*pv:(b+1)*pv])
		}
		if err := dev.Upload(dev.ComputeStream(), x, img); err != nil {
			t.Fatal(err)
		}
		if err := dev.Upload(dev.ComputeStream(), y, lab); err != nil {
			t.Fatal(err)
		}
		res, err := l.Step(x, y, nn.LearningRate(sched, adamw.BaseLR(), s, steps))
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, res.Loss.Total)
	}
	dice1 := validate()
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	first, last := mean(losses[:20]), mean(losses[len(losses)-20:])
	t.Logf("%d steps in %v: loss %.3f -> %.3f (mean of first/last 20 steps), validation Dice %.3f -> %.3f",
		steps, time.Since(start).Round(time.Millisecond), first, last, dice0, dice1)
	if !(last < 0.6*first) {
		t.Errorf("training loss fell only from %.3f to %.3f", first, last)
	}
	if !(dice1 > dice0+0.3 && dice1 > 0.5) {
		t.Errorf("validation Dice went from %.3f to %.3f, want a rise of 0.3 to above 0.5", dice0, dice1)
	}
}
