package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigsLoadAndRoundTrip loads every bundled config and checks that
// its YAML (written into run directories and checkpoints, defaults
// included) reads back to the same config.
func TestConfigsLoadAndRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no configs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			text, err := c.YAML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse([]byte(text), "resolved", "")
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if err := back.Validate(); err != nil {
				t.Fatal(err)
			}
			again, err := back.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if again != text {
				t.Fatalf("resolved config does not round-trip:\n%s\n---\n%s", text, again)
			}
			if back.Data.Workers != c.Data.Workers || back.Data.CacheBytes != c.Data.CacheBytes || back.Train.PatchSize != c.Train.PatchSize {
				t.Fatalf("fields differ after the round trip")
			}
		})
	}
}

func TestConfigUnknownKeyNamesLine(t *testing.T) {
	doc := "experiment: x\ntrain:\n  epochs: 2\n  epoch_count: 3\n"
	_, err := Parse([]byte(doc), "bad.yaml", "")
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "epoch_count") {
		t.Fatalf("err = %v", err)
	}
	doc = "model:\n  in_channels: 1\n  featurez: [1]\n"
	if _, err := Parse([]byte(doc), "bad.yaml", ""); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v", err)
	}
	doc = "augment:\n  preset: light\n  mirrror: {}\n"
	if _, err := Parse([]byte(doc), "bad.yaml", ""); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateRejectsBadValues(t *testing.T) {
	c, _ := Parse([]byte("device: tpu\ntrain:\n  patch_size: [8, 0, 8]\nvalidation:\n  mode: full\n"), "x", "")
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"device", "patch_size", "validation.mode"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestValidateFinalValidation: validation.final takes none, last or best
// (best only where a best checkpoint is kept), and final_probabilities
// needs a final validation to write them in.
func TestValidateFinalValidation(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"validation:\n  final: last\n  final_probabilities: true\n", ""},
		{"validation:\n  final: best\n", ""},
		{"validation:\n  final: none\n", ""},
		{"validation:\n  final: final\n", `validation.final: "final", want last`},
		{"validation:\n  final: best\ncheckpoint:\n  best_mode: \"\"\n", "validation.final: best, but checkpoint.best_mode is empty"},
		{"validation:\n  final_probabilities: true\n", "validation.final_probabilities: true, but validation.final is none"},
	} {
		c, err := Parse([]byte("data:\n  dataset: d\ntrain:\n  patch_size: [16, 16, 16]\n"+tc.doc), "x", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		err = c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one saying %q", tc.doc, err, tc.want)
		}
	}
	if got := Default().Validation.Final; got != FinalNone {
		t.Errorf("default validation.final %q, want none", got)
	}
}

func TestValidateChecksPatchAgainstStrides(t *testing.T) {
	c, _ := Parse([]byte("data:\n  dataset: d\nmodel:\n  features: [4, 8, 16]\ntrain:\n  patch_size: [10, 16, 16]\n"), "x", "")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "divisible by 4") {
		t.Fatalf("err = %v", err)
	}
}

// TestLossZeroWeightsRefused: pos_weight and cldice_smooth given as 0 are
// errors naming the key, not silently degenerate losses.
func TestLossZeroWeightsRefused(t *testing.T) {
	for key, want := range map[string]string{
		"pos_weight":    "loss.pos_weight: 0, want > 0",
		"cldice_smooth": "loss.cldice_smooth: 0, want > 0",
	} {
		l := Default().Loss
		if key == "pos_weight" {
			l.PosWeight = 0
		} else {
			l.ClDiceSmooth = 0
		}
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s 0: %v", key, err)
		}
	}
}

