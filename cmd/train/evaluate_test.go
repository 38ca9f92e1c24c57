package main

import (
	"math"
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

// TestEvaluateRegions runs train evaluate --dataset-json on a region-based
// dataset.json (evaluation/testdata/nnunet_regions, scored by nnU-Net v2
// itself): regions are scored, named in the log and the summary, and
// their numbers are nnU-Net's (the dataset.json's ignore label applied).
// A malformed region is an error naming the file and the key.
func TestEvaluateRegions(t *testing.T) {
	dir := copyTree(t, filepath.Join(testutil.RepoRoot(), "evaluation", "testdata", "nnunet_regions"))
	pred, ref, dj := filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), filepath.Join(dir, "dataset.json")
	sumPath := filepath.Join(dir, "eval.json")
	out, _, err := runCmd(t, "evaluate", pred, ref, "--dataset-json", dj, "-o", sumPath, "--hd95")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"case_a.nii.gz  Dice whole tumor 0.9802  tumor core ", "  edema ",
		"region (1, 2, 3) (whole tumor): mean Dice 0.6230  mean HD95 ", "region 3 (enhancing tumor): mean Dice", "mean Dice over regions: 0.4313"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("evaluate's log lacks %q:\n%s", w, out)
		}
	}
	got, err := evaluation.Read(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := evaluation.Read(filepath.Join(dir, "summary_ignore.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Regions) != 4 || len(got.Cases) != 4 || !got.HD95 {
		t.Fatalf("summary: regions %+v, %d cases, HD95 %v", got.Regions, len(got.Cases), got.HD95)
	}
	for j, r := range want.Regions {
		g := got.Regions[j]
		if g.Key() != r.Key() || got.Mean[j].Dice != want.Mean[j].Dice || got.Mean[j].TN != want.Mean[j].TN {
			t.Errorf("region %s: %s mean Dice %v TN %v, nnU-Net %v %v", r.Key(), g.Key(), got.Mean[j].Dice, got.Mean[j].TN, want.Mean[j].Dice, want.Mean[j].TN)
		}
	}
	if got.ForegroundMean.Dice != want.ForegroundMean.Dice || got.Regions[0].Name != "whole tumor" || got.Regions[3].Name != "enhancing tumor" {
		t.Errorf("foreground mean Dice %v (nnU-Net %v), names %+v", got.ForegroundMean.Dice, want.ForegroundMean.Dice, got.Regions)
	}
	if h := got.Mean[0].HD95; !(h > 0) || math.IsInf(h, 0) {
		t.Errorf("whole tumor's mean HD95 %v, want a finite distance", h)
	}

	// --labels scores labels, named by the dataset.json's plain values.
	out, _, err = runCmd(t, "evaluate", pred, ref, "--dataset-json", dj, "--labels", "1,3", "-o", sumPath)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := evaluation.Read(sumPath); err != nil || s.Regions != nil || len(s.Labels) != 2 || s.Names[3] != "enhancing tumor" {
		t.Errorf("--labels on a region dataset: %+v, %v", s, err)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"labels": {"background": 0, "whole tumor": [1, 2, 3], "tumor core": [2, "three"]}, "regions_class_order": [1, 2]}`), 0o644)
	_, _, err = runCmd(t, "evaluate", pred, ref, "--dataset-json", bad)
	wantErr(t, err, bad+`: labels: "tumor core": region [2, "three"]: "three" is not a label value`)
	os.WriteFile(bad, []byte(`{"labels": {"background": 0, "whole tumor": [1, -2]}, "regions_class_order": [1]}`), 0o644)
	_, _, err = runCmd(t, "evaluate", pred, ref, "--dataset-json", bad)
	wantErr(t, err, bad+`: labels: "whole tumor": region [1, -2]: -2 is not a label value`)
}
