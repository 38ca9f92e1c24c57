package augment

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/preprocess"
)

func TestForegroundCentredCrop(t *testing.T) {
	shape := [3]int{40, 50, 60}
	lab := make([]uint8, 40*50*60)
	// One small blob of class 5 and one voxel of class 2.
	for z := 30; z < 33; z++ {
		for y := 5; y < 8; y++ {
			for x := 50; x < 53; x++ {
				lab[(z*50+y)*60+x] = 5
			}
		}
	}
	lab[(3*50+45)*60+4] = 2
	img := make([]float32, len(lab))
	for i, v := range lab {
		img[i] = float32(v)
	}
	f, err := preprocess.BuildForegroundIndex(lab, shape, 10000)
	if err != nil {
		t.Fatal(err)
	}
	patch := [3]int{16, 16, 16}
	a := mustNew(t, mustPreset(t, config.PresetNone), patch, 1)
	rng := rand.New(rand.NewPCG(4, 4))
	var ws Workspace
	seen := map[float32]bool{}
	for it := 0; it < 40; it++ {
		d := newDest(a, true)
		if err := a.Run(&ws, rng, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, f, true, d); err != nil {
			t.Fatal(err)
		}
		fg := float32(0)
		for _, v := range d.Label {
			if v != 0 {
				fg = v
				break
			}
		}
		if fg == 0 {
			t.Fatalf("forced foreground crop %v has no foreground", ws.sample.Corner)
		}
		seen[fg] = true
		// Away from the borders the chosen voxel is the centre voxel.
		c := ws.sample.Corner
		lo, hi := [3]int{}, [3]int{}
		for i := range 3 {
			lo[i], hi[i] = cropRange(shape[i], patch[i])
		}
		if c[0] > lo[0] && c[0] < hi[0] && c[1] > lo[1] && c[1] < hi[1] && c[2] > lo[2] && c[2] < hi[2] {
			if d.Label[(8*16+8)*16+8] == 0 {
				t.Fatal("centre voxel is not foreground")
			}
		}
	}
	if !seen[5] || !seen[2] {
		t.Fatalf("classes drawn %v, want both 2 and 5", seen)
	}
	// Without forceFG (or index) the crop is uniform: mostly background.
	empty := 0
	for it := 0; it < 40; it++ {
		d := newDest(a, true)
		if err := a.Run(&ws, rng, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, f, false, d); err != nil {
			t.Fatal(err)
		}
		if slices.Max(d.Label) == 0 {
			empty++
		}
	}
	if empty < 20 {
		t.Fatalf("only %d of 40 random crops were background", empty)
	}
	// A mismatched index is an error.
	var s Plan
	if err := a.Draw(&s, rng, [3]int{40, 50, 61}, f, true); err == nil {
		t.Fatal("index of another shape accepted")
	}
}

// goldenHash pins the bytes of one fully augmented sample (every transform
// on). It must hold on every machine and architecture; change it only
// when the algorithm changes on purpose.
const goldenHash = "5daa727213ad40066cba3bde499ded25b4657f09cd5bb4f02805c00e505f9c34"

