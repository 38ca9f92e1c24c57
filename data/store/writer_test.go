package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestStoreFilesFollowTheUmask: the store folder, its case files and its
// index are made with the umask's permissions, so another user's run can
// read a store whose owner's umask lets it (case files were 0600).
func TestStoreFilesFollowTheUmask(t *testing.T) {
	for _, mask := range []int{0o022, 0o002} {
		testutil.Umask(t, mask)
		st := writeOneCase(t, t.TempDir(), `{}`, [3]int{5, 5, 5}, 1)
		want := map[string]os.FileMode{"st": 0o777 &^ os.FileMode(mask), "c.vxs": 0o666 &^ os.FileMode(mask), "index.json": 0o666 &^ os.FileMode(mask)}
		for name, perm := range want {
			p := filepath.Join(st, name)
			if name == "st" {
				p = st
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != perm {
				t.Errorf("umask %03o: %s has mode %v, want %v", mask, name, fi.Mode().Perm(), perm)
			}
		}
	}
}

// touch creates an empty file dir/name aged age.
func touch(t *testing.T, dir, name string, age time.Duration) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-age)
	if err := os.Chtimes(p, then, then); err != nil {
		t.Fatal(err)
	}
}

// TestNewWriterSweepsLeftovers: the temporary files a killed build left
// (a case file and index.json half written) are gone when the next build
// opens the store; a fresh temporary file of another kind of writer (ct
// statistics, which does not take the store's lock) is left to it, a
// stale one removed.
func TestNewWriterSweepsLeftovers(t *testing.T) {
	st := writeOneCase(t, t.TempDir(), `{}`, [3]int{5, 5, 5}, 2)
	tp := atomicfile.TempPrefix
	touch(t, st, tp+"c.vxs-ABCD", 0)
	touch(t, st, tp+"index.json-EFGH", 0)
	touch(t, st, tp+"ct_statistics.json-IJKL", 0)
	touch(t, st, tp+"ct_statistics.json-MNOP", 2*staleTemp)
	w, err := NewWriter(st, []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := []string{tp + "ct_statistics.json-IJKL", "c.vxs", "index.json"}
	if got := testutil.DirNames(t, st); !slices.Equal(got, want) {
		t.Errorf("after opening the store it holds %v, want %v", got, want)
	}
}

// TestNewWriterSparesLiveWriters: while another writer has the store
// open, a second one removes only stale temporary files, not those the
// first may be writing.
func TestNewWriterSparesLiveWriters(t *testing.T) {
	st := writeOneCase(t, t.TempDir(), `{}`, [3]int{5, 5, 5}, 3)
	first, err := NewWriter(st, []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	tp := atomicfile.TempPrefix
	touch(t, st, tp+"c.vxs-LIVE", 0)
	touch(t, st, tp+"d.vxs-DEAD", 2*staleTemp)
	second, err := NewWriter(st, []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{tp + "c.vxs-LIVE", "c.vxs", "index.json"}
	if got := testutil.DirNames(t, st); !slices.Equal(got, want) {
		t.Errorf("with a writer at work the store holds %v, want %v", got, want)
	}
	// Both gone: the next writer is alone and sweeps the rest.
	for _, w := range []*Writer{first, second} {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := NewWriter(st, []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := testutil.DirNames(t, st); !slices.Equal(got, want[1:]) {
		t.Errorf("alone, the writer left %v, want %v", got, want[1:])
	}
}

// TestFailedPutLeavesNoTemp: a case that cannot be written (its file name
// is taken by a folder) leaves no temporary file behind.
func TestFailedPutLeavesNoTemp(t *testing.T) {
	st := filepath.Join(t.TempDir(), "st")
	if err := os.MkdirAll(filepath.Join(st, "c.vxs", "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(st, []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := randomCase(rand.New(rand.NewPCG(4, 4)), [3]int{5, 5, 5}, 1)
	if err := w.Put("c", nil, [3]int{5, 5, 5}, img, nil, nil); err == nil {
		t.Fatal("Put over a folder succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.DirNames(t, st); !slices.Equal(got, []string{"c.vxs", "index.json"}) {
		t.Errorf("after a failed Put the store holds %v", got)
	}
}
