package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// readLabels reads a label file as bytes.
func readLabels(t *testing.T, path string) []uint8 {
	t.Helper()
	_, v, err := nifti.ReadFloat32(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint8, len(v))
	for i, x := range v {
		out[i] = uint8(x)
	}
	return out
}

// foregroundMeanDice is nnU-Net's foreground_mean Dice of predictions
// against references (case → labels), computed here from the voxels:
// per label 1 and 2 the Dice of every case (NaN when neither has the
// label), their mean over the cases leaving NaN out, then the mean over
// the labels.
func foregroundMeanDice(pred, ref map[string][]uint8) float64 {
	var sum float64
	for _, l := range []uint8{1, 2} {
		var s float64
		n := 0
		for id, r := range ref {
			p := pred[id]
			var tp, fp, fn float64
			for i := range r {
				switch {
				case p[i] == l && r[i] == l:
					tp++
				case p[i] == l:
					fp++
				case r[i] == l:
					fn++
				}
			}
			if tp+fp+fn > 0 {
				s += 2 * tp / (2*tp + fp + fn)
				n++
			}
		}
		sum += s / float64(n)
	}
	return sum / 2
}

// TestFindBestEndToEnd: two tiny checkpoints stand for two configurations;
// each validates three demo cases with --save-probabilities (its pooled
// cross-validation predictions). find-best scores both and their
// ensemble, and chooses the candidate whose foreground mean Dice,
// computed here from the voxels (the ensemble's from the mean of the
// saved probabilities), is highest; it writes the summaries, the
// ensemble's predictions, postprocessing.json and the inference files,
// and the commands of inference_instructions.txt, run as written (the
// placeholders filled in), predict a test folder. With --no-ensembling
// only the configurations compete.
func TestFindBestEndToEnd(t *testing.T) {
	testutil.SkipUnderRace(t, "numeric")
	ids := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"}
	raw := smallRawDataset(t, ids...)
	root := t.TempDir()
	models := map[string]string{}
	cvs := map[string]string{}
	for i, name := range []string{"3d", "2d"} {
		runs := filepath.Join(root, "runs_"+name)
		ck := tinyCheckpoint(t, runs, 0, uint64(i+1), nil)
		models[name] = filepath.Join(runs, "tiny")
		cvs[name] = filepath.Join(root, "cv_"+name)
		if o, errb, err := runCmd(t, "validate", "--checkpoint", ck, "--data", raw, "--output", cvs[name], "--save-probabilities", "--threads", "2"); err != nil {
			t.Fatalf("validate: %v\n%s\n%s", err, o, errb)
		}
	}
	ref := map[string][]uint8{}
	preds := map[string]map[string][]uint8{"3d": {}, "2d": {}, "ensemble_3d+2d": {}}
	for _, id := range ids {
		ref[id+".nii.gz"] = readLabels(t, filepath.Join(raw, "labelsTr", id+".nii.gz"))
		for _, name := range []string{"3d", "2d"} {
			preds[name][id+".nii.gz"] = readLabels(t, filepath.Join(cvs[name], id+".nii.gz"))
		}
		pa := readProbs(t, filepath.Join(cvs["3d"], id+".npz"))
		pb := readProbs(t, filepath.Join(cvs["2d"], id+".npz"))
		mean := make([]float32, len(pa.Data))
		for i := range mean {
			mean[i] = (pa.Data[i] + pb.Data[i]) / 2
		}
		preds["ensemble_3d+2d"][id+".nii.gz"] = infer.Argmax(mean, 3, len(mean)/3)
	}
	order := []string{"3d", "2d", "ensemble_3d+2d"}
	want := map[string]float64{}
	best := ""
	for _, name := range order {
		want[name] = foregroundMeanDice(preds[name], ref)
		if best == "" || want[name] > want[best] {
			best = name
		}
	}
	t.Logf("scores computed here: %v; best %s", want, best)

	out := filepath.Join(root, "find_best")
	args := []string{"find-best", "--cv", "3d=" + cvs["3d"], "--cv", "2d=" + cvs["2d"], "--ref", filepath.Join(raw, "labelsTr"),
		"--dataset-json", filepath.Join(raw, "dataset.json")}
	o, errb, err := runCmd(t, append(args, "-o", out)...)
	if err != nil {
		t.Fatalf("find-best: %v\n%s\n%s", err, o, errb)
	}
	log := o.String()
	if !strings.Contains(log, "candidate") || !strings.Contains(log, "ensemble_3d+2d") || !strings.Contains(log, "best") {
		t.Errorf("find-best's table:\n%s", log)
	}
	var info struct {
		Candidates []struct {
			Name    string   `json:"name"`
			Members []string `json:"members"`
			Dice    *float64 `json:"foreground_mean_dice"`
			Cases   int      `json:"cases"`
		} `json:"candidates"`
		AllResults map[string]*float64 `json:"all_results"`
		Best       struct {
			Name    string   `json:"name"`
			Models  []string `json:"selected_model_or_models"`
			Pre     *float64 `json:"result_on_crossval_pre_pp"`
			Post    *float64 `json:"result_on_crossval_post_pp"`
			PP      string   `json:"postprocessing_file"`
			PPSteps int      `json:"postprocessing_steps"`
		} `json:"best_model_or_ensemble"`
	}
	b, err := os.ReadFile(filepath.Join(out, "inference_information.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("inference_information.json: %v\n%s", err, b)
	}
	if len(info.Candidates) != 3 {
		t.Fatalf("%d candidates, want 3:\n%s", len(info.Candidates), b)
	}
	for i, c := range info.Candidates {
		if c.Name != order[i] || c.Dice == nil || math.Abs(*c.Dice-want[c.Name]) > 1e-9 || c.Cases != len(ids) {
			t.Errorf("candidate %d: %+v, want %s with Dice %v over %d cases", i, c, order[i], want[order[i]], len(ids))
		}
		if r := info.AllResults[order[i]]; r == nil || *r != *c.Dice {
			t.Errorf("all_results[%s] = %v", order[i], r)
		}
	}
	if info.Best.Name != best || info.Best.Pre == nil || *info.Best.Pre != want[best] || info.Best.Post == nil ||
		info.Best.PP != filepath.Join(out, "postprocessing.json") {
		t.Errorf("best_model_or_ensemble %+v, want %s (Dice %v)", info.Best, best, want[best])
	}
	if (best == "ensemble_3d+2d") != (len(info.Best.Models) == 2) {
		t.Errorf("selected models %v for %s", info.Best.Models, best)
	}
	for _, f := range []string{"postprocessing.json", "postprocessed/summary.json", "postprocessed/hippocampus_006.nii.gz", "3d/summary.json",
		"2d/summary.json", "ensemble_3d+2d/summary.json", "ensemble_3d+2d/hippocampus_011.nii.gz", "inference_instructions.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}

	// The instructions run as written, the placeholders filled in; the
	// ensemble's too, whichever won here.
	text, err := os.ReadFile(filepath.Join(out, "inference_instructions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantRan := "predict postprocess"
	if best == "ensemble_3d+2d" {
		wantRan = "predict predict ensemble postprocess"
	}
	inputs := nnunetInputs(t)
	runInstructions(t, string(text), models, inputs, wantRan)
	ensText, err := inferenceInstructions(&FindBestOptions{labelFlags: labelFlags{DatasetJSON: filepath.Join(raw, "dataset.json")}},
		&candidate{Name: "ensemble_3d+2d", Members: []string{"3d", "2d"}}, filepath.Join(out, "postprocessing.json"))
	if err != nil {
		t.Fatal(err)
	}
	runInstructions(t, ensText, models, inputs, "predict predict ensemble postprocess")

	// --no-ensembling: the configurations alone.
	out2 := filepath.Join(root, "find_best_single")
	if o, errb, err := runCmd(t, append(args, "-o", out2, "--no-ensembling")...); err != nil {
		t.Fatalf("find-best --no-ensembling: %v\n%s\n%s", err, o, errb)
	}
	b, err = os.ReadFile(filepath.Join(out2, "inference_information.json"))
	if err != nil {
		t.Fatal(err)
	}
	info.Candidates, info.Best.Models = nil, nil
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	single := "3d"
	if want["2d"] > want["3d"] {
		single = "2d"
	}
	if len(info.Candidates) != 2 || info.Best.Name != single {
		t.Errorf("--no-ensembling: %d candidates, best %s; want 2, %s", len(info.Candidates), info.Best.Name, single)
	}
	text, err = os.ReadFile(filepath.Join(out2, "inference_instructions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(text); strings.Contains(s, "train ensemble") || !strings.Contains(s, "train predict --model-dir MODEL_DIR_"+single+" -i INPUT_FOLDER -o OUTPUT_FOLDER\n") {
		t.Errorf("--no-ensembling's instructions:\n%s", s)
	}
}

// TestFindBestBadInput: a --cv without '=', a name given twice or unfit
// for a folder name, a missing folder, a folder sharing no case with
// --ref, and an output that is a --cv folder are errors naming the flag
// and the folder; a configuration without probabilities is left out of
// the ensembles, said in the log.
func TestFindBestBadInput(t *testing.T) {
	raw := smallRawDataset(t, "hippocampus_001")
	refs := filepath.Join(raw, "labelsTr")
	root := t.TempDir()
	other := filepath.Join(root, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "case_9.nii.gz"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "missing")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--cv", other}, []string{"--cv", other, "want NAME=DIR"}},
		{[]string{"--cv", "a=" + other, "--cv", "a=" + other}, []string{"--cv", "given twice"}},
		{[]string{"--cv", "a+b=" + other}, []string{"--cv", "letters, digits"}},
		{[]string{"--cv", "ensemble_x=" + other}, []string{"--cv", "clash with find-best's own folders"}},
		{[]string{"--cv", "PP=" + other}, []string{"--cv", "OUTPUT_FOLDER_PP"}},
		{[]string{"--cv", "a=" + missing}, []string{"--cv a=" + missing, "not a folder"}},
		{[]string{"--cv", "a=" + other}, []string{"--cv a=" + other, "no case in common with --ref " + refs}},
		{[]string{"--cv", "a=" + other, "-o", other}, []string{"--output " + other + " is --cv a=" + other}},
		{[]string{}, []string{"--cv NAME=DIR is required"}},
	} {
		args := append([]string{"find-best", "--ref", refs}, c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "-o") {
			args = append(args, "-o", filepath.Join(root, "out"))
		}
		_, _, err := runCmd(t, args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want %q", c.args, err, w)
			}
		}
	}
	// Two configurations of label files only: scored, the pair skipped.
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(refs, "hippocampus_001.nii.gz"), filepath.Join(d, "hippocampus_001.nii.gz")); err != nil {
			t.Fatal(err)
		}
	}
	o, errb, err := runCmd(t, "find-best", "--cv", "a="+a, "--cv", "b="+b, "--ref", refs, "--dataset-json", filepath.Join(raw, "dataset.json"), "-o", filepath.Join(root, "fb"))
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, errb)
	}
	if s := o.String(); !strings.Contains(s, "ensemble_a+b skipped: "+a+" (--cv a) has no CASE.npz") || !strings.Contains(s, "a: foreground mean Dice 1.00000") {
		t.Errorf("find-best's log:\n%s", s)
	}
	// Probabilities beside one of b's two label files (one fold validated
	// without --save-probabilities): the pair is skipped naming the file
	// without them, not ensembled over fewer cases.
	raw2 := smallRawDataset(t, "hippocampus_001", "hippocampus_006")
	refs2 := filepath.Join(raw2, "labelsTr")
	for _, d := range []string{a, b} {
		os.Remove(filepath.Join(d, "hippocampus_001.nii.gz"))
		for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
			if err := os.Symlink(filepath.Join(refs2, id+".nii.gz"), filepath.Join(d, id+".nii.gz")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "hippocampus_001.npz"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o, errb, err = runCmd(t, "find-best", "--cv", "a="+a, "--cv", "b="+b, "--ref", refs2, "--dataset-json", filepath.Join(raw2, "dataset.json"), "-o", filepath.Join(root, "fb2"))
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, errb)
	}
	if s := o.String(); !strings.Contains(s, "ensemble_a+b skipped: "+a+" (--cv a): 1 of 2 label files have no CASE.npz beside them (hippocampus_006.nii.gz first)") {
		t.Errorf("find-best's log with one .npz missing:\n%s", s)
	}
}

