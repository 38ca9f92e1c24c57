package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestPrepareAndBenchData runs `train prepare` and `train bench-data` on a
// few demo cases: the store is written, and the digests of two worker
// counts and two sources agree.
func TestPrepareAndBenchData(t *testing.T) {
	demo := testutil.DemoDir(t)
	dir := t.TempDir()
	var cases strings.Builder
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"} {
		cases.WriteString("    - {image: " + filepath.Join(demo, "imagesTr", id+".nii.gz") +
			", label: " + filepath.Join(demo, "labelsTr", id+".nii.gz") + "}\n")
	}
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("data:\n  fold: -1\n  store: store\n  cases:\n"+cases.String()+
		"augment:\n  preset: nnunet\ntrain:\n  iterations_per_epoch: 2\n  patch_size: [16, 16, 16]\n  batch_size: 2\n"), 0o644)

	run := func(args ...string) string {
		out, errb, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	out := run("prepare", "--config", cfg, "-q")
	if !strings.Contains(out, "3 cases (3 written, 0 current)") {
		t.Errorf("prepare: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "store", "index.json")); err != nil {
		t.Errorf("no store index: %v", err)
	}
	digests := map[string]bool{}
	for _, src := range []string{"store", "cache"} {
		out = run("bench-data", "--config", cfg, "--workers", "1,2", "--digest", "--source", src)
		if !strings.Contains(out, "| "+src+" | 2 |") || !strings.Contains(out, "identical across all runs") {
			t.Errorf("bench-data --source %s:\n%s", src, out)
		}
		for _, m := range regexp.MustCompile(`run=0: ([0-9a-f]{64})`).FindAllStringSubmatch(out, -1) {
			digests[m[1]] = true
		}
	}
	if len(digests) != 1 {
		t.Errorf("digests differ between sources: %v", digests)
	}
}
