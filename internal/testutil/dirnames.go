package testutil

import (
	"os"
	"testing"
)

// DirNames returns the names of dir's entries, sorted, failing the test
// when dir cannot be read: what a test checks to see that nothing (a
// temporary file, a half-written output) was left behind.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
