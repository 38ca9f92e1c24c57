package data

import (
	"fmt"
	"math"
	"testing"
)

func TestSamplerEpochs(t *testing.T) {
	s := &caseSampler{Cases: []int{10, 11, 12, 13, 14}, Seed: 3, Batch: 3, Oversample: 0.33}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	e0 := s.Epoch(0, nil)
	e1 := s.Epoch(1, nil)
	if len(e0) != 5 {
		t.Fatalf("one pass has %d samples", len(e0))
	}
	seen := map[int]bool{}
	for _, x := range e0 {
		seen[x.Case] = true
	}
	if len(seen) != 5 {
		t.Errorf("one pass does not visit every case once: %v", e0)
	}
	if fmt.Sprint(e0) == fmt.Sprint(e1) {
		t.Errorf("epochs 0 and 1 have the same order")
	}
	if fmt.Sprint(s.Epoch(1, nil)) != fmt.Sprint(e1) {
		t.Errorf("epoch 1 not reproducible")
	}
	// Batches of 3 and 2: round(3×0.33)=1 and round(2×0.33)=1 fg slot, the last.
	for i, x := range e0 {
		want := i == 2 || i == 4
		if x.ForceFG != want {
			t.Errorf("sample %d ForceFG %v, want %v", i, x.ForceFG, want)
		}
	}
	s2 := &caseSampler{Cases: []int{0, 1}, Batch: 2, Oversample: 0.5, Iterations: 3}
	s2.Check()
	for i, x := range s2.Epoch(0, nil) {
		if x.ForceFG != (i%2 == 1) {
			t.Errorf("oversample 0.5, batch 2: slot %d ForceFG %v", i, x.ForceFG)
		}
	}
}

func TestSamplerWeights(t *testing.T) {
	s := &caseSampler{Cases: []int{0, 1, 2, 3}, Weights: []float64{1, 0, 3, 0}, Seed: 1, Batch: 4, Iterations: 2500}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	count := map[int]int{}
	for _, x := range s.Epoch(0, nil) {
		count[x.Case]++
	}
	if count[1] != 0 || count[3] != 0 {
		t.Errorf("zero-weight cases drawn: %v", count)
	}
	ratio := float64(count[2]) / float64(count[0])
	if math.Abs(ratio-3) > 0.3 {
		t.Errorf("weight 3:1 drew %v (ratio %.2f)", count, ratio)
	}
	for a := 1; a < 50; a++ {
		if c := s.Replacement(0, 5, a); c != 0 && c != 2 {
			t.Errorf("replacement drew zero-weight case %d", c)
		}
	}
	if (&caseSampler{Cases: []int{0}, Weights: []float64{0}, Batch: 1}).Check() == nil {
		t.Error("all-zero weights accepted")
	}
}
