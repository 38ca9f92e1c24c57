package data

import (
	"fmt"
	"testing"
	"time"
)

func TestVolumeCache(t *testing.T) {
	loads := map[int]int{}
	var mu = make(chan struct{}, 1)
	mk := func(c int) (*Volume, error) {
		mu <- struct{}{}
		loads[c]++
		<-mu
		if c == 99 {
			return nil, fmt.Errorf("read case 99: broken")
		}
		time.Sleep(2 * time.Millisecond)
		return &Volume{Shape: [3]int{1, 1, 25}, Image: [][]float32{make([]float32, 25)}}, nil // 100 bytes
	}
	c := newVolumeCache(250, mk) // room for two
	get := func(k int) {
		if _, err := c.get(k); err != nil {
			t.Fatal(err)
		}
	}
	get(1)
	get(2)
	get(1) // hit, 1 becomes most recent
	get(3) // evicts 2
	st := c.stats()
	if st.Hits != 1 || st.Misses != 3 || st.Evictions != 1 || st.Entries != 2 || st.Bytes != 200 {
		t.Errorf("stats %+v", st)
	}
	get(1) // still there
	get(2) // miss again
	if loads[2] != 2 || loads[1] != 1 {
		t.Errorf("loads %v", loads)
	}
	if _, err := c.get(99); err == nil {
		t.Error("load error lost")
	}
	// Concurrent misses on one case decode it once.
	c2 := newVolumeCache(1000, mk)
	done := make(chan struct{})
	for i := 0; i < 8; i++ {
		go func() { c2.get(7); done <- struct{}{} }()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	if loads[7] != 1 {
		t.Errorf("case 7 decoded %d times by 8 concurrent gets", loads[7])
	}
	// A volume over the whole budget is served, not kept.
	c3 := newVolumeCache(50, mk)
	get3, _ := c3.get(5)
	if get3 == nil || c3.stats().Uncacheable != 1 || c3.stats().Entries != 0 {
		t.Errorf("oversized volume: %+v", c3.stats())
	}
}
