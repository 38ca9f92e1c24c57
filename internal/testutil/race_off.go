//go:build !race

package testutil

// Race reports whether the binary was built with the race detector: heavy
// numeric tests shrink (or skip) under it, never concurrency tests.
const Race = false
