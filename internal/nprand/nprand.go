// Package nprand reproduces the few parts of NumPy's legacy
// numpy.random.RandomState that fix nnU-Net's data splits, bit for bit:
// the MT19937 generator seeded from one integer (RandomState(12345)), the
// bounded integer draw its shuffle uses, shuffle and permutation. nnU-Net
// cuts its cross-validation folds with scikit-learn's KFold, which shuffles
// with exactly these calls, so a fold here holds the same cases as
// nnU-Net's.
//
// Only what the splits need is here: no floats, no other distributions.
// Fixtures made with NumPy (testdata/make_fixtures.py) pin every output.
package nprand

// MT19937's parameters (Matsumoto and Nishimura 1998).
const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// RandomState is NumPy's legacy RandomState over MT19937. It is not safe
// for concurrent use.
type RandomState struct {
	mt  [n]uint32
	pos int
}

// New returns the generator of numpy.random.RandomState(seed) for an
// integer seed: MT19937's init_genrand, as NumPy's legacy seeding does for
// an int (an array seed would use init_by_array, which nothing here
// needs).
func New(seed uint32) *RandomState {
	r := &RandomState{}
	r.mt[0] = seed
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	// The first draw regenerates the whole state, as NumPy's pos =
	// RK_STATE_LEN after seeding.
	r.pos = n
	return r
}

// generate refills the state with the next 624 words.
func (r *RandomState) generate() {
	mag := func(y uint32) uint32 { return (y & 1) * matrixA }
	var i int
	for ; i < n-m; i++ {
		y := r.mt[i]&upperMask | r.mt[i+1]&lowerMask
		r.mt[i] = r.mt[i+m] ^ y>>1 ^ mag(y)
	}
	for ; i < n-1; i++ {
		y := r.mt[i]&upperMask | r.mt[i+1]&lowerMask
		r.mt[i] = r.mt[i+m-n] ^ y>>1 ^ mag(y)
	}
	y := r.mt[n-1]&upperMask | r.mt[0]&lowerMask
	r.mt[n-1] = r.mt[m-1] ^ y>>1 ^ mag(y)
	r.pos = 0
}

// Uint32 returns the next tempered 32-bit output (NumPy's next_uint32,
// what RandomState.randint(2**32, dtype=uint32) draws).
func (r *RandomState) Uint32() uint32 {
	if r.pos == n {
		r.generate()
	}
	y := r.mt[r.pos]
	r.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// Uint64 returns two outputs as one 64-bit word, high first (NumPy's
// mt19937 next_uint64).
func (r *RandomState) Uint64() uint64 {
	hi := uint64(r.Uint32())
	return hi<<32 | uint64(r.Uint32())
}

// Interval returns a uniform integer in [0, max], inclusive, by NumPy's
// legacy random_interval: draws masked to the smallest all-ones mask
// covering max, rejected until one is ≤ max (32-bit draws while max fits
// in 32 bits, else 64-bit ones). Every legacy shuffle draws through it, so
// the count of outputs consumed must match NumPy's, not just the
// distribution.
func (r *RandomState) Interval(max uint64) uint64 {
	if max == 0 {
		return 0
	}
	mask := max
	for s := uint(1); s <= 32; s <<= 1 {
		mask |= mask >> s
	}
	if max <= 0xffffffff {
		for {
			if v := uint64(r.Uint32()) & mask; v <= max {
				return v
			}
		}
	}
	for {
		if v := r.Uint64() & mask; v <= max {
			return v
		}
	}
}

// Shuffle permutes n elements in place through swap as
// RandomState.shuffle does a one-dimensional array: Fisher–Yates from the
// end, element i swapped with Interval(i) for i = n−1 down to 1.
func (r *RandomState) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		j := int(r.Interval(uint64(i)))
		swap(i, j)
	}
}

// Perm returns RandomState.permutation(n): 0..n−1 shuffled.
func (r *RandomState) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}
