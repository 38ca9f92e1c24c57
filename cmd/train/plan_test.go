package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

func TestPlanFlags(t *testing.T) {
	o, err := capture(t, NewCmdPlan, "../../testdata/demo", "-o", "out", "--workers", "3", "--gpu-memory", "24")
	if err != nil {
		t.Fatal(err)
	}
	if o.Dataset != "../../testdata/demo" || o.Output != "out" || o.Workers != 3 || o.VRAMGB != 24 {
		t.Errorf("options %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"../../testdata/demo"}, "-o/--output is required"},
		{[]string{"-o", "out"}, "accepts 1 arg"},
		{[]string{"../../testdata/demo", "-o", "out", "--workers", "0"}, "--workers: 0"},
		{[]string{"../../testdata/demo", "-o", "out", "--gpu-memory", "0"}, "--gpu-memory: 0"},
		{[]string{"../../testdata/demo", "-o", "out", "--planner", "resenc-s"}, `--planner: planner "resenc-s": want one of default, resenc-m, resenc-l, resenc-xl`},
		{[]string{"../../testdata/demo", "-o", "out", "--target-spacing", "1,2"}, "--target-spacing: 2 values, want D,H,W (three) or one for all axes"},
		{[]string{"../../testdata/demo", "-o", "out", "--target-spacing", "1,0,1"}, "--target-spacing: [1 0 1]: want spacings > 0"},
		{[]string{"../../testdata/demo", "-o", "out", "--target-spacing", "1,x,1"}, `invalid argument "1,x,1" for "--target-spacing"`},
		{[]string{"../../testdata/demo", "-o", "../../testdata/demo/plans"}, "inside the dataset folder"},
		{[]string{"../../testdata/demo", "-o", "../../testdata/demo"}, "inside the dataset folder"},
	} {
		if _, err := capture(t, NewCmdPlan, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, name := range []string{"resenc-l", "nnUNetPlannerResEncL", "ResEnc-L"} {
		o, err := capture(t, NewCmdPlan, "../../testdata/demo", "-o", "out", "--planner", name)
		if err != nil || o.Planner != name || o.VRAMGB != 0 {
			t.Errorf("--planner %s: options %+v, error %v (want the planner's own GPU memory, 0)", name, o, err)
		}
	}
	for arg, want := range map[string][]float64{"2,1,1": {2, 1, 1}, "1.5": {1.5, 1.5, 1.5}} {
		o, err := capture(t, NewCmdPlan, "../../testdata/demo", "-o", "out", "--target-spacing", arg)
		if err != nil || !slices.Equal(o.TargetSpacing, want) {
			t.Errorf("--target-spacing %s: %v, error %v; want %v", arg, o.TargetSpacing, err, want)
		}
	}
	if o, err := capture(t, NewCmdPlan, "../../testdata/demo", "-o", "out"); err != nil || o.TargetSpacing != nil {
		t.Errorf("no --target-spacing: %v, error %v; want nil (the median rule)", o.TargetSpacing, err)
	}
	// A sibling whose name starts with the dataset's is not inside it.
	if inside("../../testdata/demo2", "../../testdata/demo") {
		t.Error("demo2 counted as inside demo")
	}
}

// TestPlanRunDemo plans the demo in process and trains nothing: the files
// are there and every YAML loads.
func TestPlanRunDemo(t *testing.T) {
	testutil.SkipUnderRace(t, "the 80 demo cases are slow there (package plan tests the concurrency)")
	f, out, _ := testFactory()
	dir := filepath.Join(t.TempDir(), "plans")
	cmd := NewCmdPlan(f, nil)
	cmd.SetArgs([]string{"../../testdata/demo", "-o", dir, "--workers", "2"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dataset_fingerprint.json", "plans.json", "3d_fullres.yaml", "2d.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "3d_lowres.yaml")); !os.IsNotExist(err) {
		t.Errorf("3d_lowres.yaml for the small demo images: %v (nnU-Net drops it)", err)
	}
	for _, name := range []string{"3d_fullres.yaml", "2d.yaml"} {
		if _, err := config.Load(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "3d_fullres patch [40 56 40]") {
		t.Errorf("output %q, want the 3d_fullres summary", out.String())
	}

	// nnU-Net's ResEnc L preset: a residual encoder, sized for 24 GB.
	dir = filepath.Join(t.TempDir(), "plans_resenc")
	cmd = NewCmdPlan(f, nil)
	cmd.SetArgs([]string{"../../testdata/demo", "-o", dir, "--workers", "2", "--planner", "resenc-l"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(dir, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Model; !m.Residual() || !slices.Equal(m.BlocksPerLevel, []int{1, 3, 4, 6}) || m.DecoderConvsPerStage() != 1 {
		t.Errorf("resenc-l 3d_fullres: encoder %q, blocks %v, decoder convs %d; want residual, [1 3 4 6], 1", m.Encoder, m.BlocksPerLevel, m.DecoderConvsPerStage())
	}
	var plans struct {
		PlansName string  `json:"plans_name"`
		VRAM      float64 `json:"vram_target_gb"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "plans.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &plans); err != nil || plans.PlansName != "voxtrainResEncUNetLPlans" || plans.VRAM != 24 {
		t.Errorf("resenc-l plans.json: %+v (%v); want voxtrainResEncUNetLPlans for 24 GB", plans, err)
	}

	// A target spacing given by hand: 2 mm across the demo's first axis
	// (nnU-Net's plans for it in plan/testdata/nnunet_spacing_demo_plans.json).
	dir = filepath.Join(t.TempDir(), "plans_2mm")
	cmd = NewCmdPlan(f, nil)
	cmd.SetArgs([]string{"../../testdata/demo", "-o", dir, "--workers", "2", "--target-spacing", "2,1,1"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err = config.Load(filepath.Join(dir, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Data.TargetSpacing, []float64{2, 1, 1}) || c.Train.PatchSize != [3]int{20, 56, 40} {
		t.Errorf("--target-spacing 2,1,1: 3d_fullres target spacing %v, patch %v; want [2 1 1], nnU-Net's [20 56 40]", c.Data.TargetSpacing, c.Train.PatchSize)
	}
	yml, err := os.ReadFile(filepath.Join(dir, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(yml), "given by hand (train plan --target-spacing") {
		t.Errorf("3d_fullres.yaml does not say its spacing was given:\n%s", yml)
	}
	var given struct {
		Given []float64 `json:"target_spacing_given"`
	}
	if b, err = os.ReadFile(filepath.Join(dir, "plans.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &given); err != nil || !slices.Equal(given.Given, []float64{2, 1, 1}) {
		t.Errorf("plans.json target_spacing_given %v (%v), want [2 1 1]", given.Given, err)
	}
	trainPlanned(t, dir) // the cases resampled to 2 mm slices train
}

// planLabels plans a small demo dataset (n cases) whose dataset.json
// has the given labels (and regions_class_order when not nil) and
// returns the plans' folder.
func planLabels(t *testing.T, n int, labels map[string]any, order []int) string {
	t.Helper()
	ids := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019", "hippocampus_024"}[:n]
	ds := smallRawDataset(t, ids...)
	m := map[string]any{"channel_names": map[string]string{"0": "MRI"}, "labels": labels, "numTraining": n, "file_ending": ".nii.gz"}
	if order != nil {
		m["regions_class_order"] = order
	}
	meta, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(ds, "dataset.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plans")
	if o, errb, err := runCmd(t, "plan", ds, "-o", dir, "--workers", "2"); err != nil {
		t.Fatalf("plan: %v\n%s\n%s", err, o, errb)
	}
	return dir
}

// trainPlanned trains the planned 3d_fullres.yaml in dir for one epoch of
// two steps. Under the race detector (numeric and slow there) it skips the
// rest of the test instead: call it last; make slow runs the whole test.
func trainPlanned(t *testing.T, dir string) {
	t.Helper()
	testutil.SkipUnderRace(t, "trains a planned config")
	b, err := os.ReadFile(filepath.Join(dir, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("iterations_per_epoch: 250", "iterations_per_epoch: 2", "epochs: 1000", "epochs: 1", "  iterations: 50", "  iterations: 2").Replace(string(b))
	cfgPath := filepath.Join(dir, "short.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, errb, err := runCmd(t, "--config", cfgPath, "--device", "cpu", "--threads", "2", "-o", filepath.Join(t.TempDir(), "runs"), "--final-validation", "none"); err != nil {
		t.Fatalf("training the planned config: %v\n%s\n%s", err, o, errb)
	}
}

// TestPlanRegions: on a dataset of nnU-Net regions (the demo's labels as
// "whole" = {1, 2} and "posterior" = {2}) train plan writes configs that
// train as nnU-Net trains regions: sigmoid outputs, one per region,
// regions_class_order and Dice + BCE; a planned config trains an epoch
// and validates.
func TestPlanRegions(t *testing.T) {
	dir := planLabels(t, 5, map[string]any{"background": 0, "whole": []int{1, 2}, "posterior": []int{2}}, []int{1, 2})
	for _, name := range []string{"3d_fullres.yaml", "2d.yaml"} {
		cfg, err := config.Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m := cfg.Model
		if !m.MultiLabel() || m.NumClasses != 2 || !slices.Equal(m.RegionsClassOrder, []int{1, 2}) || cfg.Loss.Name != "dice_bce" {
			t.Errorf("%s: targets %q, num_classes %d, regions_class_order %v, loss %s; want multi_label, 2, [1 2], dice_bce",
				name, m.Targets, m.NumClasses, m.RegionsClassOrder, cfg.Loss.Name)
		}
	}
	trainPlanned(t, dir)
}

// TestPlanIgnoreLabel: on a dataset with nnU-Net's ignore label (the
// demo's label 2 declared "ignore") train plan writes configs whose
// network has no output for it and whose loss leaves its voxels out
// (loss.ignore_label), which the trainer requires; one trains an epoch.
// With regions the ignore label is read as multi-label labels' ignore
// byte, 255: the configs say so.
func TestPlanIgnoreLabel(t *testing.T) {
	dir := planLabels(t, 5, map[string]any{"background": 0, "anterior": 1, "ignore": 2}, nil)
	for _, name := range []string{"3d_fullres.yaml", "2d.yaml"} {
		cfg, err := config.Load(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Model.NumClasses != 2 || cfg.Loss.Ignore() != 2 {
			t.Errorf("%s: num_classes %d, ignore_label %d; want 2 (background, anterior) and 2", name, cfg.Model.NumClasses, cfg.Loss.Ignore())
		}
	}
	rdir := planLabels(t, 2, map[string]any{"background": 0, "whole": []int{1, 2}, "ignore": 3}, []int{1})
	if cfg, err := config.Load(filepath.Join(rdir, "3d_fullres.yaml")); err != nil {
		t.Fatal(err)
	} else if !cfg.Model.MultiLabel() || cfg.Model.NumClasses != 1 || cfg.Loss.Ignore() != 255 {
		t.Errorf("regions with an ignore label: targets %q, num_classes %d, ignore_label %d; want multi_label, 1, 255", cfg.Model.Targets, cfg.Model.NumClasses, cfg.Loss.Ignore())
	}
	trainPlanned(t, dir)
}

// TestPlanFromFingerprint: --fingerprint plans from a dataset_fingerprint.json
// without reading the cases, nnU-Net's own included (the demo's, which
// nnU-Net 2.8.1 extracted: the plans are nnU-Net's, patch [40 56 40]), and
// one of another dataset, of other case IDs, or not a fingerprint at all
// is an error naming the file and the mismatch.
func TestPlanFromFingerprint(t *testing.T) {
	nnunetFP, err := filepath.Abs("../../plan/testdata/nnunet_dataset_fingerprint.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "plans")
	out, errb, err := runCmd(t, "plan", "../../testdata/demo", "-o", dir, "--fingerprint", nnunetFP, "--workers", "1")
	if err != nil {
		t.Fatalf("plan --fingerprint: %v\n%s\n%s", err, out, errb)
	}
	if !strings.Contains(errb.String(), "plan: the fingerprint of 80 cases in "+nnunetFP) || strings.Contains(errb.String(), "fingerprinting") {
		t.Errorf("stderr %q: want the fingerprint read, no case read", errb.String())
	}
	if !strings.Contains(out.String(), "3d_fullres patch [40 56 40]") {
		t.Errorf("output %q, want nnU-Net's 3d_fullres patch", out.String())
	}
	c, err := config.Load(filepath.Join(dir, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Configurations map[string]struct {
			BatchSize int `json:"batch_size"`
		} `json:"configurations"`
	}
	b, err := os.ReadFile("../../plan/testdata/nnunet_nnUNetPlans.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if want := ref.Configurations["3d_fullres"].BatchSize; c.Train.PatchSize != [3]int{40, 56, 40} || c.Train.BatchSize != want {
		t.Errorf("3d_fullres patch %v batch %d, want nnU-Net's [40 56 40] and %d", c.Train.PatchSize, c.Train.BatchSize, want)
	}
	written, err := os.ReadFile(filepath.Join(dir, "dataset_fingerprint.json"))
	if err != nil || !strings.Contains(string(written), `"spacings"`) {
		t.Errorf("dataset_fingerprint.json in the plans: %v", err)
	}

	// Ours, with case IDs: one renamed is refused naming it.
	var fp map[string]any
	if err := json.Unmarshal(written, &fp); err != nil {
		t.Fatal(err)
	}
	ids := make([]any, 80)
	entries, err := os.ReadDir("../../testdata/demo/labelsTr")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries[:80] {
		ids[i] = strings.TrimSuffix(e.Name(), ".nii.gz")
	}
	fp["case_ids"] = ids
	ours := filepath.Join(t.TempDir(), "ours.json")
	writeJSONFile(t, ours, fp)
	if out, errb, err := runCmd(t, "plan", "../../testdata/demo", "-o", filepath.Join(t.TempDir(), "p"), "--fingerprint", ours); err != nil {
		t.Errorf("the demo's case IDs: %v\n%s\n%s", err, out, errb)
	}
	ids[3] = "hippocampus_999"
	renamed := filepath.Join(t.TempDir(), "renamed.json")
	writeJSONFile(t, renamed, fp)

	notJSON := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(notJSON, []byte("{\"spacings\": [[1, 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	synthetic, _ := filepath.Abs("../../plan/testdata/synthetic_fingerprint.json")
	for _, tc := range []struct{ file, want string }{
		{renamed, "--fingerprint " + renamed + `: case 3 is "hippocampus_999", the dataset ../../testdata/demo's is "` + entries[3].Name()[:len("hippocampus_000")] + `"`},
		{synthetic, "--fingerprint " + synthetic + ": 30 cases, the dataset ../../testdata/demo has 80"},
		{notJSON, "--fingerprint " + notJSON + ": not a dataset fingerprint"},
		{filepath.Join(t.TempDir(), "missing.json"), "--fingerprint: open "},
	} {
		_, _, err := runCmd(t, "plan", "../../testdata/demo", "-o", filepath.Join(t.TempDir(), "p"), "--fingerprint", tc.file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--fingerprint %s: error %v, want %q", tc.file, err, tc.want)
		}
	}
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
