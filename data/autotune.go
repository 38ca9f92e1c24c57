package data

import (
	"math"
	"time"
)

// autoWindow is how many steps the auto mode watches between checks.
const autoWindow = 20

// watchStarvation adds one worker (up to the pool's size) when the
// consumer waited more than 5 % of a window of steps: the first decision
// can be too low when samples get slower (a colder cache, a busier
// machine). It never removes workers, so it cannot oscillate.
func (s *BatchStream) watchStarvation(wait, step time.Duration) {
	st := &s.stats
	st.winWall += step
	st.winWait += wait
	st.winSteps++
	if st.winSteps < autoWindow {
		return
	}
	frac := float64(st.winWait) / float64(max(st.winWall, 1))
	st.winWait, st.winWall, st.winSteps = 0, 0, 0
	if frac > 0.05 && s.p.Active() < s.p.Workers() {
		n := s.p.Active() + 1
		s.p.SetActive(n)
		s.p.log.Info("data: workers auto: adding a worker", "workers", n, "of", s.p.Workers(),
			"consumer_wait_pct", 100*frac)
	}
}

// autotune settles the pool's active worker count once enough steps were
// seen: the smallest count whose batch production time leaves ≥ 20 %
// headroom over the consumer's step time.
func (s *BatchStream) autotune() {
	const warm = 6
	if s.stats.steps < warm || s.stats.sampleCount.Load() < int64(warm*s.sampler.Batch) {
		return
	}
	s.stats.tuned = true
	perSample := float64(s.stats.sampleNanos.Load()) / float64(s.stats.sampleCount.Load())
	perBatch := perSample * float64(s.sampler.Batch)
	step := float64(s.stats.stepNanos) / float64(s.stats.steps)
	n := s.p.Workers()
	if step > 0 {
		n = int(math.Ceil(1.2 * perBatch / step))
	}
	n = max(1, min(n, s.p.Workers()))
	s.p.SetActive(n)
	s.p.log.Info("data: workers auto", "workers", n, "of", s.p.Workers(),
		"batch_ms", perBatch/1e6, "consumer_step_ms", step/1e6)
}
