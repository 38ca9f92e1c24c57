//go:build !race

package kern

// raceEnabled shrinks the heavy numeric tests under the race detector.
const raceEnabled = false
