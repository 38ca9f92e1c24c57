//go:build race

package augment

// raceEnabled lets heavy numeric tests shrink under the race detector.
const raceEnabled = true
