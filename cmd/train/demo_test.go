package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

// demoDiceThreshold is the mean sliding-window validation Dice (over the
// two hippocampus classes, fold 0's 16 held-out cases) the README's demo
// must reach. Established on 2 CPU cores: the demo reaches about 0.8 (see
// docs/BENCHMARKS.md); the threshold leaves room for other machines'
// floating-point differences, not for a broken trainer (an untrained or
// diverged model scores below 0.3).
const demoDiceThreshold = 0.70

// TestDemo runs `train demo` exactly as the README does (from the
// repository root, fold 0, configs/demo.yaml) and checks the validation
// Dice it prints. `make test` runs it without the race detector.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the full demo: minutes; skipped under -short")
	}
	testutil.SkipUnderRace(t, "trains the full demo: minutes")
	t.Chdir(testutil.RepoRoot())
	start := time.Now()
	out, errb, err := runCmd(t, "demo", "--output-dir", t.TempDir())
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errb.String())
	}
	t.Logf("demo took %s", time.Since(start).Round(time.Second))
	m := regexp.MustCompile(`mean Dice over classes: ([0-9.]+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no mean Dice in the demo's output:\n%s", out.String())
	}
	dice, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("demo validation mean Dice %.4f (threshold %.2f)", dice, demoDiceThreshold)
	if dice < demoDiceThreshold {
		t.Fatalf("demo validation Dice %.4f is below %.2f:\n%s", dice, demoDiceThreshold, out.String())
	}
}
