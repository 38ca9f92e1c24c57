package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// minimal is the smallest valid config: a dataset and a patch size.
const minimal = "data:\n  dataset: d\ntrain:\n  patch_size: [16, 16, 16]\n"

func TestAbsentKeysTakeTheDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal), "x", "")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Data.Dataset = "d"
	want.Train.PatchSize = [3]int{16, 16, 16}
	if !reflect.DeepEqual(*c, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", *c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Train.Epochs != 1000 || c.Train.IterationsPerEpoch != 250 || c.Data.OversampleForeground != 0.33 || c.Validation.Overlap != 0.5 {
		t.Errorf("nnU-Net's defaults: epochs %d, iterations %d, oversample %g, overlap %g",
			c.Train.Epochs, c.Train.IterationsPerEpoch, c.Data.OversampleForeground, c.Validation.Overlap)
	}
}

// parseWithDataset parses doc and gives it a dataset and patch size when
// it has none, so Validate speaks only of what doc sets.
func parseWithDataset(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc), "x", "")
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	if c.Data.Dataset == "" {
		c.Data.Dataset = "d"
	}
	if c.Train.PatchSize == ([3]int{}) {
		c.Train.PatchSize = [3]int{16, 16, 16}
	}
	return c
}

// TestZeroMeansZero: a setting written as 0 is 0, not "the default" —
// valid where 0 means something, an error naming the key where not.
func TestZeroMeansZero(t *testing.T) {
	c := parseWithDataset(t, "data:\n  oversample_foreground: 0\n  cache_bytes: 0\ntrain:\n  iterations_per_epoch: 0\nvalidation:\n  overlap: 0\n")
	if c.Data.OversampleForeground != 0 || c.Data.CacheBytes != 0 || c.Train.IterationsPerEpoch != 0 || c.Validation.Overlap != 0 {
		t.Errorf("explicit zeros: oversample %g, cache %d, iterations %d, overlap %g",
			c.Data.OversampleForeground, c.Data.CacheBytes, c.Train.IterationsPerEpoch, c.Validation.Overlap)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("zeros that mean something: %v", err)
	}
	for doc, key := range map[string]string{
		"train:\n  batch_size: 0\n":            "train.batch_size",
		"train:\n  epochs: 0\n":                "train.epochs",
		"checkpoint:\n  keep_recent: 0\n":      "checkpoint.keep_recent",
		"data:\n  prefetch_factor: 0\n":        "data.prefetch_factor",
		"train:\n  log_every_seconds: 0\n":     "train.log_every_seconds",
		"data:\n  normalization: []\n":         "data.normalization",
		"experiment: \"\"\n":                   "experiment",
		"output_dir: \"\"\n":                   "output_dir",
		"train:\n  iterations_per_epoch: -1\n": "train.iterations_per_epoch",
	} {
		if err := parseWithDataset(t, doc).Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", doc, err, key)
		}
	}
}

func TestUnknownKeysNameTheirLine(t *testing.T) {
	for doc, want := range map[string]string{
		"experiment: x\ntrain:\n  epochs: 2\n  epoch_count: 3\n":        "line 4",
		"model:\n  in_channels: 1\n  featurez: [1]\n":                   "line 3",
		"augment:\n  preset: light\n  mirrror: {}\n":                    "line 3",
		"data:\n  cases:\n    - {image: a.nii}\n    - {imgae: b.nii}\n": "line 4",
		"sead: 3\n":                            "line 1",
		"data:\n  dataset: d\n  prefetch: 3\n": "line 3",
		"checkpoint:\n  best: max\n":           "line 2",
		"validation:\n  mode: patch\n  overlap: 0.5\n  mirror: true\n  hd_95: true\n": "line 5",
	} {
		_, err := Parse([]byte(doc), "bad.yaml", "")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: %v, want an error naming bad.yaml and %s", doc, err, want)
		}
	}
	if _, err := Parse([]byte("- a\n- b\n"), "list.yaml", ""); err == nil || !strings.Contains(err.Error(), "mapping") {
		t.Errorf("a list as the whole config: %v", err)
	}
}

