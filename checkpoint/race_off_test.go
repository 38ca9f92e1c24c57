//go:build !race

package checkpoint

// raceEnabled shrinks the crash test's checkpoints under the race
// detector, which slows every memory access.
const raceEnabled = false
