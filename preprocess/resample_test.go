package preprocess

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestResampledShape(t *testing.T) {
	for _, tc := range []struct {
		shape           [3]int
		spacing, target [3]float64
		want            [3]int
	}{
		{[3]int{10, 20, 30}, [3]float64{1, 1, 1}, [3]float64{1, 1, 1}, [3]int{10, 20, 30}}, // identity
		{[3]int{10, 20, 30}, [3]float64{1, 1, 1}, [3]float64{2, 0.5, 1}, [3]int{5, 40, 30}},
		{[3]int{35, 51, 35}, [3]float64{1, 1, 1}, [3]float64{1.5, 1.5, 1.5}, [3]int{23, 34, 23}}, // 23.33, 34, 23.33
		{[3]int{5, 7, 9}, [3]float64{1, 1, 1}, [3]float64{2, 2, 2}, [3]int{2, 4, 4}},             // 2.5→2, 3.5→4, 4.5→4: halves to even
		{[3]int{3, 3, 3}, [3]float64{1, 1, 1}, [3]float64{100, 100, 100}, [3]int{1, 1, 1}},       // at least 1
		{[3]int{40, 512, 512}, [3]float64{5, 0.7, 0.7}, [3]float64{1, 1, 1}, [3]int{200, 358, 358}},
	} {
		if got := ResampledShape(tc.shape, tc.spacing, tc.target); got != tc.want {
			t.Errorf("ResampledShape(%v, %v, %v) = %v, want %v", tc.shape, tc.spacing, tc.target, got, tc.want)
		}
	}
}

// srcCoord is the reference mapping of the grid convention: output index
// i of n_out samples source index (i+0.5)·n_in/n_out − 0.5, clamped.
func srcCoord(i, nin, nout int) float64 {
	c := (float64(i)+0.5)*float64(nin)/float64(nout) - 0.5
	return math.Min(math.Max(c, 0), float64(nin-1))
}

// TestResampleLinearRamp: trilinear interpolation reproduces a linear
// function exactly (up to float32 rounding) at the mapped coordinates;
// with dyadic weights (upsampling by 2) exactly to the bit.
func TestResampleLinearRamp(t *testing.T) {
	ramp := func(z, y, x float64) float64 { return 3*z - 5*y + 7*x + 11 }
	from := [3]int{5, 6, 7}
	src := make([]float32, from[0]*from[1]*from[2])
	for z := range from[0] {
		for y := range from[1] {
			for x := range from[2] {
				src[(z*from[1]+y)*from[2]+x] = float32(ramp(float64(z), float64(y), float64(x)))
			}
		}
	}
	for _, tc := range []struct {
		to    [3]int
		exact bool
	}{
		{[3]int{10, 12, 14}, true},  // ×2: weights 1/4, 3/4
		{[3]int{3, 8, 9}, false},    // mixed down/up
		{[3]int{1, 6, 20}, false},   // one plane, identity axis, strong upsampling
		{[3]int{5, 6, 7}, true},     // identity
		{[3]int{20, 24, 28}, true},  // ×4
		{[3]int{4, 3, 7}, false},    // downsampling
		{[3]int{13, 11, 2}, false},  // odd factors
		{[3]int{10, 6, 14}, true},   // ×2 on two axes
		{[3]int{15, 18, 21}, false}, // ×3
	} {
		out, err := ResampleLinear(src, from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		for z := range tc.to[0] {
			for y := range tc.to[1] {
				for x := range tc.to[2] {
					want := ramp(srcCoord(z, from[0], tc.to[0]), srcCoord(y, from[1], tc.to[1]), srcCoord(x, from[2], tc.to[2]))
					got := float64(out[(z*tc.to[1]+y)*tc.to[2]+x])
					if tc.exact && got != want || math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
						t.Fatalf("%v → %v: voxel (%d,%d,%d) = %v, want %v", from, tc.to, z, y, x, got, want)
					}
				}
			}
		}
	}
}

