package dist

import (
	"slices"
	"strings"
	"testing"
)

// Buckets start in their order, each once all its tensors are ready and
// every earlier one has started, whatever order the tensors come in; a
// tensor reported twice is refused; Rest starts what is left and names
// the tensors never reported; Reset starts the next step afresh.
func TestTrackerLaunchesBucketsInOrderOnceReady(t *testing.T) {
	// Tensors 0…5, tensor 2 empty: buckets [5 4] [3 1] [0] at 2 elements.
	lens := []int{2, 1, 0, 1, 1, 1}
	plan := Buckets(lens, 4, 8)
	if want := [][]int{{5, 4}, {3, 1}, {0}}; !slices.EqualFunc(plan, want, slices.Equal) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	tr, err := NewTracker(plan, len(lens))
	if err != nil {
		t.Fatal(err)
	}
	var launched []int
	launch := func(k int) { launched = append(launched, k) }
	ready := func(i int) {
		t.Helper()
		if err := tr.Ready(i, launch); err != nil {
			t.Fatal(err)
		}
	}
	for step := range 2 {
		launched = nil
		ready(3)
		ready(1) // bucket 1 complete, but bucket 0 has not started
		if len(launched) != 0 {
			t.Fatalf("step %d: launched %v before bucket 0 was complete", step, launched)
		}
		ready(2) // empty: in no bucket
		ready(5)
		ready(4)
		if !slices.Equal(launched, []int{0, 1}) || tr.Launched() != 2 {
			t.Fatalf("step %d: launched %v, want [0 1]", step, launched)
		}
		if err := tr.Ready(4, launch); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("step %d: tensor 4 reported twice: %v", step, err)
		}
		ready(0)
		if missing := tr.Rest(launch); len(missing) != 0 || !slices.Equal(launched, []int{0, 1, 2}) {
			t.Fatalf("step %d: launched %v, missing %v", step, launched, missing)
		}
		tr.Reset()
	}
	launched = nil
	ready(4)
	if missing := tr.Rest(launch); !slices.Equal(missing, []int{5, 3, 1, 0}) || !slices.Equal(launched, []int{0, 1, 2}) {
		t.Errorf("Rest: launched %v, missing %v", launched, missing)
	}
	if _, err := NewTracker([][]int{{1}, {1}}, 2); err == nil {
		t.Error("a tensor in two buckets was accepted")
	}
}
