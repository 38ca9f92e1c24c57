package npsum

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"
)

type vector struct {
	X                  []float64
	Sum, Mean, NanMean float64
	rawSum, rawNanMean string
}

func loadFixture(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/sums.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct {
			X       []string `json:"x"`
			Sum     string   `json:"sum"`
			Mean    string   `json:"mean"`
			NanMean string   `json:"nanmean"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	parse := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("fixture value %q: %v", s, err)
		}
		return v
	}
	out := make([]vector, len(doc.Vectors))
	for i, d := range doc.Vectors {
		v := vector{Sum: parse(d.Sum), Mean: parse(d.Mean), NanMean: parse(d.NanMean), rawSum: d.Sum, rawNanMean: d.NanMean}
		for _, s := range d.X {
			v.X = append(v.X, parse(s))
		}
		out[i] = v
	}
	if len(out) < 200 {
		t.Fatalf("fixture holds %d vectors, want the few hundred make_fixtures.py writes", len(out))
	}
	return out
}

// same reports bit equality, any NaN equal to any NaN.
func same(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

// TestMatchesNumPy holds Sum, Mean and NanMean to NumPy's np.sum, np.mean
// and np.nanmean of every fixture vector, bit for bit (-0.0 apart from
// +0.0), and checks that the fixture could tell a running sum from
// NumPy's: on many vectors a plain loop's sum or nanmean differs.
func TestMatchesNumPy(t *testing.T) {
	vs := loadFixture(t)
	naiveDiffers := 0
	for i, v := range vs {
		if got := Sum(v.X); !same(got, v.Sum) {
			t.Errorf("vector %d (%d values): Sum %v, np.sum %s", i, len(v.X), got, v.rawSum)
		}
		if got := Mean(v.X); !same(got, v.Mean) {
			t.Errorf("vector %d (%d values): Mean %v, np.mean %v", i, len(v.X), got, v.Mean)
		}
		if got := NanMean(v.X); !same(got, v.NanMean) {
			t.Errorf("vector %d (%d values): NanMean %v, np.nanmean %s", i, len(v.X), got, v.rawNanMean)
		}
		s, k := 0.0, 0
		for _, x := range v.X {
			if !math.IsNaN(x) {
				s += x
				k++
			}
		}
		if k > 0 && !same(s/float64(k), v.NanMean) {
			naiveDiffers++
		}
	}
	if naiveDiffers < 20 {
		t.Errorf("a running sum matches np.nanmean on all but %d vectors: the fixture cannot tell the orders apart", naiveDiffers)
	}
}

// TestNanMeanFunc leaves out what skip reports: infinities as well as
// NaN, counted as zeros in their places.
func TestNanMeanFunc(t *testing.T) {
	skip := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	x := []float64{1, math.Inf(1), 2, math.NaN(), 4, 8, 16, 32, 64, math.Inf(-1), 128}
	y := []float64{1, 0, 2, 0, 4, 8, 16, 32, 64, 0, 128}
	if got, want := NanMeanFunc(x, skip), Sum(y)/8; got != want {
		t.Errorf("NanMeanFunc %v, want %v", got, want)
	}
	if got := NanMeanFunc([]float64{math.Inf(1), math.NaN()}, skip); !math.IsNaN(got) {
		t.Errorf("NanMeanFunc of nothing kept: %v, want NaN", got)
	}
	if got := NanMean(x); !math.IsNaN(got) {
		t.Errorf("NanMean keeps ±Inf: %v, want NaN (Inf + -Inf)", got)
	}
}
