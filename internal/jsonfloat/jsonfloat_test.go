package jsonfloat

import (
	"encoding/json"
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := []Float{1.5, -2, Float(math.NaN()), Float(math.Inf(1)), Float(math.Inf(-1)), 0}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "[1.5,-2,null,null,null,0]"; got != want {
		t.Fatalf("marshal: %s, want %s", got, want)
	}
	var out []Float
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{1.5, -2, math.NaN(), math.NaN(), math.NaN(), 0} {
		got := float64(out[i])
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("value %d: %v, want %v", i, got, want)
		}
	}
	var f Float
	if err := json.Unmarshal([]byte(`"x"`), &f); err == nil {
		t.Fatal("a string read as a Float")
	}
}