// runInstructions runs the train commands of inference_instructions.txt
// (text) with the placeholders filled in: MODEL_DIR_<name> by models[name],
// INPUT_FOLDER by inputs, the output folders by new folders. The commands
// run must be want (their subcommands, space-separated), and the last
// output folder must hold both test cases' labels.
func runInstructions(t *testing.T, text string, models map[string]string, inputs, want string) {
	t.Helper()
	test := t.TempDir()
	fill := map[string]string{"INPUT_FOLDER": inputs}
	for name, dir := range models {
		fill["MODEL_DIR_"+name] = dir
		fill["OUTPUT_FOLDER_"+name] = filepath.Join(test, "OUTPUT_FOLDER_"+name)
	}
	for _, p := range []string{"OUTPUT_FOLDER", "OUTPUT_FOLDER_PP"} {
		fill[p] = filepath.Join(test, p)
	}
	var ran []string
	for _, line := range strings.Split(text, "\n") {
		words := strings.Fields(line)
		if len(words) == 0 || words[0] != "train" {
			continue
		}
		for i, w := range words {
			if v, ok := fill[w]; ok {
				words[i] = v
			}
		}
		if words[1] == "predict" {
			words = append(words, "--threads", "2", "--disable-tta")
		}
		if o, errb, err := runCmd(t, words[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s\n%s", line, err, o, errb)
		}
		ran = append(ran, words[1])
	}
	if strings.Join(ran, " ") != want {
		t.Errorf("the instructions ran %v, want %s:\n%s", ran, want, text)
	}
	for _, id := range []string{"hippocampus_001", "hippocampus_006"} {
		if _, err := os.Stat(filepath.Join(test, "OUTPUT_FOLDER_PP", id+".nii.gz")); err != nil {
			t.Errorf("the instructions' post-processed output: %v", err)
		}
	}
}

// TestFindBestTieAndNaN: on a tie the first candidate wins (a single
// configuration before an ensemble, nnU-Net's rule); a NaN score loses to
// any number.
func TestFindBestTieAndNaN(t *testing.T) {
	c := func(name string, d float64) *candidate { return &candidate{Name: name, Dice: d} }
	for _, tc := range []struct {
		cands []*candidate
		want  string
	}{
		{[]*candidate{c("3d", 0.8), c("2d", 0.7), c("ensemble_3d+2d", 0.8)}, "3d"},
		{[]*candidate{c("3d", 0.8), c("2d", 0.9), c("ensemble_3d+2d", 0.9)}, "2d"},
		{[]*candidate{c("3d", math.NaN()), c("2d", 0.1), c("ensemble_3d+2d", math.NaN())}, "2d"},
		{[]*candidate{c("3d", 0.5), c("2d", 0.4), c("ensemble_3d+2d", 0.51)}, "ensemble_3d+2d"},
	} {
		if got := bestCandidate(tc.cands).Name; got != tc.want {
			t.Errorf("best of %v: %s, want %s", tc.cands, got, tc.want)
		}
	}
}

// TestFindBestGathersFolds: --cv NAME=runs/EXP (a training output folder)
// gathers each fold's final validation (fold_<k>/run_<r>/validation/) into
// OUT/NAME as nnU-Net's accumulate_cv_results, scores that, and names the
// folder, its folds, run id and checkpoint in the instructions; a fold
// without a final validation, folds validating the same case, or folds
// that validated different checkpoints are errors naming them, and files
// of an earlier gathering are removed.
func TestFindBestGathersFolds(t *testing.T) {
	ids := []string{"hippocampus_001", "hippocampus_006", "hippocampus_011"}
	raw := smallRawDataset(t, ids...)
	refs := filepath.Join(raw, "labelsTr")
	root := t.TempDir()
	model := filepath.Join(root, "runs", "exp")
	// fold 0 validated the first two cases, fold 1 the third; each
	// prediction is the reference itself.
	write := func(path string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setFold := func(fold, run int, final string, cases ...string) string {
		t.Helper()
		dir := foldRunDir(model, fold, run)
		os.RemoveAll(dir)
		for _, id := range cases {
			b, err := os.ReadFile(filepath.Join(refs, id+".nii.gz"))
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(dir, "validation", id+".nii.gz"), b)
		}
		write(filepath.Join(dir, "validation", "summary.json"), []byte("{}\n"))
		write(filepath.Join(dir, "config.yaml"), []byte("data:\n  dataset: "+raw+"\n  num_folds: 2\ntrain:\n  patch_size: [16, 16, 16]\nvalidation:\n  final: "+final+"\n"))
		return dir
	}
	setFold(0, 0, "last", ids[0], ids[1])
	fold1 := setFold(1, 0, "last", ids[2])
	out := filepath.Join(root, "fb")
	stale := filepath.Join(out, "x", "hippocampus_099.nii.gz")
	write(stale, []byte("an earlier gathering's"))
	findBest := func(extra ...string) (string, error) {
		o, errb, err := runCmd(t, append([]string{"find-best", "--cv", "x=" + model, "--ref", refs, "--dataset-json", filepath.Join(raw, "dataset.json"), "-o", out}, extra...)...)
		return o.String() + errb.String(), err
	}
	log, err := findBest()
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(log, "x: the final validations of folds 0 1 (run 0) of "+model+": 3 cases, gathered in "+filepath.Join(out, "x")) ||
		!strings.Contains(log, "x: foreground mean Dice 1.00000 over 3 cases") {
		t.Errorf("find-best's log:\n%s", log)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("an earlier gathering's file was left in OUT/x")
	}
	text, err := os.ReadFile(filepath.Join(out, "inference_instructions.txt"))
	if err != nil || !strings.Contains(string(text), "train predict --model-dir "+model+" --fold 0,1 -i INPUT_FOLDER -o OUTPUT_FOLDER\n") ||
		strings.Contains(string(text), "MODEL_DIR_") {
		t.Errorf("instructions: %v\n%s", err, text)
	}
	var info findBestInfo
	if b, err := os.ReadFile(filepath.Join(out, "inference_information.json")); err != nil || json.Unmarshal(b, &info) != nil ||
		!strings.Contains(string(b), `"model_folder": "`+model+`"`) {
		t.Errorf("inference_information.json: %v\n%s", err, b)
	}

	// Without --ref and --dataset-json: the runs' dataset's.
	o, errb, err := runCmd(t, "find-best", "--cv", "x="+model, "-o", out)
	if err != nil || !strings.Contains(o.String(), "x: foreground mean Dice 1.00000 over 3 cases") {
		t.Errorf("find-best without --ref: %v\n%s\n%s", err, o, errb)
	}
	if b, err := os.ReadFile(filepath.Join(out, "inference_information.json")); err != nil ||
		!strings.Contains(string(b), `"reference_folder": "`+refs+`"`) || !strings.Contains(string(b), `"dataset_json": "`+filepath.Join(raw, "dataset.json")+`"`) {
		t.Errorf("inference_information.json without --ref: %v\n%s", err, b)
	}

	// --folds 0 and run 1 whose folds validated their best checkpoint.
	setFold(0, 1, "best", ids[0], ids[1])
	setFold(1, 1, "best", ids[2])
	if log, err := findBest("--folds", "0", "--run-id", "1"); err != nil || !strings.Contains(log, "over 2 cases") {
		t.Errorf("--folds 0 --run-id 1: %v\n%s", err, log)
	}
	text, _ = os.ReadFile(filepath.Join(out, "inference_instructions.txt"))
	if !strings.Contains(string(text), "--model-dir "+model+" --fold 0 --run-id 1 --checkpoint-name best -i INPUT_FOLDER") {
		t.Errorf("instructions for --folds 0 --run-id 1:\n%s", text)
	}

	for _, c := range []struct {
		setup func()
		args  []string
		want  string
	}{
		{func() { os.Remove(filepath.Join(fold1, "validation", "summary.json")) }, nil,
			"--cv x=" + model + ": fold 1 has no final validation (" + filepath.Join(fold1, "validation") + "/summary.json)"},
		{func() { setFold(1, 0, "last", ids[1], ids[2]) }, nil, "folds 0 and 1 both have a prediction hippocampus_006.nii.gz"},
		{func() { setFold(1, 0, "best", ids[2]) }, nil, "folds [1] validated their best checkpoint, folds [0] their last"},
		{func() {}, []string{"--run-id", "2"}, "no fold_<k>/run_2"},
		{func() {}, []string{"--folds", "-1"}, "--folds [-1]: want folds ≥ 0"},
	} {
		setFold(1, 0, "last", ids[2])
		c.setup()
		if _, err := findBest(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, _, err := runCmd(t, "find-best", "--cv", "x="+model, "--run-id", "3", "-o", out); err == nil ||
		!strings.Contains(err.Error(), "no fold_<k>/run_3/config.yaml to take the dataset from: give --ref") {
		t.Errorf("find-best without --ref, no such run: %v", err)
	}
	// Gathering never empties an input: another --cv, the references, a
	// fold's own validation.
	pooled := filepath.Join(model, "fold_0", "run_0", "validation")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cv", "x=" + model, "--cv", "y=" + filepath.Join(out, "x"), "--ref", refs, "-o", out}, "which is an input"},
		{[]string{"--cv", "labelsTr=" + model, "--ref", refs, "-o", raw}, "which is an input"},
		{[]string{"--cv", "validation=" + model, "--ref", refs, "-o", filepath.Dir(pooled)}, "fold 0's own validation"},
	} {
		if _, _, err := runCmd(t, append([]string{"find-best"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(pooled, ids[0]+".nii.gz")); err != nil {
		t.Errorf("fold 0's validation lost a file: %v", err)
	}
	if _, _, err := runCmd(t, "find-best", "--cv", "x="+pooled, "-o", out); err == nil || !strings.Contains(err.Error(), "--ref is required") {
		t.Errorf("pooled predictions without --ref: %v", err)
	}
	if _, _, err := runCmd(t, "find-best", "--cv", "x="+pooled, "--ref", refs, "-o", filepath.Join(root, "fb2"), "--folds", "0"); err == nil ||
		!strings.Contains(err.Error(), "no --cv names one") {
		t.Errorf("--folds with pooled predictions: %v", err)
	}
}
