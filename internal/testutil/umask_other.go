//go:build !unix

package testutil

import "testing"

// Umask skips the test: only Unix systems have a umask.
func Umask(t testing.TB, mask int) {
	t.Helper()
	t.Skip("no umask on this system")
}
