package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRootHoldsGoMod(t *testing.T) {
	if _, err := os.Stat(filepath.Join(RepoRoot(), "go.mod")); err != nil {
		t.Fatalf("RepoRoot %s: %v", RepoRoot(), err)
	}
}

func TestDemoDirHasCases(t *testing.T) {
	t.Setenv("VOXTRAIN_DEMO_DIR", "")
	d := DemoDir(t)
	m, _ := filepath.Glob(filepath.Join(d, "imagesTr", "*.nii.gz"))
	if len(m) < 10 {
		t.Fatalf("%s/imagesTr holds %d images, want the bundled 80", d, len(m))
	}
}
