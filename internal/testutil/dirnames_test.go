package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDirNamesSorted(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", ".tmp-a", "a"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := DirNames(t, dir); !slices.Equal(got, []string{".tmp-a", "a", "b"}) {
		t.Errorf("DirNames = %v", got)
	}
}
