//go:build unix

package testutil

import (
	"syscall"
	"testing"
)

// Umask sets the process's umask to mask for the rest of the test and
// restores it after. The umask is process-wide: a test that sets it must
// not run in parallel with tests that create files and check their modes.
func Umask(t testing.TB, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}
