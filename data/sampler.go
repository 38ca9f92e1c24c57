package data

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Sample is one sample job: which case to draw a patch from, and where the
// sample sits in the run, which alone decides its randomness.
type Sample struct {
	// Epoch and Index (position within the epoch) seed the sample's RNG.
	Epoch, Index int
	// Case is the index into Dataset.Cases.
	Case int
	// ForceFG asks for a patch centred on foreground.
	ForceFG bool
}

// caseSampler decides, per epoch, which cases fill which batch slots. It is a
// pure function of its fields and the epoch number.
type caseSampler struct {
	// Cases are the dataset indices to draw from (the fold's cases).
	Cases []int
	// Weights, when set, are per-entry sampling weights for Cases.
	Weights []float64
	// Seed is the run seed.
	Seed uint64
	// Batch is the batch size: one rank's share of a step's samples.
	Batch int
	// Ranks and Rank shard the samples over a data-parallel job (0 or 1
	// rank: none). The sequence is the one a single process with batch
	// Ranks×Batch would draw, foreground slots included: a step's global
	// batch is Ranks×Batch consecutive samples, the last round(Ranks×Batch
	// × Oversample) of them foreground-forced, and rank r takes positions
	// [r×Batch, (r+1)×Batch) of it. Contiguous shares, not strided: the
	// global batch is the ranks' batches concatenated in rank order, so a
	// rank's slots are exactly the batch positions one process would fill
	// there, and sample i of the sequence is in the same place for any
	// split of the same global batch.
	Ranks, Rank int
	// Iterations is the number of batches per epoch with cases drawn with
	// replacement (weighted when Weights is set); 0 means one pass over the
	// cases, reshuffled every epoch.
	Iterations int
	// Oversample is the foreground fraction: in every batch of n samples,
	// the last round(n × Oversample) slots are foreground-centred.
	Oversample float64
	// Sequential keeps one-pass order fixed (validation) instead of
	// shuffling per epoch.
	Sequential bool
	// DropLast drops a final partial batch of a one-pass epoch.
	DropLast bool
	// Salt separates the random streams of different samplers (train,
	// validation) that share a seed.
	Salt uint64

	cum []float64 // cumulative weights, built on first use
}

// Check validates the sampler and prepares its weight table; call it once
// before Epoch or Replacement.
func (s *caseSampler) Check() error {
	if len(s.Cases) == 0 {
		return errors.New("sampler: no cases")
	}
	if s.Batch < 1 {
		return fmt.Errorf("sampler: batch size %d, want ≥ 1", s.Batch)
	}
	if s.Iterations < 0 {
		return fmt.Errorf("sampler: %d iterations per epoch", s.Iterations)
	}
	if s.Weights != nil {
		if len(s.Weights) != len(s.Cases) {
			return fmt.Errorf("sampler: %d weights for %d cases", len(s.Weights), len(s.Cases))
		}
		total := 0.0
		for _, w := range s.Weights {
			if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
				return fmt.Errorf("sampler: weight %g, want finite ≥ 0", w)
			}
			total += w
		}
		if total <= 0 {
			return errors.New("sampler: all case weights are 0")
		}
		// Built here, before any worker calls Replacement concurrently.
		s.cum = make([]float64, len(s.Weights))
		t := 0.0
		for i, w := range s.Weights {
			t += w
			s.cum[i] = t
		}
	}
	if s.Ranks > 1 && (s.Rank < 0 || s.Rank >= s.Ranks) {
		return fmt.Errorf("sampler: rank %d of %d", s.Rank, s.Ranks)
	}
	g := s.globalBatch()
	if s.DropLast && s.Iterations == 0 && len(s.Cases) < g {
		return fmt.Errorf("sampler: %d cases cannot fill one batch of %d with drop_last", len(s.Cases), g)
	}
	if s.Ranks > 1 && s.Len()%g != 0 {
		// The last global batch would be shared unevenly (some ranks
		// empty), and averaging the ranks' mean gradients would weigh its
		// samples unequally.
		return fmt.Errorf("sampler: one pass over %d cases ends in a partial batch of %d, which %d ranks cannot share evenly; set train.iterations_per_epoch",
			s.Len(), s.Len()%g, s.Ranks)
	}
	return nil
}

// globalBatch is the samples of one step over every rank.
func (s *caseSampler) globalBatch() int { return s.Batch * max(s.Ranks, 1) }

// share returns the positions [lo, hi) of this rank's samples of batch
// step in an epoch of n samples (Epoch's numbering).
func (s *caseSampler) share(step, n int) (lo, hi int) {
	g := s.globalBatch()
	start := step*g + s.Rank*s.Batch
	if s.Ranks <= 1 {
		start = step * g
	}
	return min(start, n), min(start+s.Batch, n)
}