// TestMovedKeys: configs written before one key per setting (a run's or a
// checkpoint's config.yaml) still load; a conflict is an error naming both.
func TestMovedKeys(t *testing.T) {
	c, err := Parse([]byte("data:\n  dataset: d\n  seed: 51\n  iterations_per_epoch: 0\ntrain:\n  patch_size: [8, 8, 8]\n"), "old.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 51 || c.Train.IterationsPerEpoch != 0 || len(c.Warnings) != 2 {
		t.Errorf("moved: seed %d, iterations %d, warnings %q", c.Seed, c.Train.IterationsPerEpoch, c.Warnings)
	}
	c, err = Parse([]byte("seed: 7\ndata:\n  dataset: d\n  seed: 7\n  iterations_per_epoch: 60\ntrain:\n  iterations_per_epoch: 60\n  patch_size: [8, 8, 8]\n"), "same.yaml", "")
	if err != nil || c.Seed != 7 || c.Train.IterationsPerEpoch != 60 {
		t.Errorf("repeated with the same value: %+v, %v", c, err)
	}
	_, err = Parse([]byte("seed: 7\ndata:\n  dataset: d\n  seed: 8\n"), "clash.yaml", "")
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "data.seed") {
		t.Errorf("conflicting seeds: %v", err)
	}
	if text, _ := c.YAML(); strings.Count(text, "seed:") != 1 || strings.Count(text, "iterations_per_epoch:") != 1 {
		t.Errorf("the written config repeats a setting:\n%s", text)
	}
}

func TestPathsFollowTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "run.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("output_dir: out\ndata:\n  store: /abs/store\n  splits_file: s.json\n  cases:\n    - {image: [a.nii, b.nii], label: l.nii}\ntrain:\n  patch_size: [8, 8, 8]\n"), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Dir(p)
	if c.OutputDir != filepath.Join(sub, "out") || c.Data.Store != "/abs/store" || c.Data.SplitsFile != filepath.Join(sub, "s.json") {
		t.Errorf("paths: output %q store %q splits %q", c.OutputDir, c.Data.Store, c.Data.SplitsFile)
	}
	cs := c.Data.Cases[0]
	if cs.Image[0] != filepath.Join(sub, "a.nii") || cs.Image[1] != filepath.Join(sub, "b.nii") || cs.Label != filepath.Join(sub, "l.nii") {
		t.Errorf("case files %v %q", cs.Image, cs.Label)
	}
	// The default output_dir is not in the file: it stays relative to the
	// working directory.
	os.WriteFile(p, []byte("data:\n  dataset: ds\n  cases:\n    - {image: a.nii}\ntrain:\n  patch_size: [8, 8, 8]\n"), 0o644)
	if c, err = Load(p); err != nil {
		t.Fatal(err)
	}
	if c.OutputDir != "runs" || c.Data.Dataset != filepath.Join(sub, "ds") || c.Data.Cases[0].Image[0] != "a.nii" {
		t.Errorf("output %q, dataset %q, case file %q (relative to the dataset when there is one)", c.OutputDir, c.Data.Dataset, c.Data.Cases[0].Image[0])
	}
}

func TestChanges(t *testing.T) {
	old, _ := Parse([]byte(minimal), "a", "")
	now, _ := Parse([]byte(minimal), "b", "")
	lr := 0.005
	now.Train.Epochs, now.Optim.LR = 2, &lr
	a, _ := old.YAML()
	b, _ := now.YAML()
	got := Changes(a, b)
	if len(got) != 2 || !strings.Contains(got[0], "optim.lr: 0.01 → 0.005") || !strings.Contains(got[1], "train.epochs: 1000 → 2") {
		t.Errorf("changes %q", got)
	}
	if got := Changes("", b); len(got) != 1 || !strings.Contains(got[0], "missing") {
		t.Errorf("no old config: %q", got)
	}
}

