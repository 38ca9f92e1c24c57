package augment

import (
	"math/rand/v2"
	"testing"
)

func TestMaxBoxSizeBoundsEveryBox(t *testing.T) {
	shape := [3]int{200, 210, 220}
	cfg := allOn(t)
	patch := [3]int{40, 32, 48}
	a := mustNew(t, cfg, patch, 1)
	bound := a.MaxBoxSize(shape)
	rng := rand.New(rand.NewPCG(1, 3))
	var s Plan
	for it := 0; it < 200; it++ {
		if err := a.Draw(&s, rng, shape, nil, false); err != nil {
			t.Fatal(err)
		}
		sz := s.Box.Size()
		for i := range 3 {
			if sz[i] > bound[i] {
				t.Fatalf("box %v exceeds bound %v", sz, bound)
			}
		}
	}
}

func TestInitialPatchSizeMatchesNNUNet(t *testing.T) {
	// nnU-Net v2, 3D, patch 128³, rotation ±30°, scale (0.85, 1.25):
	// 128·(sin 30° + cos 30°)/0.85 = 205.7 -> 205.
	got := InitialPatchSize([3]int{128, 128, 128}, [3]float64{30, 30, 30}, 0.85)
	if got != [3]int{205, 205, 205} {
		t.Fatalf("got %v, want [205 205 205]", got)
	}
	if got := InitialPatchSize([3]int{64, 64, 64}, [3]float64{}, 1); got != [3]int{64, 64, 64} {
		t.Fatalf("no rotation: got %v", got)
	}
}
