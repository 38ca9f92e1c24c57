package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestEDTMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := Shape{7, 9, 11}
	sp := [3]float64{2.5, 0.7, 1.3}
	for trial := 0; trial < 5; trial++ {
		feat := make([]bool, s.Len())
		for i := range feat {
			feat[i] = rng.Float64() < 0.03
		}
		got := EDT(feat, s, sp)
		for d := 0; d < s[0]; d++ {
			for h := 0; h < s[1]; h++ {
				for w := 0; w < s[2]; w++ {
					best := math.Inf(1)
					for d2 := 0; d2 < s[0]; d2++ {
						for h2 := 0; h2 < s[1]; h2++ {
							for w2 := 0; w2 < s[2]; w2++ {
								if feat[(d2*s[1]+h2)*s[2]+w2] {
									dd, dh, dw := float64(d-d2)*sp[0], float64(h-h2)*sp[1], float64(w-w2)*sp[2]
									best = math.Min(best, math.Sqrt(dd*dd+dh*dh+dw*dw))
								}
							}
						}
					}
					g := got[(d*s[1]+h)*s[2]+w]
					if math.Abs(g-best) > 1e-9 && !(math.IsInf(g, 1) && math.IsInf(best, 1)) {
						t.Fatalf("EDT at (%d,%d,%d) = %v, brute force %v", d, h, w, g, best)
					}
				}
			}
		}
	}
}

func TestEDTNoFeature(t *testing.T) {
	got := EDT(make([]bool, 8), Shape{2, 2, 2}, [3]float64{1, 1, 1})
	for _, v := range got {
		if !math.IsInf(v, 1) {
			t.Fatalf("got %v, want +Inf everywhere", got)
		}
	}
}

func TestPercentileMatchesNumpy(t *testing.T) {
	// np.percentile([1, 2, 3, 4, 10], 95) == 8.8; np.percentile([5], 95) == 5
	if p := Percentile([]float64{10, 1, 3, 2, 4}, 95); math.Abs(p-8.8) > 1e-12 {
		t.Fatalf("got %v, want 8.8", p)
	}
	if p := Percentile([]float64{5}, 95); p != 5 {
		t.Fatalf("got %v", p)
	}
}

// TestHD95Cubes checks HD95 on two shifted cubes against a brute-force
// computation of the directed surface distances.
func TestHD95Cubes(t *testing.T) {
	s := Shape{12, 12, 12}
	sp := [3]float64{1, 2, 0.5}
	a := make([]bool, s.Len())
	b := make([]bool, s.Len())
	for d := 2; d < 8; d++ {
		for h := 2; h < 8; h++ {
			for w := 2; w < 8; w++ {
				a[(d*12+h)*12+w] = true
				b[((d+2)*12+h+1)*12+w] = true
			}
		}
	}
	got, err := HD95(a, b, s, sp)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb := surface(a, s), surface(b, s)
	directed := func(from, to []bool) []float64 {
		var out []float64
		for i := range from {
			if !from[i] {
				continue
			}
			d1, h1, w1 := i/144, i/12%12, i%12
			best := math.Inf(1)
			for j := range to {
				if !to[j] {
					continue
				}
				d2, h2, w2 := j/144, j/12%12, j%12
				dd, dh, dw := float64(d1-d2)*sp[0], float64(h1-h2)*sp[1], float64(w1-w2)*sp[2]
				best = math.Min(best, math.Sqrt(dd*dd+dh*dh+dw*dw))
			}
			out = append(out, best)
		}
		return out
	}
	want := math.Max(Percentile(directed(sa, sb), 95), Percentile(directed(sb, sa), 95))
	if math.Abs(got-want) > 1e-9 || want == 0 {
		t.Fatalf("HD95 = %v, brute force %v", got, want)
	}
	if same, _ := HD95(a, a, s, sp); same != 0 {
		t.Fatalf("HD95(a, a) = %v", same)
	}
	empty := make([]bool, s.Len())
	if v, _ := HD95(empty, empty, s, sp); !math.IsNaN(v) {
		t.Fatalf("both empty: %v", v)
	}
	if v, _ := HD95(a, empty, s, sp); !math.IsInf(v, 1) {
		t.Fatalf("one empty: %v", v)
	}
}

func TestConfusionsAndDice(t *testing.T) {
	pred := []uint8{0, 1, 1, 2, 2, 0, 1}
	ref := []uint8{0, 1, 2, 2, 0, 1, 1}
	c, err := Confusions(pred, ref, 3)
	if err != nil {
		t.Fatal(err)
	}
	// class 1: pred at {1,2,6}, ref at {1,5,6}: TP 2, FP 1, FN 1 → 4/6
	if c[1] != (Confusion{2, 1, 1}) || math.Abs(c[1].Dice()-4.0/6) > 1e-15 {
		t.Fatalf("class 1: %+v dice %v", c[1], c[1].Dice())
	}
	// class 2: pred at {3,4}, ref at {2,3}: TP 1, FP 1, FN 1 → 0.5
	if c[2] != (Confusion{1, 1, 1}) || c[2].Dice() != 0.5 {
		t.Fatalf("class 2: %+v", c[2])
	}
	if !math.IsNaN((Confusion{}).Dice()) {
		t.Fatal("empty class should be NaN")
	}
	if _, err := Confusions(pred, ref[:3], 3); err == nil {
		t.Fatal("length mismatch accepted")
	}
	if _, err := Confusions([]uint8{5}, []uint8{0}, 3); err == nil {
		t.Fatal("out-of-range label accepted")
	}
	if m := NanMean([]float64{1, math.NaN(), 0.5}); m != 0.75 {
		t.Fatalf("NanMean = %v", m)
	}
	// np.nanmean([0.1]*10 + [nan]) is 0.1 (pairwise sum); a running sum
	// gives 0.09999999999999999.
	tenth := []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, math.NaN()}
	if m := NanMean(tenth); m != 0.1 {
		t.Fatalf("NanMean of ten 0.1 = %v, np.nanmean 0.1", m)
	}
}
