package augment

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// applyWith plans sp at corner on vol and applies it; general forces the
// interpolating path even where the exact copy would do.
func applyWith(t *testing.T, a *Augmenter, shape, corner [3]int, sp SpatialParams, img []float32, lab []uint8, general bool) Dest {
	t.Helper()
	var s Plan
	if err := a.PlanWith(&s, shape, corner, sp); err != nil {
		t.Fatal(err)
	}
	if general {
		s.exact = false
	}
	d := newDest(a, lab != nil)
	var ws Workspace
	if err := a.Apply(&s, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, d, &ws); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestIdentityReproducesInputExactly(t *testing.T) {
	shape := [3]int{13, 17, 19}
	img := testutil.NoiseVolume(shape, 1)
	lab := testutil.LabelsOf(img)
	for _, interp := range []string{"linear", "cubic"} {
		cfg := mustPreset(t, config.PresetNone)
		cfg.Interpolation = interp
		for _, patch := range [][3]int{{13, 17, 19}, {8, 9, 10}, {1, 5, 7}} {
			a := mustNew(t, cfg, patch, 1)
			for _, corner := range [][3]int{{0, 0, 0}, {shape[0] - patch[0], shape[1] - patch[1], shape[2] - patch[2]}, {2, 3, 4}} {
				if corner[0]+patch[0] > shape[0] || corner[1]+patch[1] > shape[1] || corner[2]+patch[2] > shape[2] {
					continue
				}
				want := crop(img, shape, corner, patch, 0)
				wantLab := cropLabel(lab, shape, corner, patch)
				for _, general := range []bool{false, true} {
					d := applyWith(t, a, shape, corner, SpatialParams{}, img, lab, general)
					if i, ok := equalBits(d.Image[0], want); !ok {
						t.Fatalf("%s patch %v corner %v general=%v: image differs at %d: %v vs %v", interp, patch, corner, general, i, d.Image[0][i], want[i])
					}
					if i, ok := equalBits(d.Label, wantLab); !ok {
						t.Fatalf("%s patch %v corner %v general=%v: label differs at %d", interp, patch, corner, general, i)
					}
				}
			}
		}
	}
}

func TestMirrorTwiceIsIdentity(t *testing.T) {
	shape := [3]int{11, 12, 13}
	img := testutil.NoiseVolume(shape, 2)
	lab := testutil.LabelsOf(img)
	a := mustNew(t, mustPreset(t, config.PresetNone), shape, 1)
	for m := 1; m < 8; m++ {
		sp := SpatialParams{Mirror: [3]bool{m&1 != 0, m&2 != 0, m&4 != 0}}
		for _, general := range []bool{false, true} {
			once := applyWith(t, a, shape, [3]int{}, sp, img, lab, general)
			if _, ok := equalBits(once.Image[0], img); ok {
				t.Fatalf("mirror %v did nothing", sp.Mirror)
			}
			l := make([]uint8, len(once.Label))
			for i, v := range once.Label {
				l[i] = uint8(v)
			}
			twice := applyWith(t, a, shape, [3]int{}, sp, once.Image[0], l, general)
			if i, ok := equalBits(twice.Image[0], img); !ok {
				t.Fatalf("mirror %v general=%v twice differs at %d", sp.Mirror, general, i)
			}
			if i, ok := equalBits(twice.Label, cropLabel(lab, shape, [3]int{}, shape)); !ok {
				t.Fatalf("mirror %v label twice differs at %d", sp.Mirror, i)
			}
		}
	}
	// One flip of W is out[x] = in[W-1-x].
	d := applyWith(t, a, shape, [3]int{}, SpatialParams{Mirror: [3]bool{false, false, true}}, img, nil, false)
	if d.Image[0][0] != img[shape[2]-1] || d.Image[0][shape[2]-1] != img[0] {
		t.Fatal("W flip does not reverse rows")
	}
}

func TestQuarterTurnsFourTimesIsIdentity(t *testing.T) {
	shape := [3]int{9, 10, 10}
	img := testutil.NoiseVolume(shape, 3)
	a := mustNew(t, mustPreset(t, config.PresetNone), shape, 1)
	x := img
	sp := SpatialParams{Rot90K: 1, Rot90Axes: [2]int{1, 2}}
	for i := 0; i < 4; i++ {
		d := applyWith(t, a, shape, [3]int{}, sp, x, nil, false)
		if i < 3 {
			if _, ok := equalBits(d.Image[0], img); ok {
				t.Fatalf("%d quarter turns gave the input back", i+1)
			}
		}
		x = d.Image[0]
	}
	if i, ok := equalBits(x, img); !ok {
		t.Fatalf("four quarter turns differ at %d", i)
	}
}

// TestRotationThenInverse rotates a smooth volume by θ about each axis,
// then by −θ, and compares the interior (a ball that stays inside the
// volume in both passes). Trilinear twice on waves of wavelength >= 12
// voxels: measured max error ~0.02 of an amplitude ~3; the bound is 0.06.
func TestRotationThenInverse(t *testing.T) {
	n := 48
	if testutil.Race {
		n = 24
	}
	shape := [3]int{n, n, n}
	img := testutil.SmoothVolume(shape, 4)
	a := mustNew(t, mustPreset(t, config.PresetNone), shape, 1)
	c := float64(n-1) / 2
	for ax := range 3 {
		for _, th := range []float64{0.4, -0.25} {
			var sp SpatialParams
			sp.Angles[ax] = th
			fwd := applyWith(t, a, shape, [3]int{}, sp, img, nil, false)
			sp.Angles[ax] = -th
			back := applyWith(t, a, shape, [3]int{}, sp, fwd.Image[0], nil, false)
			maxErr, count := 0.0, 0
			for z := 0; z < n; z++ {
				for y := 0; y < n; y++ {
					for x := 0; x < n; x++ {
						r := math.Sqrt((float64(z)-c)*(float64(z)-c) + (float64(y)-c)*(float64(y)-c) + (float64(x)-c)*(float64(x)-c))
						if r > 0.45*float64(n) {
							continue
						}
						i := (z*n+y)*n + x
						maxErr = math.Max(maxErr, math.Abs(float64(back.Image[0][i]-img[i])))
						count++
					}
				}
			}
			if count == 0 || maxErr > 0.06 {
				t.Fatalf("axis %d θ %v: max interior error %.4f over %d voxels (bound 0.06)", ax, th, maxErr, count)
			}
			// And the rotation did move things.
			moved := 0.0
			for i := range img {
				moved = math.Max(moved, math.Abs(float64(fwd.Image[0][i]-img[i])))
			}
			if moved < 0.3 {
				t.Fatalf("axis %d θ %v: rotation barely changed the image (%.3f)", ax, th, moved)
			}
		}
	}
}

func TestZeroMagnitudeElasticIsIdentity(t *testing.T) {
	shape := [3]int{20, 22, 24}
	img := testutil.NoiseVolume(shape, 5)
	lab := testutil.LabelsOf(img)
	cfg := mustPreset(t, config.PresetNone)
	cfg.Elastic = config.Elastic{P: 1, Magnitude: [2]float64{0, 0}, Scale: [2]float64{5, 7}}
	patch := [3]int{16, 16, 16}
	a := mustNew(t, cfg, patch, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 5; it++ {
		var s Plan
		if err := a.Draw(&s, rng, shape, nil, false); err != nil {
			t.Fatal(err)
		}
		if !s.Spatial.Elastic || !s.grid.active || s.exact {
			t.Fatal("elastic field not active")
		}
		d := newDest(a, true)
		var ws Workspace
		if err := a.Apply(&s, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, d, &ws); err != nil {
			t.Fatal(err)
		}
		if i, ok := equalBits(d.Image[0], crop(img, shape, s.Corner, patch, 0)); !ok {
			t.Fatalf("zero elastic field changed voxel %d", i)
		}
		if i, ok := equalBits(d.Label, cropLabel(lab, shape, s.Corner, patch)); !ok {
			t.Fatalf("zero elastic field changed label voxel %d", i)
		}
	}
	// A non-zero field does move voxels.
	cfg.Elastic.Magnitude = [2]float64{3, 3}
	a = mustNew(t, cfg, patch, 1)
	var s Plan
	if err := a.Draw(&s, rng, shape, nil, false); err != nil {
		t.Fatal(err)
	}
	d := newDest(a, false)
	if err := a.Apply(&s, Input{Image: [][]float32{img}, Shape: shape}, d, &Workspace{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := equalBits(d.Image[0], crop(img, shape, s.Corner, patch, 0)); ok {
		t.Fatal("elastic field of magnitude 3 changed nothing")
	}
	if s.grid.maxAbs[0] != 3 && s.grid.maxAbs[1] != 3 && s.grid.maxAbs[2] != 3 {
		t.Fatalf("field peak %v, want 3", s.grid.maxAbs)
	}
}

func TestCubicMatchesLinearOnLinearImage(t *testing.T) {
	// Catmull-Rom reproduces linear functions exactly (up to rounding), so
	// away from the border cubic and linear agree on a ramp.
	shape := [3]int{20, 20, 20}
	img := make([]float32, 8000)
	for z := 0; z < 20; z++ {
		for y := 0; y < 20; y++ {
			for x := 0; x < 20; x++ {
				img[(z*20+y)*20+x] = float32(0.5*float64(z) - 0.25*float64(y) + 0.1*float64(x))
			}
		}
	}
	patch := [3]int{8, 8, 8}
	sp := SpatialParams{Angles: [3]float64{0.3, 0.2, -0.1}, Scale: [3]float64{1.1, 0.9, 1}}
	lin := applyWith(t, mustNew(t, mustPreset(t, config.PresetNone), patch, 1), shape, [3]int{6, 6, 6}, sp, img, nil, false)
	cfg := mustPreset(t, config.PresetNone)
	cfg.Interpolation = "cubic"
	cub := applyWith(t, mustNew(t, cfg, patch, 1), shape, [3]int{6, 6, 6}, sp, img, nil, false)
	for i := range lin.Image[0] {
		if math.Abs(float64(lin.Image[0][i]-cub.Image[0][i])) > 1e-4 {
			t.Fatalf("voxel %d: linear %v cubic %v", i, lin.Image[0][i], cub.Image[0][i])
		}
	}
}

// TestLabelsStayInInputSet: after any spatial transform, label values are
// a subset of the input's (plus the label border value outside).
func TestLabelsStayInInputSet(t *testing.T) {
	shape := [3]int{24, 30, 26}
	img := testutil.SmoothVolume(shape, 8)
	lab := testutil.LabelsOf(img)
	for i := range lab {
		if lab[i] == 2 {
			lab[i] = 7 // values 0, 1, 3, 7
		}
	}
	in := map[float32]bool{}
	for _, v := range lab {
		in[float32(v)] = true
	}
	cfg := allOn(t)
	cfg.LabelBorderValue = 9
	for _, interp := range []string{"linear", "cubic"} {
		cfg.Interpolation = interp
		a := mustNew(t, cfg, [3]int{20, 16, 24}, 1)
		rng := rand.New(rand.NewPCG(9, 9))
		var ws Workspace
		d := newDest(a, true)
		for it := 0; it < 6; it++ {
			if err := a.Run(&ws, rng, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, nil, false, d); err != nil {
				t.Fatal(err)
			}
			for i, v := range d.Label {
				if !in[v] && v != 9 {
					t.Fatalf("%s: label %v at %d not in the input", interp, v, i)
				}
			}
		}
	}
}

// TestPatchShapeAlwaysExact: every output voxel is written, whatever the
// volume size (smaller than the patch, thin, large) and transform.
func TestPatchShapeAlwaysExact(t *testing.T) {
	patch := [3]int{12, 10, 14}
	cfg := allOn(t)
	cfg.Elastic.Scale = [2]float64{3, 6}
	a := mustNew(t, cfg, patch, 2)
	rng := rand.New(rand.NewPCG(5, 5))
	var ws Workspace
	for _, shape := range [][3]int{{5, 6, 7}, {1, 40, 40}, {30, 3, 50}, {12, 10, 14}, {40, 41, 42}} {
		img := [][]float32{testutil.SmoothVolume(shape, 1), testutil.NoiseVolume(shape, 2)}
		lab := testutil.LabelsOf(img[0])
		for it := 0; it < 3; it++ {
			d := newDest(a, true)
			if err := a.Run(&ws, rng, Input{Image: img, Label: lab, Shape: shape}, nil, false, d); err != nil {
				t.Fatal(err)
			}
			for c := range d.Image {
				if len(d.Image[c]) != patch[0]*patch[1]*patch[2] {
					t.Fatal("destination resized")
				}
				for i, v := range d.Image[c] {
					if math.IsNaN(float64(v)) {
						t.Fatalf("shape %v channel %d voxel %d not written", shape, c, i)
					}
				}
			}
			for i, v := range d.Label {
				if v < 0 {
					t.Fatalf("shape %v label voxel %d not written", shape, i)
				}
			}
		}
	}
}

func TestSmallVolumeIsCentredAndPadded(t *testing.T) {
	shape := [3]int{4, 6, 5}
	img := testutil.NoiseVolume(shape, 1)
	cfg := mustPreset(t, config.PresetNone)
	cfg.BorderValue = 100
	patch := [3]int{8, 6, 9}
	a := mustNew(t, cfg, patch, 1)
	var s Plan
	if err := a.Draw(&s, rand.New(rand.NewPCG(1, 1)), shape, nil, false); err != nil {
		t.Fatal(err)
	}
	if s.Corner != [3]int{-2, 0, -2} {
		t.Fatalf("corner %v, want [-2 0 -2]", s.Corner)
	}
	d := newDest(a, false)
	if err := a.Apply(&s, Input{Image: [][]float32{img}, Shape: shape}, d, &Workspace{}); err != nil {
		t.Fatal(err)
	}
	if i, ok := equalBits(d.Image[0], crop(img, shape, s.Corner, patch, 100)); !ok {
		t.Fatalf("voxel %d", i)
	}
}

// TestSubBoxSourceGivesSameBytes: reading only Plan.Box from the volume
// (as a chunked store would) and passing it with its origin gives exactly
// the output of the whole volume.
func TestSubBoxSourceGivesSameBytes(t *testing.T) {
	shape := [3]int{40, 44, 38}
	img := [][]float32{testutil.SmoothVolume(shape, 3), testutil.NoiseVolume(shape, 4)}
	lab := testutil.LabelsOf(img[0])
	patch := [3]int{16, 18, 14}
	for _, interp := range []string{"linear", "cubic", "exact"} {
		cfg := allOn(t)
		cfg.Rotation.Degrees = [2]float64{-10, 10}
		cfg.Scaling.Range = [2]float64{0.8, 1}
		cfg.Elastic.Magnitude = [2]float64{0, 2}
		if interp == "exact" { // flips and quarter turns only
			cfg.Rotation.P, cfg.Scaling.P, cfg.Elastic.P, cfg.Rot90.Axes = 0, 0, 0, []int{0, 1, 2}
		} else {
			cfg.Interpolation = interp
		}
		a := mustNew(t, cfg, patch, 2)
		rng := rand.New(rand.NewPCG(11, 12))
		smaller := 0
		for it := 0; it < 8; it++ {
			var s Plan
			if err := a.Draw(&s, rng, shape, nil, false); err != nil {
				t.Fatal(err)
			}
			full := newDest(a, true)
			var ws Workspace
			if err := a.Apply(&s, Input{Image: img, Label: lab, Shape: shape}, full, &ws); err != nil {
				t.Fatal(err)
			}
			b := s.Box
			sz := b.Size()
			if sz[0]*sz[1]*sz[2] < shape[0]*shape[1]*shape[2] {
				smaller++
			}
			sub := Input{Shape: sz, Origin: b.Lo}
			for _, ch := range img {
				sub.Image = append(sub.Image, extract(ch, shape, b))
			}
			lf := make([]float32, len(lab))
			for i, v := range lab {
				lf[i] = float32(v)
			}
			for _, v := range extract(lf, shape, b) {
				sub.Label = append(sub.Label, uint8(v))
			}
			part := newDest(a, true)
			if err := a.Apply(&s, sub, part, &ws); err != nil {
				t.Fatal(err)
			}
			if hashDest(full) != hashDest(part) {
				t.Fatalf("%s plan %d: sub-box source gives different bytes", interp, it)
			}
			// A region one voxel short of the box is refused.
			short := sub
			short.Shape[2]--
			for c := range short.Image {
				short.Image[c] = short.Image[c][:short.Shape[0]*short.Shape[1]*short.Shape[2]]
			}
			short.Label = short.Label[:len(short.Image[0])]
			if b.Hi[2]-b.Lo[2] > 1 {
				if err := a.Apply(&s, short, part, &ws); err == nil {
					t.Fatal("a region smaller than the box was accepted")
				}
			}
		}
		if smaller == 0 {
			t.Fatal("no box was smaller than the volume: the test does not test sub-boxes")
		}
	}
}

// extract copies box b of vol (shape) out, packed, W fastest.
func extract(vol []float32, shape [3]int, b volume.Box) []float32 {
	sz := b.Size()
	out := make([]float32, 0, sz[0]*sz[1]*sz[2])
	for z := b.Lo[0]; z < b.Hi[0]; z++ {
		for y := b.Lo[1]; y < b.Hi[1]; y++ {
			out = append(out, vol[(z*shape[1]+y)*shape[2]+b.Lo[2]:(z*shape[1]+y)*shape[2]+b.Hi[2]]...)
		}
	}
	return out
}