func TestResampleIdentity(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sh := [3]int{4, 5, 6}
	img := make([]float32, 120)
	lbl := make([]uint8, 120)
	for i := range img {
		img[i] = float32(r.NormFloat64() * 1000)
		lbl[i] = uint8(r.IntN(4))
	}
	out, err := ResampleLinear(img, sh, sh)
	if err != nil {
		t.Fatal(err)
	}
	lout, err := ResampleNearest(lbl, sh, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range img {
		if out[i] != img[i] || lout[i] != lbl[i] {
			t.Fatalf("voxel %d: %v/%d, want %v/%d", i, out[i], lout[i], img[i], lbl[i])
		}
	}
}

func TestResampleNearestLabels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	from := [3]int{6, 7, 8}
	src := make([]uint8, from[0]*from[1]*from[2])
	classes := []uint8{0, 3, 7, 250}
	for i := range src {
		src[i] = classes[r.IntN(len(classes))]
	}
	// Upsampling by 2 repeats every voxel 2×2×2.
	to := [3]int{12, 14, 16}
	out, err := ResampleNearest(src, from, to)
	if err != nil {
		t.Fatal(err)
	}
	for z := range to[0] {
		for y := range to[1] {
			for x := range to[2] {
				if got, want := out[(z*to[1]+y)*to[2]+x], src[(z/2*from[1]+y/2)*from[2]+x/2]; got != want {
					t.Fatalf("×2 voxel (%d,%d,%d) = %d, want %d", z, y, x, got, want)
				}
			}
		}
	}
	// And back: the round trip is exact.
	back, err := ResampleNearest(out, to, from)
	if err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if back[i] != src[i] {
			t.Fatalf("×2 then ×½: voxel %d = %d, want %d", i, back[i], src[i])
		}
	}
	// Any factor: every output value is the nearest source voxel's, so
	// only the input's classes appear.
	for _, to := range [][3]int{{3, 9, 5}, {1, 1, 1}, {11, 4, 13}} {
		out, err := ResampleNearest(src, from, to)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range out {
			z, y, x := i/(to[1]*to[2]), i/to[2]%to[1], i%to[2]
			n := func(i, nin, nout int) int { return min(int(math.Floor(srcCoord(i, nin, nout)+0.5)), nin-1) }
			if want := src[(n(z, from[0], to[0])*from[1]+n(y, from[1], to[1]))*from[2]+n(x, from[2], to[2])]; v != want {
				t.Fatalf("%v → %v: voxel %d = %d, want the nearest source voxel's %d", from, to, i, v, want)
			}
		}
	}
}

// TestResampleRegionsEqualWhole: resampling a sub-box gives the bytes of
// the same voxels in a whole resampling (the gz source depends on it).
func TestResampleRegionsEqualWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	from, to := [3]int{9, 10, 11}, [3]int{14, 6, 17}
	img := make([]float32, from[0]*from[1]*from[2])
	lbl := make([]uint8, len(img))
	for i := range img {
		img[i] = float32(r.NormFloat64())
		lbl[i] = uint8(r.IntN(3))
	}
	whole, _ := ResampleLinear(img, from, to)
	wholeL, _ := ResampleNearest(lbl, from, to)
	rs := NewResampler(from, to)
	for it := 0; it < 50; it++ {
		var lo, hi [3]int
		for a := range 3 {
			lo[a] = r.IntN(to[a])
			hi[a] = lo[a] + 1 + r.IntN(to[a]-lo[a])
		}
		n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
		out, outL := make([]float32, n), make([]uint8, n)
		// Only the source planes the region reads are valid.
		zlo, zhi := rs.ax[0].span(lo[0], hi[0])
		part := make([]float32, len(img))
		for i := range part {
			part[i] = float32(math.NaN())
		}
		plane := from[1] * from[2]
		copy(part[zlo*plane:zhi*plane], img[zlo*plane:zhi*plane])
		rs.Linear(out, part, lo, hi)
		rs.Nearest(outL, lbl, lo, hi)
		k := 0
		for z := lo[0]; z < hi[0]; z++ {
			for y := lo[1]; y < hi[1]; y++ {
				for x := lo[2]; x < hi[2]; x++ {
					i := (z*to[1]+y)*to[2] + x
					if math.Float32bits(out[k]) != math.Float32bits(whole[i]) || outL[k] != wholeL[i] {
						t.Fatalf("region [%v,%v) voxel (%d,%d,%d): %v/%d, whole %v/%d", lo, hi, z, y, x, out[k], outL[k], whole[i], wholeL[i])
					}
					k++
				}
			}
		}
	}
}

func TestResampleBadInput(t *testing.T) {
	if _, err := ResampleLinear(make([]float32, 10), [3]int{2, 2, 2}, [3]int{1, 1, 1}); err == nil {
		t.Error("wrong voxel count accepted")
	}
	if _, err := ResampleNearest(make([]uint8, 8), [3]int{2, 2, 2}, [3]int{0, 1, 1}); err == nil {
		t.Error("empty output shape accepted")
	}
}

// TestTargetIn: the target converted into a case's unit, an axis of 0
// taking the case's own spacing (not converted: it is the case's).
func TestTargetIn(t *testing.T) {
	p := Spec{Target: &[3]float64{0, 0.5, 0.25}, TargetUnit: "millimeter"}
	got, err := p.TargetIn("micrometer", [3]float64{2000, 300, 300})
	if err != nil {
		t.Fatal(err)
	}
	if *got != [3]float64{2000, 500, 250} {
		t.Errorf("TargetIn: %v, want [2000 500 250]", *got)
	}
	p.Target = &[3]float64{1, 0.5, 0.25}
	if got, _ := p.TargetIn("millimeter", [3]float64{3, 3, 3}); *got != *p.Target {
		t.Errorf("TargetIn without a kept axis: %v", *got)
	}
	if _, err := p.TargetIn("second", [3]float64{1, 1, 1}); err == nil {
		t.Error("a unit that is not a length was accepted")
	}
	p.Target = nil
	if got, err := p.TargetIn("millimeter", [3]float64{1, 1, 1}); got != nil || err != nil {
		t.Errorf("no target: %v, %v", got, err)
	}
}
