package data

import (
	"log/slog"
	"sync"
)

// quarantine is the set of cases skipped after a failure, shared by the
// streams of one loader so a corrupt file is reported once.
type quarantine struct {
	mu    sync.Mutex
	cases map[int]error
	log   *slog.Logger
}

func newQuarantine(log *slog.Logger) *quarantine {
	return &quarantine{cases: map[int]error{}, log: log}
}

func (q *quarantine) has(c int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.cases[c]
	return ok
}

func (q *quarantine) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.cases)
}

func (q *quarantine) coversAll(cases []int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range cases {
		if _, ok := q.cases[c]; !ok {
			return false
		}
	}
	return true
}

// add quarantines case c and logs it the first time.
func (q *quarantine) add(c int, what string, err error) {
	q.mu.Lock()
	_, dup := q.cases[c]
	if !dup {
		q.cases[c] = err
	}
	q.mu.Unlock()
	if !dup {
		q.log.Error("data: case quarantined, replacing its samples", "case", what, "error", err.Error())
	}
}

// list returns the quarantined case indices and their errors.
func (q *quarantine) list() map[int]error {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[int]error, len(q.cases))
	for c, e := range q.cases {
		out[c] = e
	}
	return out
}
