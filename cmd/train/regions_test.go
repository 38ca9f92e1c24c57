package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// TestRegionsTrainPredictWithoutDataset: a run on nnU-Net regions (the
// demo's labels as regions "whole" = {1, 2} and "posterior" = {2}) keeps
// regions_class_order in its config and checkpoints, so `train predict`
// paints nnU-Net's label map from the checkpoint alone after the dataset
// is gone; every value it writes is 0 or one the order paints. Before
// that, its validation scores each region (one val_dice per channel) and
// `train validate` keys summary.json by region as nnU-Net does.
func TestRegionsTrainPredictWithoutDataset(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric: a training and two sliding-window predictions")
	demo := testutil.DemoDir(t)
	ds := filepath.Join(t.TempDir(), "Dataset001_Regions")
	for _, sub := range []string{"imagesTr", "labelsTr"} {
		if err := os.MkdirAll(filepath.Join(ds, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var training []map[string]string
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019", "hippocampus_024", "hippocampus_033"} {
		for _, sub := range []string{"imagesTr", "labelsTr"} {
			if err := os.Symlink(filepath.Join(demo, sub, id+".nii.gz"), filepath.Join(ds, sub, id+".nii.gz")); err != nil {
				t.Fatal(err)
			}
		}
		training = append(training, map[string]string{"image": "./imagesTr/" + id + ".nii.gz", "label": "./labelsTr/" + id + ".nii.gz"})
	}
	meta, _ := json.Marshal(map[string]any{"name": "regions", "modality": map[string]string{"0": "MRI"},
		"labels": map[string]any{"background": 0, "whole": []int{1, 2}, "posterior": []int{2}}, "regions_class_order": []int{1, 2},
		"numTraining": len(training), "training": training})
	if err := os.WriteFile(filepath.Join(ds, "dataset.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	cfg := filepath.Join(t.TempDir(), "run.yaml")
	err := os.WriteFile(cfg, []byte("experiment: regions\nseed: 2\ndata:\n  dataset: "+ds+"\n  fold: 0\n  num_folds: 3\n  workers: 2\n"+
		"model:\n  num_classes: 2\n  targets: multi_label\n  features: [4, 8]\nloss:\n  name: dice_bce\n"+
		"train:\n  epochs: 1\n  iterations_per_epoch: 2\n  patch_size: [16, 16, 16]\n  batch_size: 2\n"+
		// the trainer's sliding-window validation scores the regions too
		"validation:\n  mode: both\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if o, errb, err := runCmd(t, "--config", cfg, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("training: %v\n%s\n%s", err, o, errb)
	}
	run := filepath.Join(runs, "regions", "fold_0", "run_0")
	saved, err := os.ReadFile(filepath.Join(run, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), "regions_class_order:") {
		t.Fatalf("the run's config lacks model.regions_class_order:\n%s", saved)
	}
	// The trainer's validation: one Dice per output channel in
	// metrics.jsonl, whatever the summary's keys.
	metrics, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var last struct {
		ValDice []any `json:"val_dice"`
	}
	lines := strings.Split(strings.TrimSpace(string(metrics)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(last.ValDice) != 2 {
		t.Fatalf("metrics.jsonl's last line: val_dice %v (%v), want one per region", last.ValDice, err)
	}
	// train validate writes the summary.json nnU-Net's validation would:
	// the regions keyed as its label_or_region_to_key ("posterior": [2]
	// is the tuple (2,)), not by channel.
	val := filepath.Join(t.TempDir(), "validation")
	o, errb, err := runCmd(t, "validate", "--checkpoint", filepath.Join(run, "checkpoints", "last"), "--output", val, "--threads", "2")
	if err != nil {
		t.Fatalf("validate: %v\n%s\n%s", err, o, errb)
	}
	sum, err := evaluation.Read(filepath.Join(val, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for j := range sum.Regions {
		keys = append(keys, sum.Key(j)+"="+sum.Regions[j].Name)
	}
	if sum.Labels != nil || strings.Join(keys, " ") != "(1, 2)=whole (2,)=posterior" || len(sum.Cases) != 2 {
		t.Errorf("validation summary.json: labels %v, regions %q, %d cases; want regions (1, 2)=whole (2,)=posterior, 2 cases", sum.Labels, keys, len(sum.Cases))
	}
	if !strings.Contains(o.String(), "region (1, 2) (whole): mean Dice") {
		t.Errorf("validate's output does not name the regions:\n%s", o)
	}
	// The dataset goes away; the test images stay.
	in := nnunetInputs(t)
	if err := os.RemoveAll(ds); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if o, errb, err := runCmd(t, "predict", "-i", in, "-o", out, "--checkpoint", filepath.Join(run, "checkpoints", "last"), "--disable-tta", "--threads", "2"); err != nil {
		t.Fatalf("predict without the dataset: %v\n%s\n%s", err, o, errb)
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		_, vals, err := nifti.ReadFloat32(filepath.Join(out, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if v != 0 && v != 1 && v != 2 {
				t.Fatalf("%s: voxel %d is %v, want 0 or a value regions_class_order paints (1, 2)", id, i, v)
			}
		}
	}
}
