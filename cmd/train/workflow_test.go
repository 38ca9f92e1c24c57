package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/postprocess"
)

// TestWorkflowEndToEnd is nnU-Net's whole workflow with voxtrain alone,
// on a few small cases in nnU-Net's raw layout: train plan → train each
// fold of the planned config with --npz (which ends with the final
// validation: the fold's predictions and probabilities in its run's
// validation/) → train postprocess determine on the pooled
// cross-validation predictions, and train find-best on the training
// output folder (one configuration: it must gather the folds' final
// validations, choose it and the same post-processing) → train predict a
// test folder with the fold ensemble, probabilities and the
// post-processing → train evaluate. The planned config is used as
// written but for its budget (epochs, iterations, device, folds) and its
// width (features), which the test shrinks to train on a CPU in seconds.
// It checks the plumbing, not the Dice: every file where it belongs, the
// predictions on their inputs' grids, and `train evaluate` reproducing
// from the written files the numbers validate reported.
func TestWorkflowEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two folds end to end: skipped under -short")
	}
	testutil.SkipUnderRace(t, "trains two folds end to end")
	demo := testutil.DemoDir(t)
	root := t.TempDir()
	raw := filepath.Join(root, "Dataset004_Hippocampus")
	train := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019", "hippocampus_024", "hippocampus_033"}
	test := []string{"hippocampus_037", "hippocampus_040"}
	for _, d := range []string{"imagesTr", "labelsTr", "imagesTs", "labelsTs"} {
		if err := os.MkdirAll(filepath.Join(raw, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(src, dst string) {
		t.Helper()
		if err := os.Symlink(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range train {
		link(filepath.Join(demo, "imagesTr", id+".nii.gz"), filepath.Join(raw, "imagesTr", id+"_0000.nii.gz"))
		link(filepath.Join(demo, "labelsTr", id+".nii.gz"), filepath.Join(raw, "labelsTr", id+".nii.gz"))
	}
	for _, id := range test {
		link(filepath.Join(demo, "imagesTr", id+".nii.gz"), filepath.Join(raw, "imagesTs", id+"_0000.nii.gz"))
		link(filepath.Join(demo, "labelsTr", id+".nii.gz"), filepath.Join(raw, "labelsTs", id+".nii.gz"))
	}
	meta, _ := json.Marshal(map[string]any{"channel_names": map[string]string{"0": "MRI"},
		"labels": map[string]int{"background": 0, "Anterior": 1, "Posterior": 2}, "numTraining": len(train), "file_ending": ".nii.gz"})
	if err := os.WriteFile(filepath.Join(raw, "dataset.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errb, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("train %s: %v\n%s\n%s", strings.Join(args, " "), err, out, errb)
		}
		return out.String() + errb.String()
	}

	// 1. Plan.
	plans := filepath.Join(root, "plans")
	run("plan", raw, "-o", plans)
	text, err := os.ReadFile(filepath.Join(plans, "3d_fullres.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(text)
	for _, edit := range [][2]string{
		{"device: cuda", "device: cpu"},
		{"num_folds: 5", "num_folds: 2"},
		{"epochs: 1000", "epochs: 1"},
		{"iterations_per_epoch: 250", "iterations_per_epoch: 2"},
		{"iterations: 50", "iterations: 1"},
		{"features: [32, 64, 128, 256]", "features: [4, 8, 16, 16]"},
	} {
		if !strings.Contains(cfg, edit[0]) {
			t.Fatalf("the planned 3d_fullres.yaml lacks %q:\n%s", edit[0], cfg)
		}
		cfg = strings.Replace(cfg, edit[0], edit[1], 1)
	}
	cfgPath := filepath.Join(plans, "3d_fullres_test.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	// 2. Train both folds, each ending with its final validation (the
	// planned config's validation.final: last; --npz adds CASE.npz);
	// 3. pool the folds' predictions.
	runs := filepath.Join(root, "runs")
	exp := filepath.Join(runs, "Dataset004_Hippocampus_3d_fullres")
	if _, err := os.Stat(filepath.Join(exp)); err == nil {
		t.Fatal("runs exist before training")
	}
	cv := filepath.Join(root, "crossval")
	if err := os.MkdirAll(cv, 0o755); err != nil {
		t.Fatal(err)
	}
	var experiment string
	for _, line := range strings.Split(cfg, "\n") {
		if v, ok := strings.CutPrefix(line, "experiment: "); ok {
			experiment = strings.TrimSpace(strings.SplitN(v, "#", 2)[0])
		}
	}
	validated := map[string]float64{} // case → Dice of label 1, as validate reported it
	for fold := 0; fold < 2; fold++ {
		f := itoa(fold)
		log := run("--config", cfgPath, "--fold", f, "--output-dir", runs, "--threads", "2", "--npz")
		val := filepath.Join(runs, experiment, "fold_"+f, "run_0", "validation")
		if !strings.Contains(log, "final validation: ") {
			t.Errorf("fold %d: no final validation in the log:\n%s", fold, log)
		}
		s, err := evaluation.Read(filepath.Join(val, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Cases) == 0 {
			t.Fatalf("fold %d validated no case", fold)
		}
		for _, c := range s.Cases {
			id := strings.TrimSuffix(filepath.Base(c.PredictionFile), ".nii.gz")
			validated[id] = c.Metrics[0].Dice
			b, err := os.ReadFile(filepath.Join(val, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cv, id+".nii.gz"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(val, id+".npz")); err != nil {
				t.Errorf("train --npz: %v", err)
			}
		}
	}
	if len(validated) != len(train) {
		t.Fatalf("the folds validated %d cases, want each of the %d once: %v", len(validated), len(train), validated)
	}
	if _, err := os.Stat(filepath.Join(raw, "splits_final.json")); err == nil {
		t.Error("splits were written into the raw dataset")
	}

	// 4. Post-processing from the pooled cross-validation predictions;
	// evaluate reproduces validate's numbers from the written files.
	run("postprocess", "determine", "--pred", cv, "--ref", filepath.Join(raw, "labelsTr"), "--dataset-json", filepath.Join(raw, "dataset.json"))
	ppPath := filepath.Join(cv, "postprocessing.json")
	run("evaluate", cv, filepath.Join(raw, "labelsTr"), "--dataset-json", filepath.Join(raw, "dataset.json"), "-o", filepath.Join(root, "cv_summary.json"))
	s, err := evaluation.Read(filepath.Join(root, "cv_summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Cases {
		id := strings.TrimSuffix(filepath.Base(c.PredictionFile), ".nii.gz")
		if got, want := c.Metrics[0].Dice, validated[id]; !(got == want || got != got && want != want) {
			t.Errorf("%s: train evaluate gives Dice %v from the written file, validate reported %v", id, got, want)
		}
	}

	// find-best with this one configuration, its training output folder,
	// gathers the folds' final validations, chooses it and the same
	// post-processing as postprocess determine.
	fb := filepath.Join(root, "find_best")
	// --ref and --dataset-json: the trained dataset's, as nnU-Net's.
	run("find-best", "--cv", "3d_fullres="+filepath.Join(runs, experiment), "-o", fb)
	pp, err := postprocess.Load(ppPath)
	if err != nil {
		t.Fatal(err)
	}
	fbpp, err := postprocess.Load(filepath.Join(fb, "postprocessing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pp.Steps, fbpp.Steps) || !reflect.DeepEqual(pp.Decisions, fbpp.Decisions) {
		t.Errorf("find-best's post-processing %+v, postprocess determine's %+v", fbpp, pp)
	}
	for id := range validated {
		for _, ext := range []string{".nii.gz", ".npz"} {
			a, err1 := os.ReadFile(filepath.Join(fb, "3d_fullres", id+ext))
			b, err2 := os.ReadFile(filepath.Join(cv, id+ext))
			if ext == ".npz" {
				fold := "0"
				if _, err := os.Stat(filepath.Join(runs, experiment, "fold_1", "run_0", "validation", id+ext)); err == nil {
					fold = "1"
				}
				b, err2 = os.ReadFile(filepath.Join(runs, experiment, "fold_"+fold, "run_0", "validation", id+ext))
			}
			if err1 != nil || err2 != nil || string(a) != string(b) {
				t.Errorf("find-best's gathered %s%s: %v, %v, same as the fold's: %v", id, ext, err1, err2, string(a) == string(b))
			}
		}
	}
	if text, err := os.ReadFile(filepath.Join(fb, "inference_instructions.txt")); err != nil ||
		!strings.Contains(string(text), "train predict --model-dir "+filepath.Join(runs, experiment)+" --fold 0,1 -i INPUT_FOLDER -o OUTPUT_FOLDER\n") {
		t.Errorf("find-best's instructions: %v\n%s", err, text)
	}

	// 5. Predict the test folder with the fold ensemble, probabilities and
	// post-processing; 6. evaluate it.
	preds := filepath.Join(root, "preds")
	// --fold as find-best's instructions write it.
	log := run("predict", "--model-dir", filepath.Join(runs, experiment), "--fold", "0,1", "-i", filepath.Join(raw, "imagesTs"),
		"-o", preds, "--save-probabilities", "--postprocessing", ppPath, "--threads", "2")
	if !strings.Contains(log, "2 cases, 2 checkpoints, mirroring on") || !strings.Contains(log, "post-processing "+ppPath) {
		t.Errorf("predict's log:\n%s", log)
	}
	for _, id := range test {
		in, err := nifti.ReadHeader(filepath.Join(raw, "imagesTs", id+"_0000.nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := nifti.ReadHeader(filepath.Join(preds, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if out.Dim != in.Dim || out.Pixdim != in.Pixdim || out.SformCode != in.SformCode {
			t.Errorf("%s: prediction dims %v pixdim %v, input %v %v", id, out.Dim, out.Pixdim, in.Dim, in.Pixdim)
		}
		if _, err := os.Stat(filepath.Join(preds, id+".npz")); err != nil {
			t.Error(err)
		}
	}
	run("evaluate", preds, filepath.Join(raw, "labelsTs"), "--dataset-json", filepath.Join(raw, "dataset.json"))
	if s, err := evaluation.Read(filepath.Join(preds, "summary.json")); err != nil || len(s.Cases) != len(test) {
		t.Fatalf("the test folder's summary: %v", err)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }
