package samepath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSame: one folder by two spellings and through a link is the same;
// another folder, or a path that does not exist beside one that does, is
// not.
func TestSame(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{a, a, true},
		{a, filepath.Join(dir, ".", "b", "..", "a"), true},
		{a, link, true},
		{a, b, false},
		{a, filepath.Join(dir, "missing"), false},
		{filepath.Join(dir, "missing"), filepath.Join(dir, "missing"), true},
	} {
		if got := Same(c.x, c.y); got != c.want {
			t.Errorf("Same(%s, %s) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