// TestOlderRunConfigLoads: the config.yaml a run saved before one key per
// setting (testdata: the demo's, written by commit fc2e5f8) still loads,
// with the moved keys folded into their replacements.
func TestOlderRunConfigLoads(t *testing.T) {
	b, err := os.ReadFile("testdata/run_config_fc2e5f8.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(b, "run_config_fc2e5f8.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 42 || c.Train.IterationsPerEpoch != 60 || c.Model.NumClasses != 3 || len(c.Warnings) != 3 {
		t.Errorf("seed %d, iterations %d, classes %d, notes %q", c.Seed, c.Train.IterationsPerEpoch, c.Model.NumClasses, c.Warnings)
	}
	if err := c.Model.Validate(); err != nil {
		t.Error(err)
	}
	if err := c.Data.Validate(); err != nil {
		t.Error(err)
	}
	// It wrote keep_recent 0 for "2", which is no longer a valid value.
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "checkpoint.keep_recent") {
		t.Errorf("keep_recent 0: %v", err)
	}
}

// TestFixedLengthListsNameKeyAndLine: a list of the wrong length (or a
// number where a list belongs) for patch_size, betas, a kernel size or an
// augmentation range is an error naming the file, the key and its line;
// yaml.v3 alone says "invalid array: want 3 elements but got 2".
func TestFixedLengthListsNameKeyAndLine(t *testing.T) {
	for doc, want := range map[string]string{
		"data:\n  dataset: d\ntrain:\n  patch_size: [16, 16]\n":                     "line 4: train.patch_size: 2 values, want 3",
		"train:\n  patch_size: [16, 16, 16, 16]\n":                                  "line 2: train.patch_size: 4 values, want 3",
		"train:\n  epochs: 3\n  patch_size: 64\n":                                   `line 3: train.patch_size: want a list of 3 values, got "64"`,
		"optim:\n  betas: [0.9]\n":                                                  "line 2: optim.betas: 1 values, want 2",
		"model:\n  kernel_sizes:\n    - [3, 3, 3]\n    - [3, 3]\n":                  "line 4: model.kernel_sizes[1]: 2 values, want 3",
		"augment:\n  preset: light\n  rotation:\n    degrees: [-30, 0, 30]\n":       "line 4: augment.rotation.degrees: 3 values, want 2",
		"data:\n  dataset: d\ntrain:\n  patch_size:\n    - 16\n    - 16\nseed: 1\n": "line 5: train.patch_size: 2 values, want 3",
	} {
		_, err := Parse([]byte(doc), "run.yaml", "")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "run.yaml") {
			t.Errorf("%q: %v, want an error naming run.yaml and %q", doc, err, want)
		}
	}
}

// TestTypeErrorsNameTheKey: a value of the wrong type is named by its key
// as well as its line.
func TestTypeErrorsNameTheKey(t *testing.T) {
	_, err := Parse([]byte("data:\n  dataset: d\ntrain:\n  batch_size: two\n"), "run.yaml", "")
	if err == nil || !strings.Contains(err.Error(), "line 4: train.batch_size: cannot unmarshal") {
		t.Errorf("batch_size: two: %v", err)
	}
}

