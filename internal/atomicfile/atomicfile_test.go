package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// mustHold fails unless path holds exactly want with mode perm, and is the
// only entry of its directory.
func mustHold(t *testing.T, path, want string, perm os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want || fi.Mode().Perm() != perm {
		t.Errorf("%s holds %q with mode %v, want %q with %v", path, b, fi.Mode().Perm(), want, perm)
	}
	if names := testutil.DirNames(t, filepath.Dir(path)); len(names) != 1 {
		t.Errorf("directory holds %v, want only %s", names, filepath.Base(path))
	}
}

func TestWriteFileCreatesAndReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := WriteFile(path, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustHold(t, path, "a: 1\n", 0o600)
	if err := WriteFile(path, []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustHold(t, path, "a: 2\n", 0o644)
}

// TestPermIgnoresUmask: the mode is exactly perm, as a run directory
// shared with a group needs, whatever the process's umask.
func TestPermIgnoresUmask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	mustHold(t, path, "", 0o666)
}

// TestUmaskVariantsApplyTheUmask: WriteFileUmask and CreateUmask leave
// the mode to the umask, as os.WriteFile does, so data shared with other
// users (a prepared store, predictions) is as readable as the user's other
// files; WriteFile under the same umask still sets exactly perm.
func TestUmaskVariantsApplyTheUmask(t *testing.T) {
	for _, mask := range []int{0o022, 0o002, 0o077} {
		testutil.Umask(t, mask)
		want := os.FileMode(0o666 &^ mask)
		dir := t.TempDir()
		path := filepath.Join(dir, "index.json")
		if err := WriteFileUmask(path, []byte("{}"), 0o666); err != nil {
			t.Fatal(err)
		}
		mustHold(t, path, "{}", want)
		path = filepath.Join(t.TempDir(), "case.vxs")
		f, err := CreateUmask(path, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		mustHold(t, path, "v", want)
		path = filepath.Join(t.TempDir(), "exact")
		if err := WriteFile(path, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		mustHold(t, path, "", 0o666)
	}
}

// TestDiscardKeepsPrevious: a write abandoned half way (Close without
// Commit) leaves the previous file as it was and no temporary file.
func TestDiscardKeepsPrevious(t *testing.T) {
	path := filepath.Join(t.TempDir(), "case.vxs")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("new, but only half of i")); err != nil {
		t.Fatal(err)
	}
	if got := testutil.DirNames(t, filepath.Dir(path)); len(got) != 2 || !strings.HasPrefix(got[0], TempPrefix+"case.vxs-") {
		t.Errorf("while writing the directory holds %v, want the file and %scase.vxs-*", got, TempPrefix)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustHold(t, path, "old", 0o644)
	if err := f.Commit(); err == nil {
		t.Error("Commit after Close succeeded")
	}
	mustHold(t, path, "old", 0o644)
}

// TestFailedCommitKeepsPrevious: a rename that fails (the destination is
// a non-empty directory) leaves the destination and no temporary file.
func TestFailedCommitKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, []byte("data"), 0o644)
	if err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if fi, err := os.Stat(filepath.Join(path, "inside")); err != nil || !fi.IsDir() {
		t.Errorf("the destination changed: %v", err)
	}
	if names := testutil.DirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only out", names)
	}
}

// TestMissingDirectory: like os.WriteFile, no directory is created.
func TestMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	err := WriteFile(filepath.Join(dir, "no", "such", "f"), []byte("x"), 0o644)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
	if names := testutil.DirNames(t, dir); len(names) != 0 {
		t.Errorf("directory holds %v, want nothing", names)
	}
}

// TestWriteAtAndSeek: a header written after the body, as the store's
// case files are, ends up in front.
func TestWriteAtAndSeek(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(4, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("body")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close after Commit: %v", err)
	}
	mustHold(t, path, "headbody", 0o644)
}

func TestTempName(t *testing.T) {
	a, b := TempName("/x/y/last"), TempName("/x/y/last")
	if a == b || filepath.Dir(a) != "/x/y" || !strings.HasPrefix(filepath.Base(a), ".tmp-last-") {
		t.Errorf("TempName = %s, %s", a, b)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Error(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("SyncDir of a missing directory succeeded")
	}
}
