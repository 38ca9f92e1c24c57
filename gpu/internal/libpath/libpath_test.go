package libpath

import (
	"slices"
	"testing"
)

func TestCandidatesOrder(t *testing.T) {
	sonames := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
	dirs := map[string]bool{"/opt/cublas": true, "/ld/a": true}
	isDir := func(p string) bool { return dirs[p] }
	got := Candidates(sonames, " /opt/cublas : /x/libcublas.so.12.4 ::", "/ld/a::/ld/b", isDir)
	wantPrefix := []string{
		// override: a directory, then a file as given
		"/opt/cublas/libcublas.so.13", "/opt/cublas/libcublas.so.12", "/opt/cublas/libcublas.so.11",
		"/x/libcublas.so.12.4",
		// LD_LIBRARY_PATH directories (empty entries skipped)
		"/ld/a/libcublas.so.13", "/ld/a/libcublas.so.12", "/ld/a/libcublas.so.11",
		"/ld/b/libcublas.so.13", "/ld/b/libcublas.so.12", "/ld/b/libcublas.so.11",
		// bare sonames for dlopen's own search
		"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
		// well-known CUDA directories
		"/usr/local/cuda/lib64/libcublas.so.13",
	}
	if len(got) < len(wantPrefix) || !slices.Equal(got[:len(wantPrefix)], wantPrefix) {
		t.Fatalf("candidates:\n%q\nwant prefix\n%q", got, wantPrefix)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("duplicate candidate %q", p)
		}
		seen[p] = true
	}
}

func TestCandidatesDeduplicate(t *testing.T) {
	got := Candidates([]string{"libx.so.1"}, "/usr/local/cuda/lib64", "/usr/local/cuda/lib64", func(string) bool { return true })
	if got[0] != "/usr/local/cuda/lib64/libx.so.1" || got[1] != "libx.so.1" {
		t.Errorf("candidates %q: the override's directory first, once, then the bare soname", got)
	}
}

func TestCandidatesDefaultIsDir(t *testing.T) {
	dir := t.TempDir()
	got := Candidates([]string{"liby.so.2"}, dir, "", nil)
	if got[0] != dir+"/liby.so.2" {
		t.Errorf("a real directory in the override was not searched: %q", got)
	}
}
