// Package ranges keeps a set of disjoint address ranges, so package gpu
// can tell whether a host slice lies in pinned memory it allocated (an
// upload from it is DMA) or in ordinary pageable memory.
package ranges

import (
	"sort"
	"sync"
)

// Set is a set of disjoint [start, start+size) ranges, safe for concurrent
// use. The zero value is empty and ready.
type Set struct {
	mu     sync.Mutex
	starts []uintptr // sorted
	size   map[uintptr]int
}

// Add records [p, p+n). Ranges must not overlap (allocations do not).
func (s *Set) Add(p uintptr, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size == nil {
		s.size = map[uintptr]int{}
	}
	i := sort.Search(len(s.starts), func(i int) bool { return s.starts[i] >= p })
	s.starts = append(s.starts, 0)
	copy(s.starts[i+1:], s.starts[i:])
	s.starts[i] = p
	s.size[p] = n
}

// Remove forgets the range starting at p and reports whether there was one.
func (s *Set) Remove(p uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.size[p]; !ok {
		return false
	}
	delete(s.size, p)
	i := sort.Search(len(s.starts), func(i int) bool { return s.starts[i] >= p })
	s.starts = append(s.starts[:i], s.starts[i+1:]...)
	return true
}

// Contains reports whether [p, p+n) lies inside one recorded range.
func (s *Set) Contains(p uintptr, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.starts), func(i int) bool { return s.starts[i] > p }) - 1
	if i < 0 {
		return false
	}
	base := s.starts[i]
	return p+uintptr(n) <= base+uintptr(s.size[base])
}

// Len returns the number of ranges.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.starts)
}
