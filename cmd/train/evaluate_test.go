package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/postprocess"
)

func TestEvaluateAndPostprocessFlags(t *testing.T) {
	o, err := capture(t, NewCmdEvaluate, "p", "r", "--labels", "2,1", "--hd95")
	if err != nil || o.PredDir != "p" || o.RefDir != "r" || len(o.Labels) != 2 || o.Labels[0] != 1 || !o.HD95 || o.Output != filepath.Join("p", "summary.json") {
		t.Errorf("evaluate: %+v, %v", o, err)
	}
	_, err = capture(t, NewCmdEvaluate, "p", "r", "--labels", "0,1")
	wantErr(t, err, "--labels: label 0")
	_, err = capture(t, NewCmdEvaluate, "p", "r", "-o", "s.txt")
	wantErr(t, err, "-o s.txt: want a .json")
	_, err = capture(t, NewCmdEvaluate, "p")
	wantErr(t, err, "2 arg")

	d, err := capture(t, NewCmdPostprocessDetermine, "--pred", "p", "--ref", "r", "--dataset-json", "d.json")
	if err != nil || d.Output != filepath.Join("p", "postprocessing.json") || d.DatasetJSON != "d.json" {
		t.Errorf("determine: %+v, %v", d, err)
	}
	_, err = capture(t, NewCmdPostprocessDetermine, "--pred", "p")
	wantErr(t, err, `"ref" not set`)
	a, err := capture(t, NewCmdPostprocessApply, "--plan", "pp.json", "in", "out")
	if err != nil || a.Plan != "pp.json" || a.InDir != "in" || a.OutDir != "out" {
		t.Errorf("apply: %+v, %v", a, err)
	}
	_, err = capture(t, NewCmdPostprocessApply, "in", "out")
	wantErr(t, err, `"plan" not set`)
}

// copyTree copies a fixture folder so commands can write beside it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

// TestEvaluateAndPostprocessCommands runs the three commands on the
// post-processing fixture (a spurious blob the all-foreground step removes)
// and checks what each writes.
func TestEvaluateAndPostprocessCommands(t *testing.T) {
	dir := copyTree(t, filepath.Join(testutil.RepoRoot(), "postprocess", "testdata", "nnunet", "fg_kept"))
	pred, ref, dj := filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), filepath.Join(dir, "dataset.json")

	out, _, err := runCmd(t, "evaluate", pred, ref, "--dataset-json", dj, "-o", filepath.Join(dir, "eval.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cv_1.nii.gz  Dice a ") || !strings.Contains(out.String(), "class 2 (b): mean Dice") {
		t.Errorf("evaluate's log does not name the classes:\n%s", out)
	}
	s, err := evaluation.Read(filepath.Join(dir, "eval.json"))
	if err != nil || len(s.Cases) != 2 || s.Names[1] != "a" {
		t.Fatalf("summary %+v, %v", s, err)
	}

	out, _, err = runCmd(t, "postprocess", "determine", "--pred", pred, "--ref", ref, "--dataset-json", dj)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := postprocess.Load(filepath.Join(pred, "postprocessing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Steps) != 1 || len(plan.Steps[0].Labels) != 2 || len(plan.Decisions) != 3 || !strings.Contains(out.String(), "largest component of label 2 (b)") {
		t.Errorf("plan %+v; log:\n%s", plan, out)
	}
	after, err := evaluation.Read(filepath.Join(pred, "postprocessed", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := evaluation.Read(filepath.Join(pred, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !(after.ForegroundMean.Dice > before.ForegroundMean.Dice) || after.Cases[0].PredictionFile != filepath.Join(pred, "postprocessed", "cv_1.nii.gz") {
		t.Errorf("after %v (%s), before %v", after.ForegroundMean.Dice, after.Cases[0].PredictionFile, before.ForegroundMean.Dice)
	}
	// The post-processed files score as the summary says.
	pairs, _ := evaluation.MatchFiles(filepath.Join(pred, "postprocessed"), ref, "")
	re, err := evaluation.Folder(pairs, evaluation.Options{Labels: []int{1, 2}})
	if err != nil || re.ForegroundMean.Dice != after.ForegroundMean.Dice {
		t.Errorf("re-scored %v, summary %v (%v)", re.ForegroundMean.Dice, after.ForegroundMean.Dice, err)
	}

	outDir := filepath.Join(dir, "applied")
	if _, _, err := runCmd(t, "postprocess", "apply", "--plan", filepath.Join(pred, "postprocessing.json"), pred, outDir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cv_1.nii.gz", "cv_2.nii.gz"} {
		a, _ := evaluation.ReadLabelFile(filepath.Join(outDir, n))
		b, _ := evaluation.ReadLabelFile(filepath.Join(pred, "postprocessed", n))
		if a == nil || b == nil || string(a.Labels) != string(b.Labels) {
			t.Errorf("%s: apply and determine's post-processed files differ", n)
		}
	}

	// A reference without its prediction is named.
	os.Remove(filepath.Join(pred, "cv_2.nii.gz"))
	_, _, err = runCmd(t, "evaluate", pred, ref)
	wantErr(t, err, "cv_2.nii.gz")
}
