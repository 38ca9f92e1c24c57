// Package testutil holds what the tests of several packages share: where
// the demo data is, whether the race detector is on, and numerical
// gradient checking. It is imported by _test.go files only.
package testutil

import (
	"encoding/json"
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

// DemoSubset copies the demo cases ids (image and label) into a new MSD
// layout folder with its own dataset.json, so a test may change files and
// write splits and stores beside them.
func DemoSubset(t testing.TB, ids []string) string {
	t.Helper()
	src := DemoDir(t)
	dir := t.TempDir()
	var training []map[string]string
	for _, id := range ids {
		for _, sub := range []string{"imagesTr", "labelsTr"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(src, sub, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, sub, id+".nii.gz"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		training = append(training, map[string]string{"image": "./imagesTr/" + id + ".nii.gz", "label": "./labelsTr/" + id + ".nii.gz"})
	}
	meta := map[string]any{"name": "demo", "modality": map[string]string{"0": "MRI"},
		"labels": map[string]string{"0": "background", "1": "Anterior", "2": "Posterior"}, "training": training}
	b, _ := json.MarshalIndent(meta, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "dataset.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