// TestExplicitZeroIsNotTheDefault: the keys whose zero value stands for
// "not given" (model.levels, base_features and max_features, which derive
// the features; data.ct_std, computed when absent) are an error naming
// key and line when a file gives 0 where it would be used, instead of
// quietly becoming the default. Where the 0 is not used (the form a run's
// saved config.yaml writes), it loads; a given ct_mean of 0 is kept as a
// mean.
func TestExplicitZeroIsNotTheDefault(t *testing.T) {
	for doc, want := range map[string]string{
		"model:\n  levels: 0\n":                                         "line 2: model.levels: 0, want ≥ 1",
		"model:\n  features: [8, 16]\n  levels: 0\n":                    "line 3: model.levels: 0, want ≥ 1",
		"model:\n  levels: 5\n  base_features: 0\n":                     "line 3: model.base_features: 0, want ≥ 1",
		"model:\n  max_features: 0\n":                                   "line 2: model.max_features: 0, want ≥ 1",
		"data:\n  normalization: ct\n  ct_std: 0\n":                     "line 3: data.ct_std: 0, a std must be > 0",
		"data:\n  normalization: [zscore, ct]\n  ct_std: 0.0\n":         "line 3: data.ct_std: 0.0",
		"model:\n  levels: -1\n  base_features: 0\n  max_features: 8\n": "line 3: model.base_features: 0",
	} {
		_, err := Parse([]byte(doc), "run.yaml", "")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "run.yaml") {
			t.Errorf("%q: %v, want an error naming run.yaml and %q", doc, err, want)
		}
	}
	for _, doc := range []string{
		"model:\n  features: [8, 16]\n  base_features: 0\n  max_features: 0\n  levels: 2\n",
		"data:\n  normalization: zscore\n  ct_mean: 0\n  ct_std: 0\n",
		"model:\n  levels: 3\n  base_features: 8\n",
	} {
		if _, err := Parse([]byte(doc), "saved.yaml", ""); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
	c, err := Parse([]byte("data:\n  normalization: ct\n  ct_mean: 0\n"), "x", "")
	if err != nil || !c.Data.CTMeanGiven || c.Data.CTMean != 0 {
		t.Errorf("ct_mean: 0 given: %+v, %v", c.Data, err)
	}
	if c, _ := Parse([]byte("data:\n  normalization: ct\n"), "x", ""); c.Data.CTMeanGiven {
		t.Error("ct_mean absent, yet given")
	}
}

// TestLoadNamesTheLine: Load's validation errors carry the line of the
// key the file wrote (a key left at its default has none).
func TestLoadNamesTheLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.yaml")
	os.WriteFile(p, []byte("data:\n  dataset: d\ntrain:\n  patch_size: [16, 16, 16]\n  batch_size: 0\ncheckpoint:\n  keep_recent: 0\n"), 0o644)
	_, err := Load(p)
	for _, want := range []string{"run.yaml", "line 5: train.batch_size: 0, want ≥ 1", "line 7: checkpoint.keep_recent: 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: %v, want %q", err, want)
		}
	}
}

// TestYAMLFloatsReadAsFloatsInYAML11: every float config.yaml holds is
// written the way YAML 1.1 (PyYAML's) reads a float — with a dot, 1.0e-05
// rather than 1e-05, which PyYAML reads as a string — and the file still
// loads back to the same config.
func TestYAMLFloatsReadAsFloatsInYAML11(t *testing.T) {
	c := Default()
	wd := 3e-5
	c.Optim.WeightDecay = &wd
	c.Data.Dataset, c.Train.PatchSize = "d", [3]int{16, 16, 16}
	text, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	// YAML 1.1's float (yaml.org/type/float.html, base 10 form).
	yaml11 := regexp.MustCompile(`^[-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$`)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(*yaml.Node)
	walk = func(x *yaml.Node) {
		if x.Kind == yaml.ScalarNode && x.Tag == "!!float" {
			n++
			if !yaml11.MatchString(x.Value) {
				t.Errorf("line %d: float %q is not a YAML 1.1 float (PyYAML reads it as a string or an int)", x.Line, x.Value)
			}
		}
		for _, k := range x.Content {
			walk(k)
		}
	}
	walk(&doc)
	if n == 0 || !strings.Contains(text, "3.0e-05") {
		t.Errorf("%d floats; weight_decay not written as 3.0e-05:\n%s", n, text)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Optim.WeightDecay == nil || *back.Optim.WeightDecay != 3e-5 || back.Model.NegativeSlope != c.Model.NegativeSlope {
		t.Errorf("read back weight_decay %v, negative_slope %v", back.Optim.WeightDecay, back.Model.NegativeSlope)
	}
}

// TestLoggingTensorBoardKey: logging.tensorboard is off unless the file
// turns it on, survives the resolved config's round trip, and a mistyped
// key in the section is an error naming its line. A config saved before
// the section existed means off, and reads as unchanged.
func TestLoggingTensorBoardKey(t *testing.T) {
	off := parseWithDataset(t, minimal)
	if off.Logging.TensorBoard {
		t.Fatal("tensorboard on by default")
	}
	on := parseWithDataset(t, minimal+"logging:\n  tensorboard: true\n")
	if !on.Logging.TensorBoard {
		t.Fatal("logging.tensorboard: true not read")
	}
	if err := on.Validate(); err != nil {
		t.Fatal(err)
	}
	text, _ := on.YAML()
	if !strings.Contains(text, "logging:\n    tensorboard: true\n") {
		t.Fatalf("resolved config lacks the key:\n%s", text)
	}
	back, err := Parse([]byte(text), "resolved", "")
	if err != nil || !back.Logging.TensorBoard {
		t.Fatalf("round trip: %v %+v", err, back.Logging)
	}
	if _, err := Parse([]byte(minimal+"logging:\n  tensorbord: true\n"), "x", ""); err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "tensorboard") {
		t.Fatalf("misspelt key: %v", err)
	}
	offText, _ := off.YAML()
	older := strings.Replace(offText, "logging:\n    tensorboard: false\n", "", 1)
	if older == offText {
		t.Fatalf("no logging section in\n%s", offText)
	}
	if got := Changes(older, offText); len(got) != 0 {
		t.Fatalf("a config without the section differs: %q", got)
	}
	if got := Changes(offText, text); len(got) != 1 || got[0] != "logging.tensorboard: false → true" {
		t.Fatalf("changes %q", got)
	}
}