// Len returns the number of samples in one epoch.
func (s *caseSampler) Len() int {
	g := s.globalBatch()
	if s.Iterations > 0 {
		return s.Iterations * g
	}
	n := len(s.Cases)
	if s.Weights != nil {
		return n // weighted one pass: n draws with replacement
	}
	if s.DropLast {
		return n / g * g
	}
	return n
}

// Batches returns the number of batches (steps) in one epoch, the same
// on every rank.
func (s *caseSampler) Batches() int {
	g := s.globalBatch()
	return (s.Len() + g - 1) / g
}

// FGSlots returns how many of a batch of n samples are foreground-forced.
func (s *caseSampler) FGSlots(n int) int {
	return int(math.Round(float64(n) * s.Oversample))
}

// Epoch appends the samples of epoch e to dst[:0] and returns it: the
// whole sequence, every rank's; step b is samples [b×G, (b+1)×G) for the
// global batch G = Ranks×Batch, of which share says this rank's. The
// sampler must have passed Check (streams do that when they are made).
func (s *caseSampler) Epoch(e int, dst []Sample) []Sample {
	n := s.Len()
	dst = dst[:0]
	r := newRand(s.Seed, uint64(e), math.MaxUint64, s.Salt)
	switch {
	case s.Iterations > 0 || s.Weights != nil:
		for i := 0; i < n; i++ {
			dst = append(dst, Sample{Epoch: e, Index: i, Case: s.draw(r)})
		}
	default:
		order := make([]int, len(s.Cases))
		copy(order, s.Cases)
		if !s.Sequential {
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for i := 0; i < n; i++ {
			dst = append(dst, Sample{Epoch: e, Index: i, Case: order[i]})
		}
	}
	g := s.globalBatch()
	for b := 0; b*g < n; b++ {
		lo, hi := b*g, min(n, (b+1)*g)
		fg := s.FGSlots(hi - lo)
		for i := hi - fg; i < hi; i++ {
			dst[i].ForceFG = true
		}
	}
	return dst
}

// draw picks one case with replacement (weighted when Weights is set).
func (s *caseSampler) draw(r *rand.Rand) int {
	if s.Weights == nil {
		return s.Cases[r.IntN(len(s.Cases))]
	}
	x := r.Float64() * s.cum[len(s.cum)-1]
	i := sort.SearchFloat64s(s.cum, x)
	// SearchFloat64s finds the first cum ≥ x; a zero-weight case has the
	// same cum as its predecessor, so step past equal entries.
	for i < len(s.cum)-1 && s.cum[i] <= x {
		i++
	}
	return s.Cases[i]
}

// Replacement returns the case that stands in for sample (epoch, index)
// after `attempt` failed cases (attempt ≥ 1). It depends only on its
// arguments, so a skipped case is replaced the same way on every run and
// for every worker count.
func (s *caseSampler) Replacement(epoch, index, attempt int) int {
	r := newRand(s.Seed, uint64(epoch), uint64(index), s.Salt^(uint64(attempt)<<32|0x5eed))
	return s.draw(r)
}

// mix64 is SplitMix64's output function: a bijective avalanche mix.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seedPair hashes (seed, epoch, index, salt) into the two words of a PCG
// seed.
func seedPair(seed, epoch, index, salt uint64) (uint64, uint64) {
	h := mix64(seed ^ 0x243f6a8885a308d3)
	h = mix64(h ^ epoch)
	h = mix64(h ^ index)
	h = mix64(h ^ salt)
	return h, mix64(h ^ 0x13198a2e03707344)
}

func newRand(seed, epoch, index, salt uint64) *rand.Rand {
	a, b := seedPair(seed, epoch, index, salt)
	return rand.New(rand.NewPCG(a, b))
}

// sampleRNG is a reusable per-worker generator reseeded for every sample,
// so drawing a sample's randomness allocates nothing.
type sampleRNG struct {
	pcg *rand.PCG
	r   *rand.Rand
}

func newSampleRNG() *sampleRNG {
	p := rand.NewPCG(0, 0)
	return &sampleRNG{pcg: p, r: rand.New(p)}
}

// reset seeds the generator for one sample: hash(seed, epoch, index) —
// never the worker — decides everything random about the sample.
func (g *sampleRNG) reset(seed uint64, epoch, index int, salt uint64) *rand.Rand {
	a, b := seedPair(seed, uint64(epoch), uint64(index), salt)
	g.pcg.Seed(a, b)
	return g.r
}
