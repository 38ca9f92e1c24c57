package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestWriteFileAtomic: the deprecated wrapper creates the missing
// directory, then writes as atomicfile.WriteFile does.
func TestWriteFileAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "config.yaml")
	if err := WriteFileAtomic(path, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if string(b) != "a: 2\n" || fi.Mode().Perm() != 0o644 {
		t.Errorf("%q %v", b, fi.Mode())
	}
	if got := testutil.DirNames(t, filepath.Dir(path)); !slices.Equal(got, []string{"config.yaml"}) {
		t.Errorf("left %v", got)
	}
}