// TestTrainInitKeys: train.init_weights is empty and train.init_mismatch
// is error unless the file says otherwise; a relative init_weights is
// relative to the file; an unknown policy is an error naming the key and
// its line; both survive the resolved config's round trip, and a config
// saved before the keys existed reads as unchanged.
func TestTrainInitKeys(t *testing.T) {
	def := parseWithDataset(t, minimal)
	if def.Train.InitWeights != "" || def.Train.InitMismatch != InitMismatchError {
		t.Fatalf("defaults: init_weights %q, init_mismatch %q", def.Train.InitWeights, def.Train.InitMismatch)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "ft.yaml")
	os.WriteFile(p, []byte(minimal+"  init_weights: w/model.safetensors\n  init_mismatch: skip\n"), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.InitWeights != filepath.Join(dir, "w", "model.safetensors") || c.Train.InitMismatch != InitMismatchSkip {
		t.Fatalf("init_weights %q (want it relative to the file), init_mismatch %q", c.Train.InitWeights, c.Train.InitMismatch)
	}
	text, _ := c.YAML()
	back, err := Parse([]byte(text), "resolved", "")
	if err != nil || back.Train.InitWeights != c.Train.InitWeights || back.Train.InitMismatch != InitMismatchSkip {
		t.Fatalf("round trip: %v %+v", err, back.Train)
	}
	os.WriteFile(p, []byte(minimal+"  init_mismatch: ignore\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "line 5: train.init_mismatch: \"ignore\"") {
		t.Fatalf("unknown policy: %v", err)
	}
	defText, _ := def.YAML()
	older := strings.Replace(defText, "    init_weights: \"\"\n    init_mismatch: error\n", "", 1)
	if older == defText {
		t.Fatalf("no init keys in\n%s", defText)
	}
	if got := Changes(older, defText); len(got) != 0 {
		t.Fatalf("a config without the keys differs: %q", got)
	}
}

// TestDataSeesIgnoreLabel: Parse copies loss.ignore_label into the data
// section, where a manifest's masks read it.
func TestDataSeesIgnoreLabel(t *testing.T) {
	c, err := Parse([]byte("loss:\n  ignore_label: 7\n"), "x", "")
	if err != nil || c.Data.IgnoreLabel != 7 {
		t.Fatalf("ignore_label 7: data sees %d (%v)", c.Data.IgnoreLabel, err)
	}
	if c, _ := Parse([]byte("data:\n  fold: 1\n"), "x", ""); c.Data.IgnoreLabel != 0 {
		t.Errorf("no ignore_label: data sees %d, want 0", c.Data.IgnoreLabel)
	}
}
