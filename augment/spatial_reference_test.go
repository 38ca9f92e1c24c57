package augment

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxtrain/voxtrain/config"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestFastSpatialMatchesReference holds the row-incremental sampler to the
// per-voxel float64 reference on random rotation + scaling + elastic
// plans, including patches hanging over the volume's edges.
func TestFastSpatialMatchesReference(t *testing.T) {
	shape := [3]int{30, 34, 28}
	img := testutil.SmoothVolume(shape, 6)
	lab := testutil.LabelsOf(img)
	cfg := mustPreset(t, config.PresetNone)
	cfg.Rotation.P, cfg.Scaling.P, cfg.Elastic.P, cfg.Mirror.P = 1, 1, 1, 0.5
	cfg.Scaling.PerAxis = true
	cfg.Elastic.Magnitude, cfg.Elastic.Scale = [2]float64{1, 4}, [2]float64{4, 9}
	cfg.BorderValue = -2
	patch := [3]int{24, 20, 26}
	a := mustNew(t, cfg, patch, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	n := patch[0] * patch[1] * patch[2]
	iters := 12
	if testutil.Race {
		iters = 3
	}
	for it := 0; it < iters; it++ {
		var s Plan
		if err := a.Draw(&s, rng, shape, nil, false); err != nil {
			t.Fatal(err)
		}
		d := newDest(a, true)
		if err := a.Apply(&s, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, d, &Workspace{}); err != nil {
			t.Fatal(err)
		}
		ref := [][]float32{make([]float32, n)}
		refLab := make([]float32, n)
		reg := region{img: [][]float32{img}, lab: lab, d: shape[0], h: shape[1], w: shape[2]}
		spatialReference(&s, &reg, ref, refLab, -2, 0)
		labDiff := 0
		for i := range ref[0] {
			if diff := math.Abs(float64(d.Image[0][i] - ref[0][i])); diff > 2e-3 {
				t.Fatalf("plan %d voxel %d: fast %v reference %v", it, i, d.Image[0][i], ref[0][i])
			}
			if d.Label[i] != refLab[i] {
				labDiff++
			}
		}
		// Labels differ only where float32 and float64 coordinates round a
		// near-tie differently: rare.
		if labDiff > n/2000 {
			t.Fatalf("plan %d: %d of %d labels differ from the reference", it, labDiff, n)
		}
	}
}

// TestExactPathMatchesReference: flips and quarter turns (also between
// axes of odd and even length) copy voxels exactly where the reference
// map points.
func TestExactPathMatchesReference(t *testing.T) {
	shape := [3]int{17, 20, 23}
	img := testutil.NoiseVolume(shape, 12)
	lab := testutil.LabelsOf(img)
	patch := [3]int{9, 12, 7}
	a := mustNew(t, mustPreset(t, config.PresetNone), patch, 1)
	for k := 0; k < 4; k++ {
		for _, plane := range [][2]int{{0, 1}, {0, 2}, {1, 2}} {
			for m := 0; m < 8; m += 3 {
				sp := SpatialParams{Rot90K: k, Rot90Axes: plane, Mirror: [3]bool{m&1 != 0, m&2 != 0, m&4 != 0}}
				d := exactMatchesReference(t, a, shape, [3]int{4, 3, 8}, sp, img, lab)
				// Every output voxel is a source voxel: no interpolation.
				for i, v := range d.Image[0] {
					if v == 0 {
						t.Fatalf("%+v: voxel %d outside the volume", sp, i)
					}
				}
			}
		}
	}
}

// TestExactPathAtVolumeBorders puts plain and mirrored patches across every
// border (rows partly outside the volume) and holds them to the reference.
func TestExactPathAtVolumeBorders(t *testing.T) {
	shape := [3]int{17, 20, 23}
	img := testutil.NoiseVolume(shape, 13)
	lab := testutil.LabelsOf(img)
	patch := [3]int{9, 12, 7}
	a := mustNew(t, mustPreset(t, config.PresetNone), patch, 1)
	for _, c := range [][3]int{{0, 0, 0}, {16, 19, 22}, {8, 10, 1}, {8, 10, 21}, {2, 18, 3}, {8, 10, -5}, {8, 10, 30}} {
		for m := 0; m < 8; m++ {
			exactMatchesReference(t, a, shape, c, SpatialParams{Mirror: [3]bool{m&1 != 0, m&2 != 0, m&4 != 0}}, img, lab)
		}
	}
}

// exactMatchesReference plans sp with the patch's corner at corner, which
// must take the exact path, applies it to the one-channel img and lab, and
// fails unless image and label are bit for bit spatialReference's. It
// returns the patch.
func exactMatchesReference(t *testing.T, a *Augmenter, shape, corner [3]int, sp SpatialParams, img []float32, lab []uint8) Dest {
	t.Helper()
	var s Plan
	if err := a.PlanWith(&s, shape, corner, sp); err != nil {
		t.Fatal(err)
	}
	if !s.exact {
		t.Fatalf("corner %v %+v: not on the exact path", corner, sp)
	}
	d := newDest(a, true)
	if err := a.Apply(&s, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, d, &Workspace{}); err != nil {
		t.Fatal(err)
	}
	n := len(d.Label)
	ref, refLab := [][]float32{make([]float32, n)}, make([]float32, n)
	spatialReference(&s, &region{img: [][]float32{img}, lab: lab, d: shape[0], h: shape[1], w: shape[2]}, ref, refLab, 0, 0)
	if i, ok := equalBits(d.Image[0], ref[0]); !ok {
		t.Fatalf("corner %v %+v: voxel %d %v, reference %v", corner, sp, i, d.Image[0][i], ref[0][i])
	}
	if i, ok := equalBits(d.Label, refLab); !ok {
		t.Fatalf("corner %v %+v: label voxel %d", corner, sp, i)
	}
	return d
}

// TestAlignedPathMatchesGeneral: samples scaled (per axis or not) and
// flipped, without rotation or field, take sampleRowAligned; it must give
// the bytes of the general row sampler, also where the patch reaches past
// the volume (edge taps read the border).
func TestAlignedPathMatchesGeneral(t *testing.T) {
	shape := [3]int{19, 23, 21}
	img := testutil.SmoothVolume(shape, 5)
	lab := testutil.LabelsOf(img)
	cfg := mustPreset(t, config.PresetNone)
	cfg.BorderValue = -3
	patch := [3]int{16, 18, 20}
	a := mustNew(t, cfg, patch, 1)
	r := rand.New(rand.NewPCG(8, 9))
	n := patch[0] * patch[1] * patch[2]
	reg := region{img: [][]float32{img}, lab: lab, d: shape[0], h: shape[1], w: shape[2]}
	aligned := 0
	for it := 0; it < 40; it++ {
		sp := SpatialParams{Scale: [3]float64{0.7 + 0.7*r.Float64(), 0.7 + 0.7*r.Float64(), 0.7 + 0.7*r.Float64()}}
		if it%2 == 0 {
			sp.Scale[1], sp.Scale[2] = sp.Scale[0], sp.Scale[0]
		}
		sp.Mirror = [3]bool{r.IntN(2) == 0, r.IntN(2) == 0, r.IntN(2) == 0}
		corner := [3]int{r.IntN(12) - 6, r.IntN(12) - 6, r.IntN(12) - 6}
		var s Plan
		if err := a.PlanWith(&s, shape, corner, sp); err != nil {
			t.Fatal(err)
		}
		if s.exact || !axisAligned(&s) {
			continue
		}
		aligned++
		d := newDest(a, true)
		if err := a.Apply(&s, Input{Image: [][]float32{img}, Label: lab, Shape: shape}, d, &Workspace{}); err != nil {
			t.Fatal(err)
		}
		want := [][]float32{make([]float32, n)}
		wantLab := make([]float32, n)
		var sc spatialScratch
		for z := 0; z < patch[0]; z++ {
			for y := 0; y < patch[1]; y++ {
				segs := rowSegments(nil, &s, z, y, &sc)
				sampleRowLinear(segs, 0, patch[2], &reg, want, wantLab, (z*patch[1]+y)*patch[2], float32(cfg.BorderValue), float32(cfg.LabelBorderValue), &sc.row)
			}
		}
		for i := range want[0] {
			if math.Float32bits(d.Image[0][i]) != math.Float32bits(want[0][i]) || d.Label[i] != wantLab[i] {
				t.Fatalf("plan %d (scale %.3v, mirror %v, corner %v) voxel %d: aligned %v/%v, general %v/%v",
					it, sp.Scale, sp.Mirror, corner, i, d.Image[0][i], d.Label[i], want[0][i], wantLab[i])
			}
		}
	}
	if aligned < 30 {
		t.Fatalf("only %d of 40 plans were axis-aligned", aligned)
	}
}

// spatialReference is the plain version of the spatial pass, one voxel at a
// time in float64: o -> C + L·(o − h + e(o)), then trilinear with bounds
// checks on every tap. Tests hold the fast path to it.
func spatialReference(s *Plan, src *region, dst [][]float32, dlab []float32, border, lborder float32) {
	p := s.Patch
	var half [3]float64
	for i := range 3 {
		half[i] = float64(p[i]-1) / 2
	}
	at := func(img []float32, z, y, x int) float64 {
		if z >= 0 && z < src.d && y >= 0 && y < src.h && x >= 0 && x < src.w {
			return float64(img[(z*src.h+y)*src.w+x])
		}
		return float64(border)
	}
	for z := 0; z < p[0]; z++ {
		for y := 0; y < p[1]; y++ {
			for x := 0; x < p[2]; x++ {
				u := [3]float64{float64(z) - half[0], float64(y) - half[1], float64(x) - half[2]}
				if s.grid.active {
					e := s.grid.at([3]float64{float64(z), float64(y), float64(x)})
					for i := range u {
						u[i] += e[i]
					}
				}
				var c [3]float64
				for i := range 3 {
					c[i] = s.center[i] - float64(src.origin[i]) + float64(s.lin[i][0]*u[0]) + float64(s.lin[i][1]*u[1]) + float64(s.lin[i][2]*u[2])
				}
				i0 := [3]int{int(floor64(c[0])), int(floor64(c[1])), int(floor64(c[2]))}
				t := [3]float64{c[0] - float64(i0[0]), c[1] - float64(i0[1]), c[2] - float64(i0[2])}
				o := (z*p[1]+y)*p[2] + x
				for ch, img := range src.img {
					v := 0.0
					for dz := range 2 {
						for dy := range 2 {
							for dx := range 2 {
								w8 := weight1(t[0], dz) * weight1(t[1], dy) * weight1(t[2], dx)
								if w8 != 0 {
									v += float64(w8 * at(img, i0[0]+dz, i0[1]+dy, i0[2]+dx))
								}
							}
						}
					}
					dst[ch][o] = float32(v)
				}
				if dlab != nil {
					n := [3]int{}
					for i := range 3 {
						n[i] = i0[i]
						if t[i] >= 0.5 {
							n[i]++
						}
					}
					if n[0] >= 0 && n[0] < src.d && n[1] >= 0 && n[1] < src.h && n[2] >= 0 && n[2] < src.w {
						dlab[o] = float32(src.lab[(n[0]*src.h+n[1])*src.w+n[2]])
					} else {
						dlab[o] = lborder
					}
				}
			}
		}
	}
}

func floor64(x float64) float64 {
	f := float64(int64(x))
	if f > x {
		f--
	}
	return f
}

// weight1 is the linear weight of tap d (0 or 1) at fraction t.
func weight1(t float64, d int) float64 {
	if d == 0 {
		return 1 - t
	}
	return t
}
