package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// Each command's flags, parsed in process: the runF the test passes keeps
// the options the command would run with, or the error comes back first.

func wantErr(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Errorf("error %v, want one mentioning %q", err, sub)
	}
}

func TestNewCmdTrainMergesFlagsOverTheConfig(t *testing.T) {
	cfg := writeConfig(t, "seed: 4\nexperiment: e\ntrain:\n  epochs: 7\n  batch_size: 3\n  patch_size: [16, 16, 16]\n")
	o, err := capture(t, NewCmdTrain, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Seed != 4 || c.Train.Epochs != 7 || c.Train.BatchSize != 3 || c.Data.Fold != 0 || c.Device != "cpu" || o.Resume != "" {
		t.Errorf("config as written: %+v", c)
	}
	o, err = capture(t, NewCmdTrain, "--config", cfg, "--fold", "2", "--run-id", "1", "--epochs", "9", "--batch-size", "5",
		"--workers", "auto", "--device", "cuda:1,bf16", "--seed", "0", "--threads", "2", "--output-dir", "out", "--resume", "auto",
		"--stop-after-steps", "3")
	if err != nil {
		t.Fatal(err)
	}
	c = o.Config
	if c.Data.Fold != 2 || c.RunID != 1 || c.Train.Epochs != 9 || c.Train.BatchSize != 5 || !c.Data.Workers.Auto ||
		c.Device != "cuda:1,bf16" || c.Seed != 0 || c.Threads != 2 || c.OutputDir != "out" || o.Resume != "auto" || o.StopAfterSteps != 3 {
		t.Errorf("flags over the config: %+v, resume %q", c, o.Resume)
	}
	if o.ResumeCommand != "train --config "+cfg+" --fold 2 --run-id 1 --epochs 9 --batch-size 5 --workers auto --device cuda:1,bf16 --seed 0 --threads 2 --output-dir out --stop-after-steps 3 --resume auto" {
		t.Errorf("resume command %q", o.ResumeCommand)
	}
	// Flags given as 0 mean 0, and the merged config is validated.
	_, err = capture(t, NewCmdTrain, "--config", cfg, "--epochs", "0")
	wantErr(t, err, "train.epochs")
	_, err = capture(t, NewCmdTrain, "--config", cfg, "--fold", "5")
	wantErr(t, err, "data.fold")
	_, err = capture(t, NewCmdTrain, "--config", cfg, "--workers", "many")
	wantErr(t, err, "--workers")
	_, err = capture(t, NewCmdTrain, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	wantErr(t, err, "missing.yaml")
	if o, err := capture(t, NewCmdTrain); err != nil || o != nil {
		t.Errorf("no --config: %+v, %v (want the help, no run)", o, err)
	}
}

func TestNewCmdDemo(t *testing.T) {
	t.Chdir(testutil.RepoRoot())
	o, err := capture(t, NewCmdDemo, "--epochs", "2", "--output-dir", "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Train.Config
	if o.Train.ConfigPath != demoConfig || o.Train.Resume != "auto" || c.Experiment != "demo" || c.Train.Epochs != 2 || c.OutputDir != "/tmp/x" {
		t.Errorf("demo options: %+v", o.Train)
	}
	t.Chdir(t.TempDir())
	_, err = capture(t, NewCmdDemo)
	wantErr(t, err, "repository root")
}

func TestNewCmdValidate(t *testing.T) {
	o, err := capture(t, NewCmdValidate, "--checkpoint", "ck", "--fold", "3", "--output", "preds", "--hd95", "--mirror", "--overlap", "0.25", "--batch", "4")
	if err != nil {
		t.Fatal(err)
	}
	if o.Model.Checkpoint != "ck" || o.Fold != 3 || o.Output != "preds" || !o.Model.Window.HD95 || !o.Model.Window.Mirror ||
		o.Model.Window.Overlap != 0.25 || o.Model.Batch != 4 || o.Model.Device != "cpu" {
		t.Errorf("validate options: %+v", o)
	}
	o, _ = capture(t, NewCmdValidate, "--checkpoint", "ck")
	if o.Fold != -1 || o.Model.Window.Overlap != config.Default().Validation.Overlap || o.Model.Window.Mirror || o.Data != "" {
		t.Errorf("validate defaults: %+v", o)
	}
	_, err = capture(t, NewCmdValidate)
	wantErr(t, err, "checkpoint")
	_, err = capture(t, NewCmdValidate, "--checkpoint", "ck", "--fold", "-2")
	wantErr(t, err, "--fold")
	// -1 is train's every-case fold, which has no validation cases: refused,
	// not taken as "the checkpoint's own fold" (the default when --fold is
	// left out).
	_, err = capture(t, NewCmdValidate, "--checkpoint", "ck", "--fold", "-1")
	wantErr(t, err, "--fold -1: want a fold ≥ 0 (train's --fold -1 trains on every case")
	_, err = capture(t, NewCmdValidate, "--checkpoint", "ck", "--fold", "1", "--data", "d")
	wantErr(t, err, "--data")
	_, err = capture(t, NewCmdValidate, "--checkpoint", "ck", "--overlap", "1")
	wantErr(t, err, "--overlap")
	_, err = capture(t, NewCmdValidate, "--checkpoint", "ck", "--device", "tpu")
	wantErr(t, err, "--device")
}

func TestNewCmdPredict(t *testing.T) {
	o, err := capture(t, NewCmdPredict, "--checkpoint", "ck", "--input", "a.nii.gz", "--input", "b.nii.gz", "--output", "o.nii.gz", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Checkpoints, []string{"ck"}) || len(o.Inputs) != 2 || o.Inputs[1] != "b.nii.gz" || o.Output != "o.nii.gz" ||
		o.Model.Threads != 2 || !o.Model.Window.Mirror || o.SaveProbabilities || o.Continue || o.Folds != nil || o.CheckpointName != "last" {
		t.Errorf("predict options (mirroring on by default, as nnU-Net): %+v", o)
	}
	// Ensembles: repeated --checkpoint; --model-dir with folds as nnU-Net's
	// -f 0 1 2, as 0,1,2, as --folds, or all.
	o, err = capture(t, NewCmdPredict, "--checkpoint", "a", "--checkpoint", "b", "-i", "in", "-o", "out", "--disable-tta", "--save-probabilities", "--continue-prediction")
	if err != nil || !slices.Equal(o.Checkpoints, []string{"a", "b"}) || o.Model.Window.Mirror || !o.SaveProbabilities || !o.Continue {
		t.Errorf("two checkpoints, --disable-tta: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"--fold", "0", "1", "2"}, {"--fold", "0,1", "-f", "2"}, {"--folds", "0,1,2"}} {
		o, err = capture(t, NewCmdPredict, append([]string{"--model-dir", "runs/x", "-i", "in", "-o", "out", "--no-mirror", "--run-id", "1", "--checkpoint-name", "best"}, args...)...)
		if err != nil || !slices.Equal(o.Folds, []int{0, 1, 2}) || o.ModelDir != "runs/x" || o.RunID != 1 || o.CheckpointName != "best" || o.Model.Window.Mirror {
			t.Errorf("%v: %+v, %v", args, o, err)
		}
	}
	if o, err = capture(t, NewCmdPredict, "--model-dir", "r", "-i", "in", "-o", "out", "--fold", "all"); err != nil || !slices.Equal(o.Folds, []int{-1}) {
		t.Errorf("--fold all: %+v, %v", o, err)
	}
	for args, want := range map[string]string{
		"--checkpoint ck --input a.nii.gz":                "--output",
		"--checkpoint ck --input a --output b --batch -1": "--batch",
		"-i a -o b":                                       "give --checkpoint",
		"--checkpoint ck -i a -o b --fold 1":              "give --model-dir too",
		"--model-dir r -i a -o b --fold 1 x":              `--fold "x"`,
		"--model-dir r -i a -o b --fold 1,1":              "given twice",
		"--model-dir r -i a -o b --checkpoint-name final": "want best or last",
		"--checkpoint ck -i a -o b extra":                 `unexpected argument "extra"`,
		"--model-dir r -i a -o b --run-id -1":             "--run-id -1",
		"--checkpoint ck -i a -o b --overlap 1":           "--overlap",
	} {
		_, err = capture(t, NewCmdPredict, strings.Fields(args)...)
		wantErr(t, err, want)
	}
}

func TestNewCmdPlot(t *testing.T) {
	o, err := capture(t, NewCmdPlot, "runs/x")
	if err != nil || o.RunDir != "runs/x" {
		t.Fatalf("plot options %+v, %v", o, err)
	}
	_, err = capture(t, NewCmdPlot)
	wantErr(t, err, "arg")
}

func TestNewCmdInfo(t *testing.T) {
	o, err := capture(t, NewCmdInfo, "--json", "a.nii", "b.nii.gz")
	if err != nil || !o.JSON || len(o.Files) != 2 || o.MaxGzipBytes <= 0 {
		t.Fatalf("info options %+v, %v", o, err)
	}
	_, err = capture(t, NewCmdInfo)
	wantErr(t, err, "arg")
	_, err = capture(t, NewCmdInfo, "--max-gzip-bytes", "0", "a.nii")
	wantErr(t, err, "--max-gzip-bytes")
}

func TestNewCmdPrepare(t *testing.T) {
	cfg := writeConfig(t, "  store_codec: raw\ntrain:\n  patch_size: [16, 16, 16]\n")
	o, err := capture(t, NewCmdPrepare, "--config", cfg, "--workers", "3", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if o.Workers != 3 || !o.Quiet || o.Config.Data.StoreCodec != "raw" {
		t.Errorf("prepare options: %+v", o)
	}
	_, err = capture(t, NewCmdPrepare)
	wantErr(t, err, "config")
	_, err = capture(t, NewCmdPrepare, "--config", cfg, "--workers", "-1")
	wantErr(t, err, "--workers")
}

func TestNewCmdBenchData(t *testing.T) {
	cfg := writeConfig(t, "seed: 51\ntrain:\n  iterations_per_epoch: 0\n  patch_size: [16, 16, 16]\n  batch_size: 2\n")
	o, err := capture(t, NewCmdBenchData, "--config", cfg, "--workers", "0,2,auto", "--source", "gz", "--digest", "--consumer-ms", "50",
		"--patch", "8,16,24", "--batch", "3", "--epochs", "3", "--repeats", "2", "--iterations", "4")
	if err != nil {
		t.Fatal(err)
	}
	b := o.Bench
	if len(b.Workers) != 3 || b.Workers[2] != -1 || b.Source != "gz" || !b.Digest || b.ConsumerMs != 50 || b.Epochs != 3 ||
		b.Repeats != 2 || b.Iterations != 4 || o.Config.Train.PatchSize != [3]int{8, 16, 24} || o.Config.Train.BatchSize != 3 || o.Config.Seed != 51 {
		t.Errorf("bench-data options: %+v, train %+v", b, o.Config.Train)
	}
	for args, sub := range map[string]string{
		"--workers x":  "--workers",
		"--source s3":  "--source",
		"--patch 8,8":  "--patch",
		"--batch 0":    "train.batch_size",
		"--epochs 0":   "--epochs",
		"--repeats -1": "--repeats",
	} {
		_, err := capture(t, NewCmdBenchData, append([]string{"--config", cfg}, strings.Fields(args)...)...)
		wantErr(t, err, sub)
	}
}

func TestNewCmdBenchStep(t *testing.T) {
	o, err := capture(t, NewCmdBenchStep)
	if err != nil {
		t.Fatal(err)
	}
	ref := config.Default().Model
	if o.Bench.Batch != 2 || o.Bench.Patch != [3]int{64, 64, 64} || o.Bench.Steps != 12 || o.Bench.Warmup != 3 || o.Device != "cpu" ||
		len(o.Model.Features) != 4 || o.Model.Features[3] != ref.Features[3] {
		t.Errorf("bench-step defaults: %+v", o)
	}
	cfg := writeConfig(t, "model:\n  features: [8, 16, 32]\n  num_classes: 4\ntrain:\n  patch_size: [16, 16, 16]\n")
	o, err = capture(t, NewCmdBenchStep, "--config", cfg, "--patch", "40", "--batch", "1", "--threads", "2", "--json", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Model.Features) != 3 || o.Model.NumClasses != 4 || o.Bench.Patch != [3]int{40, 40, 40} || o.Bench.Batch != 1 ||
		o.Threads != 2 || !o.JSON || o.Bench.Seed != 9 {
		t.Errorf("bench-step options: %+v", o)
	}
	for args, sub := range map[string]string{
		"--patch 1,2":    "--patch",
		"--threads -1":   "--threads",
		"--steps 0":      "--steps",
		"--device cuda:": "--device",
	} {
		_, err := capture(t, NewCmdBenchStep, strings.Fields(args)...)
		wantErr(t, err, sub)
	}
}

func TestNewCmdExport(t *testing.T) {
	o, err := capture(t, NewCmdExport, "--checkpoint", "ck", "--onnx", "m.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if o.Checkpoint != "ck" || o.ONNX != "m.onnx" || o.Version != "test" || o.OpenDevice == nil {
		t.Errorf("export options: %+v", o)
	}
	_, err = capture(t, NewCmdExport, "--onnx", "m.onnx")
	wantErr(t, err, "--checkpoint")
	_, err = capture(t, NewCmdExport, "--checkpoint", "ck")
	wantErr(t, err, "--onnx")
	_, err = capture(t, NewCmdExport, "--checkpoint", "ck", "--onnx", "m.onnx", "extra")
	wantErr(t, err, "extra")
}

// TestZeroFlagsNameTheFlag: a flag given as 0 where 0 means nothing is an
// error naming the flag (and the key it sets), not the config's default
// in its place; a bad value in the file is named by key and line.
func TestZeroFlagsNameTheFlag(t *testing.T) {
	cfg := writeConfig(t, "train:\n  epochs: 7\n  patch_size: [16, 16, 16]\n")
	for args, want := range map[string][]string{
		"--epochs 0":              {"--epochs 0: train.epochs: 0, want ≥ 1"},
		"--batch-size 0":          {"--batch-size 0: train.batch_size: 0, want ≥ 1"},
		"--epochs 0 --threads -1": {"--epochs 0: train.epochs", "--threads -1: threads"},
		"--fold 9":                {"--fold 9: data.fold"},
	} {
		_, err := capture(t, NewCmdTrain, append([]string{"--config", cfg}, strings.Fields(args)...)...)
		for _, w := range want {
			wantErr(t, err, w)
		}
	}
	_, err := capture(t, NewCmdBenchData, "--config", cfg, "--batch", "0")
	wantErr(t, err, "--batch 0: train.batch_size: 0")
	// writeConfig puts the dataset on lines 1–2.
	bad := writeConfig(t, "train:\n  batch_size: 0\n  patch_size: [16, 16, 16]\n")
	_, err = capture(t, NewCmdTrain, "--config", bad)
	wantErr(t, err, "line 4: train.batch_size: 0, want ≥ 1")
	short := writeConfig(t, "train:\n  patch_size: [16, 16]\n")
	_, err = capture(t, NewCmdTrain, "--config", short)
	wantErr(t, err, "line 4: train.patch_size: 2 values, want 3")
}

// TestNewCmdTrainInitFlags: --init-weights and --init-mismatch override
// train.init_weights and train.init_mismatch; the flag's path is made
// absolute (the run records it) and marks the options as given on the
// command line, the key alone does not; a bad policy names the flag and
// the key.
func TestNewCmdTrainInitFlags(t *testing.T) {
	cfg := writeConfig(t, "train:\n  patch_size: [16, 16, 16]\n  init_weights: pre.safetensors\n")
	o, err := capture(t, NewCmdTrain, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Train.InitWeights != filepath.Join(filepath.Dir(cfg), "pre.safetensors") || o.Config.Train.InitMismatch != "error" || o.InitWeightsFlag {
		t.Errorf("the key: %+v, flag %v", o.Config.Train, o.InitWeightsFlag)
	}
	wd, _ := os.Getwd()
	o, err = capture(t, NewCmdTrain, "--config", cfg, "--init-weights", "w/model.safetensors", "--init-mismatch", "skip")
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Train.InitWeights != filepath.Join(wd, "w", "model.safetensors") || o.Config.Train.InitMismatch != "skip" || !o.InitWeightsFlag {
		t.Errorf("the flags: %+v, flag %v", o.Config.Train, o.InitWeightsFlag)
	}
	if o, err = capture(t, NewCmdTrain, "--config", cfg, "--init-weights", ""); err != nil || o.Config.Train.InitWeights != "" || o.InitWeightsFlag {
		t.Errorf("--init-weights '' (none): %+v, %v", o.Config.Train, err)
	}
	_, err = capture(t, NewCmdTrain, "--config", cfg, "--init-mismatch", "ignore")
	wantErr(t, err, `--init-mismatch ignore: train.init_mismatch: "ignore"`)
}

// TestConfigShorthand: every command that takes --config takes -c for it
// (and every command whose output is one flag takes -o for it), parsed in
// process into the options the command runs with.
func TestConfigShorthand(t *testing.T) {
	f, _, _ := testFactory()
	var withConfig, withOutput []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if fl := c.Flags().Lookup("config"); fl != nil {
			withConfig = append(withConfig, c.Name())
			if fl.Shorthand != "c" {
				t.Errorf("%s: --config has shorthand %q, want c", c.CommandPath(), fl.Shorthand)
			}
		}
		for _, name := range []string{"output", "output-dir", "onnx"} {
			if fl := c.Flags().Lookup(name); fl != nil {
				withOutput = append(withOutput, c.Name()+" --"+name)
				if fl.Shorthand != "o" {
					t.Errorf("%s: --%s has shorthand %q, want o", c.CommandPath(), name, fl.Shorthand)
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewCmdRoot(f))
	slices.Sort(withConfig)
	if want := []string{"bench-data", "bench-step", "demo", "prepare", "sweep", "train"}; !slices.Equal(withConfig, want) {
		t.Errorf("commands taking --config: %v, want %v (add the new one to the checks below)", withConfig, want)
	}
	slices.Sort(withOutput)
	if want := []string{"demo --output-dir", "determine --output", "ensemble --output", "evaluate --output", "export --onnx", "export-model --output", "find-best --output", "import-nnunet --output", "install-model --output", "plan --output", "predict --output", "train --output-dir", "validate --output"}; !slices.Equal(withOutput, want) {
		t.Errorf("commands with an output flag: %v, want %v", withOutput, want)
	}

	cfg := writeConfig(t, "seed: 13\nmodel:\n  features: [8, 16, 32]\ntrain:\n  patch_size: [16, 16, 16]\n")
	if o, err := capture(t, NewCmdTrain, "-c", cfg, "-o", "out"); err != nil || o.ConfigPath != cfg || o.Config.Seed != 13 || o.Config.OutputDir != "out" {
		t.Errorf("train -c -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdPrepare, "-c", cfg); err != nil || o.Config.Seed != 13 {
		t.Errorf("prepare -c: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdBenchData, "-c", cfg); err != nil || o.ConfigPath != cfg || o.Config.Seed != 13 {
		t.Errorf("bench-data -c: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdBenchStep, "-c", cfg); err != nil || len(o.Model.Features) != 3 {
		t.Errorf("bench-step -c: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdSweep, "-c", cfg); err != nil || o.ConfigPath != cfg || o.Config.Seed != 13 {
		t.Errorf("sweep -c: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdValidate, "--checkpoint", "ck", "-o", "preds"); err != nil || o.Output != "preds" {
		t.Errorf("validate -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdPredict, "--checkpoint", "ck", "-i", "a.nii", "-o", "b.nii"); err != nil || o.Output != "b.nii" {
		t.Errorf("predict -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdExport, "--checkpoint", "ck", "-o", "m.onnx"); err != nil || o.ONNX != "m.onnx" {
		t.Errorf("export -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdExportModel, "--model-dir", "runs/x", "-o", "m.zip"); err != nil || o.Output != "m.zip" || !slices.Equal(o.Checkpoints, []string{"last"}) {
		t.Errorf("export-model -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdInstallModel, "m.zip", "-o", "runs"); err != nil || o.Output != "runs" || o.Zip != "m.zip" {
		t.Errorf("install-model -o: %+v, %v", o, err)
	}
	if o, err := capture(t, NewCmdImportNNUNet, "model", "--data", "raw", "-o", "runs", "--fold", "0,1"); err != nil || o.Output != "runs" || o.Model != "model" || !slices.Equal(o.Folds, []int{0, 1}) {
		t.Errorf("import-nnunet -o: %+v, %v", o, err)
	}
	// demo runs from the repository root, with its own config by default.
	t.Chdir(testutil.RepoRoot())
	if o, err := capture(t, NewCmdDemo, "-c", cfg, "-o", "out"); err != nil || o.Train.ConfigPath != cfg || o.Train.Config.Seed != 13 {
		t.Errorf("demo -c: %+v, %v", o, err)
	}
}

// TestValidateChecksOutputFirst: a --output that is a file is refused,
// naming it, before the checkpoint is even looked at.
func TestValidateChecksOutputFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, _ := testFactory()
	err := validateRun(context.Background(), &ValidateOptions{IO: f.IO, OpenDevice: f.OpenDevice, Output: file,
		Model: modelFlags{Checkpoint: filepath.Join(t.TempDir(), "missing")}})
	wantErr(t, err, "--output "+file+": is a file")
}
