package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/postprocess"
)

// TestPostprocessDetermineRegions runs train postprocess determine
// --dataset-json on a region-based dataset.json (the BraTS-like fixture
// postprocess/testdata/nnunet_regions/regions, decided by nnU-Net itself):
// the decisions are by region, the plan records the region steps nnU-Net
// kept, the post-processed predictions are nnU-Net's, the summaries are
// keyed by region, and postprocess apply with the plan writes
// apply_postprocessing's label maps. --labels still decides on labels.
func TestPostprocessDetermineRegions(t *testing.T) {
	dir := copyTree(t, filepath.Join(testutil.RepoRoot(), "postprocess", "testdata", "nnunet_regions", "regions"))
	pred, ref, dj := filepath.Join(dir, "pred"), filepath.Join(dir, "ref"), filepath.Join(dir, "dataset.json")
	out, _, err := runCmd(t, "postprocess", "determine", "--pred", pred, "--ref", ref, "--dataset-json", dj)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"keeping the largest foreground component: mean Dice 0.97188 → 0.98735 improves it but lowers region (2, 3) (tumor core), region 3 (enhancing tumor); not kept",
		"keeping the largest component of region (1, 2, 3) (whole tumor): Dice 0.91946 → 0.99915; kept",
		"keeping the largest component of region (2, 3) (tumor core): Dice 0.99231 → 0.99612; kept",
		"keeping the largest component of region 3 (enhancing tumor): Dice 0.97059 → 0.87059; not kept",
		"2 step(s) kept",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the log lacks %q:\n%s", w, out)
		}
	}
	planPath := filepath.Join(pred, "postprocessing.json")
	plan, err := postprocess.Load(planPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []postprocess.Step{
		{Op: postprocess.KeepLargestOp, Labels: []int{1, 2, 3}, Region: "(1, 2, 3)", Name: "whole tumor"},
		{Op: postprocess.KeepLargestOp, Labels: []int{2, 3}, Region: "(2, 3)", Name: "tumor core"},
	}
	if !reflect.DeepEqual(plan.Steps, want) || !reflect.DeepEqual(plan.Labels, []int{1, 2, 3}) ||
		!reflect.DeepEqual(plan.Regions, []string{"(1, 2, 3)", "(2, 3)", "3"}) || plan.RegionNames["3"] != "enhancing tumor" ||
		len(plan.Decisions) != 4 || !reflect.DeepEqual(plan.Decisions[0].WorseRegions, []string{"(2, 3)", "3"}) {
		t.Errorf("plan %+v", plan)
	}
	if _, ok := plan.After.MeanDice["(2, 3)"]; !ok {
		t.Errorf("the plan's scores are not keyed by region: %v", plan.After.MeanDice)
	}
	for _, sub := range []string{pred, filepath.Join(pred, "postprocessed")} {
		s, err := evaluation.Read(filepath.Join(sub, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Regions) != 3 || s.Labels != nil {
			t.Errorf("%s/summary.json: regions %v labels %v", sub, s.Regions, s.Labels)
		}
	}
	same := func(a, b string) {
		t.Helper()
		x, err := evaluation.ReadLabelFile(a)
		if err != nil {
			t.Fatal(err)
		}
		y, err := evaluation.ReadLabelFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(x.Labels) != string(y.Labels) {
			t.Errorf("%s and %s differ", a, b)
		}
	}
	applied := filepath.Join(dir, "applied")
	if _, _, err := runCmd(t, "postprocess", "apply", "--plan", planPath, pred, applied); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cv_1.nii.gz", "cv_2.nii.gz"} {
		same(filepath.Join(pred, "postprocessed", n), filepath.Join(dir, "nnunet_postprocessed", n))
		same(filepath.Join(applied, n), filepath.Join(dir, "nnunet_applied", n))
	}

	// --labels: labels, not regions, decide.
	out2 := filepath.Join(dir, "labels.json")
	if _, _, err := runCmd(t, "postprocess", "determine", "--pred", pred, "--ref", ref, "--dataset-json", dj, "--labels", "1,2,3", "-o", out2); err != nil {
		t.Fatal(err)
	}
	if p, err := postprocess.Load(out2); err != nil || p.Regions != nil || len(p.Decisions) != 4 || p.Decisions[1].Criterion != "mean of label 1" {
		t.Errorf("--labels on a region dataset: %+v, %v", p, err)
	}
}

