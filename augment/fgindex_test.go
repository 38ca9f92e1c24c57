package augment

import (
	"math/rand/v2"
	"slices"
	"testing"
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
