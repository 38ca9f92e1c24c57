// Package libpath lists where package gpu looks for a shared library it
// opens with dlopen at run time (cuBLAS, cuDNN), in order. It is pure Go so the
// search order is tested on machines without CUDA.
package libpath

import (
	"os"
	"path/filepath"
	"strings"
)

// Candidates returns the paths to try, in order, for a library whose
// sonames are given newest first (libcublas.so.13, .so.12, .so.11):
//
//  1. override (the value of an environment variable such as
//     VOXTRAIN_CUBLAS): a colon-separated list of files, tried as given,
//     and directories, searched for each soname;
//  2. each directory of ldLibraryPath (LD_LIBRARY_PATH), for each soname;
//  3. each bare soname, for dlopen's own search (DT_RUNPATH, the ld.so
//     cache, /lib, /usr/lib);
//  4. the usual CUDA install directories, for each soname.
//
// Empty entries are skipped and duplicates dropped, keeping the first.
// isDir reports whether a path is a directory (nil: os.Stat).
func Candidates(sonames []string, override, ldLibraryPath string, isDir func(string) bool) []string {
	if isDir == nil {
		isDir = func(p string) bool {
			fi, err := os.Stat(p)
			return err == nil && fi.IsDir()
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	inDir := func(dir string) {
		for _, s := range sonames {
			add(filepath.Join(dir, s))
		}
	}
	for _, p := range strings.Split(override, ":") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if isDir(p) {
			inDir(p)
		} else {
			add(p)
		}
	}
	for _, dir := range strings.Split(ldLibraryPath, ":") {
		if dir = strings.TrimSpace(dir); dir != "" {
			inDir(dir)
		}
	}
	for _, s := range sonames {
		add(s)
	}
	for _, dir := range []string{
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/cuda/targets/sbsa-linux/lib",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu",
	} {
		inDir(dir)
	}
	return out
}
