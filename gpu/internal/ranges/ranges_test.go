package ranges

import "testing"

func TestSet(t *testing.T) {
	var s Set
	s.Add(1000, 100)
	s.Add(5000, 10)
	s.Add(200, 50)
	for _, tc := range []struct {
		p    uintptr
		n    int
		want bool
	}{
		{1000, 100, true}, {1050, 50, true}, {1050, 51, false}, // inside, to the end, one past
		{999, 1, false}, {200, 0, true}, {249, 1, true}, {250, 1, false},
		{5000, 10, true}, {4999, 2, false}, {0, 1, false}, {6000, 1, false},
	} {
		if got := s.Contains(tc.p, tc.n); got != tc.want {
			t.Errorf("Contains(%d, %d) = %v, want %v", tc.p, tc.n, got, tc.want)
		}
	}
	if !s.Remove(1000) || s.Remove(1000) || s.Remove(1) {
		t.Error("Remove: want true once for a recorded start, false otherwise")
	}
	if s.Contains(1000, 1) || !s.Contains(5005, 5) || !s.Contains(210, 10) || s.Len() != 2 {
		t.Errorf("after Remove: %v %v %v, %d ranges", s.Contains(1000, 1), s.Contains(5005, 5), s.Contains(210, 10), s.Len())
	}
}
