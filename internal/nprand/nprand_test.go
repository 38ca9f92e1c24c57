package nprand

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// fixture is testdata/randomstate.json, written by make_fixtures.py with
// NumPy.
type fixture struct {
	NumPy string `json:"numpy"`
	Seeds []struct {
		Seed      uint32 `json:"seed"`
		Raw       []uint32
		Intervals []struct {
			Max    string
			Values []string
		}
		Permutations map[string][]int
	}
}

func readFixture(t *testing.T) fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/randomstate.json")
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Seeds) == 0 {
		t.Fatal("fixture holds no seeds")
	}
	return f
}

func TestRawOutputsMatchNumPy(t *testing.T) {
	for _, s := range readFixture(t).Seeds {
		r := New(s.Seed)
		for i, want := range s.Raw {
			if got := r.Uint32(); got != want {
				t.Fatalf("RandomState(%d) output %d: %d, NumPy %d", s.Seed, i, got, want)
			}
		}
	}
}

func TestIntervalMatchesNumPy(t *testing.T) {
	for _, s := range readFixture(t).Seeds {
		for _, iv := range s.Intervals {
			max, err := strconv.ParseUint(iv.Max, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			r := New(s.Seed)
			for i, w := range iv.Values {
				want, _ := strconv.ParseUint(w, 10, 64)
				if got := r.Interval(max); got != want {
					t.Fatalf("RandomState(%d) draw %d in [0, %d]: %d, NumPy %d", s.Seed, i, max, got, want)
				}
			}
		}
	}
}

func TestPermMatchesNumPy(t *testing.T) {
	for _, s := range readFixture(t).Seeds {
		if len(s.Permutations) == 0 {
			t.Fatal("no permutations in the fixture")
		}
		for ns, want := range s.Permutations {
			n, _ := strconv.Atoi(ns)
			got := New(s.Seed).Perm(n)
			if len(got) != len(want) {
				t.Fatalf("permutation(%d): %d elements, NumPy %d", n, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("RandomState(%d).permutation(%d)[%d] = %d, NumPy %d", s.Seed, n, i, got[i], want[i])
				}
			}
		}
	}
}
