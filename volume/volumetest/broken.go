package volumetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// Broken is a malformed file: Files (name → bytes; a name may hold a
// folder) are written to a temporary folder and Open opens the one named;
// opening it, or reading it whole, must fail with an error naming the
// file and holding every Want.
type Broken struct {
	Name  string
	Files map[string][]byte
	Open  string
	Want  []string
}

// CheckBroken runs the cases: an error, never a panic.
func CheckBroken(t *testing.T, open func(string) (volume.File, error), cases []Broken) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range c.Files {
				// A name with a folder ("slices/1.tif") makes the folder.
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, c.Open)
			f, err := open(path)
			if err == nil {
				h := f.Header()
				if int64(h.Shape[0])*int64(h.Shape[1])*int64(h.Shape[2])*int64(h.Channels) > 1<<24 {
					t.Fatalf("opened with header %+v", h)
				}
				_, err = ReadWhole(f)
				f.Close()
			}
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file %s", msg, path)
			}
			for _, w := range c.Want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

// MustRead returns a fixture's bytes.
func MustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Fuzz is a fuzz target body: the bytes are written to a file called
// name and opened with open; a file that opens must have a valid header,
// and reading it (when it is small) must return, with or without an
// error, but never panic.
func Fuzz(t *testing.T, open func(string) (volume.File, error), name string, b []byte) {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := open(path)
	if err != nil {
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("error %q does not name the file", err)
		}
		return
	}
	defer f.Close()
	h := f.Header()
	if volume.CheckShape(h.Shape) != nil || h.Channels < 1 {
		t.Fatalf("accepted header %+v", h)
	}
	// A header may describe up to 2^53 voxels (read by region): only a
	// small volume is read whole. In float64: the product may not fit an
	// int64.
	if float64(h.Shape[0])*float64(h.Shape[1])*float64(h.Shape[2])*float64(h.Channels) > 1<<20 {
		return
	}
	if _, err := ReadWhole(f); err == nil && h.Channels == 1 {
		sh := h.Shape
		_ = f.ReadLabels(volume.Whole(sh), make([]uint8, sh[0]*sh[1]*sh[2]))
	}
}
