package testutil

import "testing"

// SkipUnderRace skips the test in a race-enabled binary, saying why. Call
// it at the top of the test function itself (not in a helper): `make
// test` finds every test that calls it (scripts/internal/raceskipped) and
// runs them all once without the race detector (`make slow`), so a test
// skipped under -race still runs in CI. For heavy numeric tests only:
// concurrency is always tested under the race detector.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if Race {
		t.Skipf("skipped under the race detector (make slow runs it without): %s", why)
	}
}
