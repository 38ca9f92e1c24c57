package preprocess

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// naiveForegroundIndex is BuildForegroundIndex written plainly, one voxel
// at a time, as the reference for the word-skipping loops.
func naiveForegroundIndex(label []uint8, shape [3]int, maxPerClass int) *ForegroundIndex {
	var counts [256]int
	for _, v := range label {
		counts[v]++
	}
	f := &ForegroundIndex{Shape: shape}
	var slot [256]int
	var need, left [256]uint64
	for c := 1; c < 256; c++ {
		if counts[c] == 0 {
			continue
		}
		k := counts[c]
		if maxPerClass > 0 {
			k = max(min(maxPerClass, counts[c]), (counts[c]+99)/100)
		}
		slot[c] = len(f.Classes)
		f.Classes = append(f.Classes, uint8(c))
		f.Counts = append(f.Counts, counts[c])
		f.Locations = append(f.Locations, nil)
		need[c], left[c] = uint64(k), uint64(counts[c])
	}
	rng := rand.New(rand.NewPCG(foregroundSeed, 0))
	for i, v := range label {
		if v == 0 || need[v] == 0 {
			continue
		}
		if need[v] == left[v] || rng.Uint64N(left[v]) < need[v] {
			f.Locations[slot[v]] = append(f.Locations[slot[v]], int32(i))
			need[v]--
		}
		left[v]--
	}
	return f
}

// TestForegroundIndexMatchesNaive holds the word-at-a-time counting and
// skipping to the plain loop, on sparse and dense labels whose lengths are
// not multiples of 8 and whose foreground sits at word edges.
func TestForegroundIndexMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		shape   [3]int
		density float64
		cap     int
	}{
		{[3]int{3, 5, 7}, 0.1, 0},
		{[3]int{9, 11, 13}, 0.01, 5},
		{[3]int{16, 16, 16}, 0.5, 100},
		{[3]int{17, 19, 23}, 0.002, 3},
		{[3]int{1, 1, 1}, 1, 0},
	} {
		n := tc.shape[0] * tc.shape[1] * tc.shape[2]
		lab := make([]uint8, n)
		for i := range lab {
			if r.Float64() < tc.density {
				lab[i] = uint8(1 + r.IntN(3))
			}
		}
		lab[n-1] = 2 // the last voxel, after the last whole word
		lab[0] = 1
		got, err := BuildForegroundIndex(lab, tc.shape, tc.cap)
		if err != nil {
			t.Fatal(err)
		}
		want := naiveForegroundIndex(lab, tc.shape, tc.cap)
		if !slices.Equal(got.Classes, want.Classes) || !slices.Equal(got.Counts, want.Counts) {
			t.Fatalf("%v: classes %v counts %v, want %v %v", tc.shape, got.Classes, got.Counts, want.Classes, want.Counts)
		}
		for k := range want.Locations {
			if !slices.Equal(got.Locations[k], want.Locations[k]) {
				t.Fatalf("%v class %d: locations differ (%d vs %d kept)", tc.shape, want.Classes[k], len(got.Locations[k]), len(want.Locations[k]))
			}
		}
	}
}

func TestForegroundIndex(t *testing.T) {
	shape := [3]int{30, 40, 50}
	img := testutil.SmoothVolume(shape, 10)
	lab := testutil.LabelsOf(img)
	counts := map[uint8]int{}
	for _, v := range lab {
		counts[v]++
	}
	f, err := BuildForegroundIndex(lab, shape, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Classes) != 3 || f.Classes[0] != 1 || f.Classes[2] != 3 {
		t.Fatalf("classes %v", f.Classes)
	}
	for k, c := range f.Classes {
		n := counts[c]
		want := max(min(500, n), (n+99)/100)
		if f.Counts[k] != n || len(f.Locations[k]) != want {
			t.Fatalf("class %d: count %d (want %d), kept %d (want %d)", c, f.Counts[k], n, len(f.Locations[k]), want)
		}
		if !slices.IsSorted(f.Locations[k]) {
			t.Fatal("locations not ascending")
		}
		for i, l := range f.Locations[k] {
			if lab[l] != c || (i > 0 && l == f.Locations[k][i-1]) {
				t.Fatalf("class %d location %d holds %d", c, l, lab[l])
			}
		}
		v := f.Voxel(int(f.Locations[k][0]))
		if lin := (v[0]*shape[1]+v[1])*shape[2] + v[2]; lin != int(f.Locations[k][0]) {
			t.Fatal("Voxel does not invert the linear index")
		}
	}
	// Deterministic.
	g, _ := BuildForegroundIndex(lab, shape, 500)
	for k := range f.Locations {
		if !slices.Equal(f.Locations[k], g.Locations[k]) {
			t.Fatal("two builds differ")
		}
	}
	// maxPerClass <= 0 keeps all; the 1 % rule raises small limits.
	all, _ := BuildForegroundIndex(lab, shape, 0)
	if len(all.Locations[0]) != counts[1] {
		t.Fatal("maxPerClass 0 does not keep all")
	}
	few, _ := BuildForegroundIndex(lab, shape, 1)
	if len(few.Locations[0]) != (counts[1]+99)/100 {
		t.Fatalf("1 %% rule: kept %d of %d", len(few.Locations[0]), counts[1])
	}
	// Uniformity: kept voxels spread over the whole class (mean position
	// close to the class's).
	meanPos := func(ls []int32) float64 {
		s := 0.0
		for _, l := range ls {
			s += float64(l)
		}
		return s / float64(len(ls))
	}
	if d := math.Abs(meanPos(f.Locations[0]) - meanPos(all.Locations[0])); d > 0.1*float64(len(lab)) {
		t.Fatalf("sample mean position off by %.0f voxels", d)
	}
	if _, err := BuildForegroundIndex(lab[:10], shape, 10); err == nil {
		t.Fatal("short label accepted")
	}
	empty, err := BuildForegroundIndex(make([]uint8, 8), [3]int{2, 2, 2}, 10)
	if err != nil || len(empty.Classes) != 0 {
		t.Fatal("background-only label")
	}
}

func BenchmarkForegroundIndex(b *testing.B) {
	_, lab := testutil.MRILike([3]int{160, 192, 160})
	b.ResetTimer()
	for b.Loop() {
		if _, err := BuildForegroundIndex(lab, [3]int{160, 192, 160}, DefaultForegroundSamples); err != nil {
			b.Fatal(err)
		}
	}
}