// TestLossIgnoreLabel: loss.ignore_label is accepted at or above
// model.num_classes and refused inside the classes, out of 1..255, and with
// the losses that have no mask (bce, clDice), each error naming the key.
func TestLossIgnoreLabel(t *testing.T) {
	intp := func(n int) *int { return &n }
	cfg := func(n int, name string) *Config {
		c := Default()
		c.Model.NumClasses = 3
		c.Loss.Name = name
		c.Loss.IgnoreLabel = intp(n)
		return &c
	}
	for _, n := range []int{3, 4, 255} {
		if err := cfg(n, "dice_ce").Validate(); err != nil && strings.Contains(err.Error(), "ignore_label") {
			t.Errorf("ignore_label %d with 3 classes: %v", n, err)
		}
	}
	for _, tc := range []struct {
		n    int
		name string
		want string
	}{
		{2, "dice_ce", "loss.ignore_label: 2 is a class"},
		{0, "dice_ce", "loss.ignore_label: 0, want a label value in 1..255"},
		{256, "ce", "loss.ignore_label: 256, want a label value in 1..255"},
		{3, "bce", "loss.ignore_label: not supported with loss.name bce"},
		{3, "cldice", "loss.ignore_label: not supported with clDice"},
	} {
		err := cfg(tc.n, tc.name).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ignore_label %d, loss %s: %v, want %q", tc.n, tc.name, err, tc.want)
		}
	}
	if got := Default().Loss.Ignore(); got != -1 {
		t.Errorf("default Ignore() = %d, want -1", got)
	}
}

// TestMultiLabelTargets: model.targets multi_label needs loss dice_bce and
// the reverse, at most 7 classes and an ignore label of 255, each error
// naming the key; a consistent config passes.
func TestMultiLabelTargets(t *testing.T) {
	intp := func(n int) *int { return &n }
	cfg := func(mod func(*Config)) *Config {
		c := Default()
		c.Model.Targets, c.Model.NumClasses, c.Loss.Name = TargetsMultiLabel, 3, "dice_bce"
		mod(&c)
		return &c
	}
	// Default leaves the data and patch unset: only this test's keys count.
	mine := func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "model.") || strings.Contains(err.Error(), "loss."))
	}
	if err := cfg(func(*Config) {}).Validate(); mine(err) {
		t.Fatalf("multi_label with dice_bce: %v", err)
	}
	if err := cfg(func(c *Config) { c.Loss.IgnoreLabel = intp(255); c.Model.NumClasses = 7 }).Validate(); mine(err) {
		t.Fatalf("7 classes, ignore 255: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Model.NumClasses = 8 }, "model.num_classes: 8, but model.targets multi_label holds at most 7"},
		{func(c *Config) { c.Loss.IgnoreLabel = intp(4) }, "loss.ignore_label: 4, but dice_bce's multi-label labels are bit-packed"},
		{func(c *Config) { c.Loss.Name = "dice_ce" }, "loss.name: dice_ce, but model.targets is multi_label"},
		{func(c *Config) { c.Model.Targets = TargetsSoftmax }, "loss.name: dice_bce trains multi-label sigmoid outputs; set model.targets: multi_label"},
		{func(c *Config) { c.Model.Targets = "regions" }, `model.targets: "regions", want softmax or multi_label`},
		{func(c *Config) { c.Loss.ClDiceWeight = new(float64); *c.Loss.ClDiceWeight = 1 }, "loss.cldice_weight: 1, not supported with dice_bce"},
		{func(c *Config) { c.Model.RegionsClassOrder = []int{1, 2} }, "model.regions_class_order: 2 values, model.num_classes is 3"},
		{func(c *Config) { c.Model.RegionsClassOrder = []int{1, 0, 2} }, "model.regions_class_order: [1 0 2]: 0 is not a label value in 1..255"},
		{func(c *Config) {
			c.Model.RegionsClassOrder, c.Model.Targets, c.Loss.Name = []int{1, 2, 3}, TargetsSoftmax, "dice_ce"
		}, "model.regions_class_order: [1 2 3], but regions train sigmoid outputs"},
	} {
		err := cfg(tc.mod).Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}
