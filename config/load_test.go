package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