func goldenSample(t *testing.T, workers int) Dest {
	shape := [3]int{37, 41, 39}
	img := [][]float32{testutil.SmoothVolume(shape, 21), testutil.NoiseVolume(shape, 22)}
	lab := testutil.LabelsOf(img[0])
	cfg := allOn(t)
	cfg.Elastic.Scale = [2]float64{6, 9}
	a := mustNew(t, cfg, [3]int{24, 20, 28}, 2)
	f, err := preprocess.BuildForegroundIndex(lab, shape, 100)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2024, 11))
	ws := Workspace{Workers: workers}
	d := newDest(a, true)
	for i := 0; i < 3; i++ { // the third sample, after reuse of ws
		if err := a.Run(&ws, rng, Input{Image: img, Label: lab, Shape: shape}, f, i == 1, d); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestSameSeedSameBytes(t *testing.T) {
	ref := goldenSample(t, 1)
	h := hashDest(ref)
	for _, w := range []int{1, 2, 3, 7} {
		if got := hashDest(goldenSample(t, w)); got != h {
			t.Fatalf("workers %d: different bytes", w)
		}
	}
	if got := hex.EncodeToString(h[:]); got != goldenHash {
		t.Fatalf("sample hash %s, golden %s: the output changed (or this machine differs)", got, goldenHash)
	}
	// A different seed gives different bytes.
	shape := [3]int{20, 20, 20}
	img := [][]float32{testutil.SmoothVolume(shape, 1)}
	a := mustNew(t, allOn(t), [3]int{12, 12, 12}, 1)
	var ws Workspace
	d1, d2 := newDest(a, false), newDest(a, false)
	a.Run(&ws, rand.New(rand.NewPCG(1, 1)), Input{Image: img, Shape: shape}, nil, false, d1)
	a.Run(&ws, rand.New(rand.NewPCG(1, 2)), Input{Image: img, Shape: shape}, nil, false, d2)
	if hashDest(d1) == hashDest(d2) {
		t.Fatal("different seeds, same bytes")
	}
}

// TestApplyAllocatesNothing: with a reused Plan and Workspace, Plan and
// Apply allocate nothing per sample, whatever transforms are drawn.
func TestApplyAllocatesNothing(t *testing.T) {
	shape := [3]int{30, 34, 32}
	img := [][]float32{testutil.SmoothVolume(shape, 1), testutil.NoiseVolume(shape, 2)}
	lab := testutil.LabelsOf(img[0])
	f, _ := preprocess.BuildForegroundIndex(lab, shape, 100)
	for _, name := range []string{"allOn", "nnunet", "cubic"} {
		cfg := allOn(t)
		switch name {
		case "nnunet":
			cfg = mustPreset(t, config.PresetNNUNet)
		case "cubic":
			cfg.Interpolation = "cubic"
		}
		cfg.Elastic.Scale = [2]float64{5, 9}
		a := mustNew(t, cfg, [3]int{16, 20, 24}, 2)
		d := newDest(a, true)
		var ws Workspace
		var s Plan
		rng := rand.New(rand.NewPCG(5, 6))
		src := Input{Image: img, Label: lab, Shape: shape}
		step := func() {
			if err := a.Draw(&s, rng, shape, f, rng.IntN(2) == 0); err != nil {
				t.Fatal(err)
			}
			if err := a.Apply(&s, src, d, &ws); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 20; i++ { // grow every buffer (largest field, etc.)
			step()
		}
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%s: %v allocations per sample", name, n)
		}
	}
}

func TestApplyRejectsBadBuffers(t *testing.T) {
	shape := [3]int{10, 10, 10}
	img := [][]float32{make([]float32, 1000)}
	a := mustNew(t, mustPreset(t, config.PresetNone), [3]int{4, 4, 4}, 1)
	var s Plan
	if err := a.Draw(&s, rand.New(rand.NewPCG(1, 1)), shape, nil, false); err != nil {
		t.Fatal(err)
	}
	var ws Workspace
	good := newDest(a, true)
	cases := map[string]func() error{
		"short image":  func() error { return a.Apply(&s, Input{Image: [][]float32{img[0][:999]}, Shape: shape}, good, &ws) },
		"two channels": func() error { return a.Apply(&s, Input{Image: [][]float32{img[0], img[0]}, Shape: shape}, good, &ws) },
		"short label":  func() error { return a.Apply(&s, Input{Image: img, Label: make([]uint8, 5), Shape: shape}, good, &ws) },
		"short destination": func() error {
			return a.Apply(&s, Input{Image: img, Shape: shape}, Dest{Image: [][]float32{make([]float32, 63)}}, &ws)
		},
		"short dest label": func() error {
			return a.Apply(&s, Input{Image: img, Shape: shape}, Dest{Image: good.Image, Label: make([]float32, 3)}, &ws)
		},
		"region outside volume": func() error {
			return a.Apply(&s, Input{Image: img, Shape: shape, Origin: [3]int{1, 0, 0}}, good, &ws)
		},
		"foreign sample": func() error {
			b := mustNew(t, mustPreset(t, config.PresetNone), [3]int{5, 4, 4}, 1)
			return b.Apply(&s, Input{Image: img, Shape: shape}, good, &ws)
		},
		"nil rng": func() error { return a.Draw(&s, nil, shape, nil, false) },
		"bad shape": func() error {
			return a.Draw(&s, rand.New(rand.NewPCG(1, 1)), [3]int{0, 1, 1}, nil, false)
		},
	}
	for name, f := range cases {
		if err := f(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// No source label: the destination label is filled with the border value.
	for i := range good.Label {
		good.Label[i] = 7
	}
	if err := a.Apply(&s, Input{Image: img, Shape: shape}, good, &ws); err != nil {
		t.Fatal(err)
	}
	if slices.Max(good.Label) != 0 {
		t.Fatal("destination label not cleared")
	}
}

// TestParallelMatchesSerial runs the whole pipeline split over goroutines
// (under -race in CI) and compares bytes with the serial run.
func TestParallelMatchesSerial(t *testing.T) {
	shape := [3]int{26, 30, 28}
	img := [][]float32{testutil.SmoothVolume(shape, 31), testutil.NoiseVolume(shape, 32)}
	lab := testutil.LabelsOf(img[0])
	cfg := allOn(t)
	cfg.Elastic.Scale = [2]float64{5, 8}
	a := mustNew(t, cfg, [3]int{18, 16, 20}, 2)
	for seed := uint64(0); seed < 3; seed++ {
		var hashes [][32]byte
		for _, w := range []int{1, 4} {
			ws := Workspace{Workers: w}
			d := newDest(a, true)
			if err := a.Run(&ws, rand.New(rand.NewPCG(seed, 3)), Input{Image: img, Label: lab, Shape: shape}, nil, false, d); err != nil {
				t.Fatal(err)
			}
			hashes = append(hashes, hashDest(d))
		}
		if hashes[0] != hashes[1] {
			t.Fatalf("seed %d: 4 workers differ from 1", seed)
		}
	}
	// One workspace whose worker count grows and shrinks between samples.
	var ws Workspace
	d := newDest(a, true)
	for i, w := range []int{1, 2, 5, 3, 1} {
		ws.Workers = w
		ref := Workspace{}
		want := newDest(a, true)
		src := Input{Image: img, Label: lab, Shape: shape}
		if err := a.Run(&ref, rand.New(rand.NewPCG(uint64(i), 9)), src, nil, false, want); err != nil {
			t.Fatal(err)
		}
		if err := a.Run(&ws, rand.New(rand.NewPCG(uint64(i), 9)), src, nil, false, d); err != nil {
			t.Fatal(err)
		}
		if hashDest(d) != hashDest(want) {
			t.Fatalf("reused workspace with %d workers differs", w)
		}
	}
}

// TestForegroundCropSkipsIgnoreLabel: with an ignore label, forced
// foreground crops centre on the other classes only, and a case whose only
// "foreground" is the ignore label gets random crops.
func TestForegroundCropSkipsIgnoreLabel(t *testing.T) {
	shape := [3]int{40, 50, 60}
	lab := make([]uint8, 40*50*60)
	for i := 0; i < 2000; i++ {
		lab[20*50*60+i] = 5 // the ignore label, plenty of it
	}
	lab[(3*50+45)*60+4] = 2
	f, err := preprocess.BuildForegroundIndex(lab, shape, 10000)
	if err != nil {
		t.Fatal(err)
	}
	patch := [3]int{16, 16, 16}
	a := mustNew(t, mustPreset(t, config.PresetNone), patch, 1)
	a.SetIgnoreLabel(5)
	rng := rand.New(rand.NewPCG(4, 5))
	want := [3]int{0, min(45-8, 50-16), 0} // the class-2 voxel centred, clamped to the volume
	for it := 0; it < 30; it++ {
		if got := a.drawCorner(rng, shape, f, true); got != want {
			t.Fatalf("draw %d: corner %v, want %v (centred on class 2, never on the ignore label)", it, got, want)
		}
	}
	only, err := preprocess.BuildForegroundIndex(func() []uint8 {
		l := make([]uint8, len(lab))
		copy(l[20*50*60:], lab[20*50*60:20*50*60+2000])
		return l
	}(), shape, 10000)
	if err != nil {
		t.Fatal(err)
	}
	corners := map[[3]int]bool{}
	for it := 0; it < 30; it++ {
		corners[a.drawCorner(rng, shape, only, true)] = true
	}
	if len(corners) < 10 {
		t.Errorf("ignore-only case: %d distinct corners in 30 draws, want random crops", len(corners))
	}
}