// TestPredictPostprocessingRegions: train predict --postprocessing with a
// region plan on a region model (multi-label, regions_class_order
// [1, 2, 3]: it paints label 3, beyond its 3 channels) runs the region
// steps on each painted label map — the plain prediction with the plan
// applied, and changed by it — and refuses a plan naming a label the
// order never paints.
func TestPredictPostprocessingRegions(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 6, func(c *config.Config) {
		c.Model.Targets, c.Loss.Name, c.Model.RegionsClassOrder = config.TargetsMultiLabel, "dice_bce", []int{1, 2, 3}
	})
	in := nnunetInputs(t)
	out := t.TempDir()
	plan := &postprocess.Plan{Format: postprocess.Format, Labels: []int{1, 2, 3}, Regions: []string{"(1, 2, 3)", "(2, 3)", "3"},
		Steps: []postprocess.Step{
			postprocess.RegionStep(evaluation.Region{Labels: []int{2, 3}, Name: "tumor core"}),
			postprocess.RegionStep(evaluation.Region{Labels: []int{3}, Scalar: true}),
		}}
	planPath := filepath.Join(out, "postprocessing.json")
	if err := plan.Write(planPath); err != nil {
		t.Fatal(err)
	}
	predict := func(dir string, args ...string) (string, error) {
		o, errb, err := runCmd(t, append([]string{"predict", "-i", in, "-o", dir, "--disable-tta", "--threads", "2", "--checkpoint", ck}, args...)...)
		return o.String() + errb.String(), err
	}
	if log, err := predict(filepath.Join(out, "plain")); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	log, err := predict(filepath.Join(out, "pp"), "--postprocessing", planPath)
	if err != nil || !strings.Contains(log, "post-processing "+planPath+": 2 steps") {
		t.Fatalf("%v\n%s", err, log)
	}
	changed, painted3 := 0, 0
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		h, plain, err := nifti.ReadFloat32(filepath.Join(out, "plain", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := nifti.ReadFloat32(filepath.Join(out, "pp", id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]uint8, len(plain))
		for i, v := range plain {
			want[i] = uint8(v)
			if v == 3 {
				painted3++
			}
		}
		shape := [3]int{int(h.Dim[3]), int(h.Dim[2]), int(h.Dim[1])}
		if err := plan.Apply(want, shape); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if uint8(got[i]) != want[i] {
				t.Fatalf("%s voxel %d: %v with --postprocessing, %d by the plan applied to the plain prediction", id, i, got[i], want[i])
			}
			if got[i] != plain[i] {
				changed++
			}
		}
	}
	if changed == 0 || painted3 == 0 {
		t.Errorf("%d voxels changed, %d painted 3: the test cannot tell the region steps were applied", changed, painted3)
	}

	var bad postprocess.Plan
	b, _ := json.Marshal(plan)
	json.Unmarshal(b, &bad)
	bad.Steps = append(bad.Steps, postprocess.RegionStep(evaluation.Region{Labels: []int{3, 4}}))
	badPath := filepath.Join(out, "bad.json")
	if err := bad.Write(badPath); err != nil {
		t.Fatal(err)
	}
	if _, err := predict(filepath.Join(out, "bad"), "--postprocessing", badPath); err == nil ||
		!strings.Contains(err.Error(), "--postprocessing "+badPath+": label 4, but the models paint regions as labels [1 2 3]") {
		t.Errorf("a plan for label 4 of a model painting 1..3: %v", err)
	}
}
