// Package testutil holds what the tests of several packages share: where
// the demo data is, whether the race detector is on, and numerical
// gradient checking. It is imported by _test.go files only.
package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoRoot returns the repository's root folder (the one holding go.mod),
// found from this source file's location, so tests find it from any
// package directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	// file is <root>/internal/testutil/demo.go.
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// DemoDir returns the bundled demo dataset, <root>/testdata/demo (80 MSD
// Task04 hippocampus cases), or $VOXTRAIN_DEMO_DIR when set. It fails the
// test when the folder has no imagesTr: the bundled data is part of the
// repository.
func DemoDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("VOXTRAIN_DEMO_DIR")
	if d == "" {
		d = filepath.Join(RepoRoot(), "testdata", "demo")
	}
	if _, err := os.Stat(filepath.Join(d, "imagesTr")); err != nil {
		t.Fatalf("demo data: %v (the repository bundles it in testdata/demo)", err)
	}
	return d
}

// FullDemoDir returns the whole demo dataset (all 260 cases), kept beside
// the repository in ../shared/data/demo on development machines, or
// $VOXTRAIN_FULL_DEMO_DIR when set. The test is skipped where it is absent
// (CI's clean clone).
func FullDemoDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("VOXTRAIN_FULL_DEMO_DIR")
	if d == "" {
		d = filepath.Join(RepoRoot(), "..", "shared", "data", "demo")
	}
	if _, err := os.Stat(filepath.Join(d, "imagesTr")); err != nil {
		t.Skipf("the full demo dataset is not here (%v)", err)
	}
	return d
}
