package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// parseData parses a data: section body through the whole loader.
func parseData(t *testing.T, body string) (Data, error) {
	t.Helper()
	doc := "data:\n  " + strings.ReplaceAll(strings.TrimSpace(body), "\n", "\n  ") + "\ntrain:\n  patch_size: [8, 8, 8]\n"
	c, err := Parse([]byte(doc), "test.yaml", "")
	if err != nil {
		return Data{}, err
	}
	return c.Data, c.Validate()
}

func TestDataSectionYAML(t *testing.T) {
	c, err := parseData(t, `
dataset: /data/x
workers: auto
cache_bytes: 512MiB
oversample_foreground: 0
normalization: [zscore]
watchdog_timeout: 30s
on_error: skip
`)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Workers.Auto || c.CacheBytes != 512<<20 || c.OversampleForeground != 0 || c.WatchdogTimeout != 30*time.Second || c.OnError != "skip" {
		t.Errorf("parsed %+v", c)
	}
	for in, want := range map[string]string{
		"dataset: x\nworkrs: 2":                      "line 3",
		"dataset: x\nworkers: many":                  "workers",
		"dataset: x\ncache_bytes: lots":              "byte size",
		"dataset: x\non_error: retry":                "on_error",
		"dataset: x\nsource: s3":                     "source",
		"dataset: x\nfold: 7":                        "fold",
		"dataset: x\nholdout_fraction: 1":            "data.holdout_fraction: 1,",
		"dataset: x\nholdout_fraction: -0.1":         "data.holdout_fraction: -0.1,",
		"dataset: x\nholdout_fraction: 0.2\nfold: 1": "data.fold: 1, with holdout_fraction 0.2",
	} {
		if _, err := parseData(t, in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error mentioning %q", in, err, want)
		}
	}
	for _, fold := range []int{0, -1} {
		c, err := parseData(t, fmt.Sprintf("dataset: x\nholdout_fraction: 0.2\nfold: %d", fold))
		if err != nil || c.HoldoutFraction != 0.2 || c.Fold != fold {
			t.Errorf("holdout_fraction 0.2, fold %d: %+v %v", fold, c, err)
		}
	}
	if Default().Data.HoldoutFraction != 0 {
		t.Error("the default is not k folds")
	}
	if w, _ := ParseWorkers("0"); !w.Set || w.N != 0 {
		t.Errorf("workers 0: %+v", w)
	}
	if Default().Data.WorkerCount() < 1 {
		t.Error("default workers < 1")
	}
}

func TestCTSettings(t *testing.T) {
	for _, in := range []string{
		"normalization: ct",
		"normalization: [ct]\nct_window: [-100, 300]",
		"normalization: [ct]\nct_std: 80\nct_mean: 40",
		"normalization: [ct]\nct_window: [-100, 300]\nct_mean: 40\nct_std: 80",
	} {
		if _, err := parseData(t, "dataset: x\n"+in); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	for in, key := range map[string]string{
		"ct_window: [300, -100]":       "data.ct_window",
		"ct_window: [1, 2, 3]":         "data.ct_window",
		"ct_window: [5]":               "data.ct_window",
		"ct_window: [-.inf, 10]":       "data.ct_window",
		"ct_std: -1":                   "data.ct_std",
		"ct_std: .nan":                 "data.ct_std",
		"ct_mean: .nan\nct_std: 1":     "data.ct_mean",
		"ct_window: [3, 3]\nct_std: 1": "data.ct_window",
	} {
		if _, err := parseData(t, "dataset: x\nnormalization: [ct]\n"+in); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", in, err, key)
		}
	}
}

func TestTargetSpacing(t *testing.T) {
	c, err := parseData(t, "dataset: x\ntarget_spacing: [3, 0.8, 0.8]")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Target(); p == nil || *p != [3]float64{3, 0.8, 0.8} {
		t.Errorf("target %v", p)
	}
	for _, in := range []string{
		"target_spacing: [1, 1]",
		"target_spacing: [1, 1, 1, 1]",
		"target_spacing: [0, 0, 0]",
		"target_spacing: [1, -2, 1]",
		"target_spacing: [-0.0001, 1, 1]",
		"target_spacing: [1, .nan, 1]",
		"target_spacing: [1, .inf, 1]",
		"target_spacing: []",
	} {
		if _, err := parseData(t, "dataset: x\n"+in); err == nil || !strings.Contains(err.Error(), "data.target_spacing") {
			t.Errorf("%s: %v, want an error naming data.target_spacing", in, err)
		}
	}
	if c, _ := parseData(t, "dataset: x"); c.Target() != nil {
		t.Error("absent target_spacing gives a target")
	}
	// 0 keeps each case's spacing along its axis (nnU-Net's 2d).
	c, err = parseData(t, "dataset: x\ntarget_spacing: [0, 0.8, 0.8]")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Target(); p == nil || *p != [3]float64{0, 0.8, 0.8} {
		t.Errorf("target %v", p)
	}
}

// TestSpacingUnit: spacing_unit parses in any spelling NormalizeUnit
// reads and is absent by default; a word that is not a length unit
// ("pixel", "second") names the key.
func TestSpacingUnit(t *testing.T) {
	for in, want := range map[string]string{"mm": "millimeter", "µm": "micrometer", "nanometer": "nanometer", "": ""} {
		doc := "dataset: x\ntarget_spacing: [1, 1, 1]"
		if in != "" {
			doc += "\nspacing_unit: " + in
		}
		c, err := parseData(t, doc)
		if err != nil || c.TargetUnit() != want || c.SpacingUnit != in {
			t.Errorf("spacing_unit %q: %q (%q), %v; want %q", in, c.TargetUnit(), c.SpacingUnit, err, want)
		}
	}
	for _, in := range []string{"pixel", "second", "furlong"} {
		if _, err := parseData(t, "dataset: x\nspacing_unit: "+in); err == nil || !strings.Contains(err.Error(), "data.spacing_unit") || !strings.Contains(err.Error(), in) {
			t.Errorf("spacing_unit %s: %v, want an error naming data.spacing_unit and %s", in, err, in)
		}
	}
}

// TestPreprocessingParitySettings: crop_to_nonzero, use_mask_for_norm and
// resample_order parse, default to today's behaviour, and bad values name
// their key.
func TestPreprocessingParitySettings(t *testing.T) {
	c, err := parseData(t, "dataset: x")
	if err != nil {
		t.Fatal(err)
	}
	if c.CropToNonzero || c.UseMaskForNorm != nil || c.ResampleOrder != "linear" {
		t.Errorf("defaults: crop %v, mask %v, order %q; want false, none, linear", c.CropToNonzero, c.UseMaskForNorm, c.ResampleOrder)
	}
	c, err = parseData(t, "dataset: x\ncrop_to_nonzero: true\nuse_mask_for_norm: true\nresample_order: nnunet")
	if err != nil {
		t.Fatal(err)
	}
	if !c.CropToNonzero || len(c.UseMaskForNorm) != 1 || !c.UseMaskForNorm[0] || c.ResampleOrder != "nnunet" {
		t.Errorf("parsed crop %v, mask %v, order %q", c.CropToNonzero, c.UseMaskForNorm, c.ResampleOrder)
	}
	if c, err = parseData(t, "dataset: x\nnormalization: [ct, zscore]\nuse_mask_for_norm: [false, true]\nct_window: [0, 1]\nct_std: 1"); err != nil || c.UseMaskForNorm[1] != true {
		t.Errorf("mask on the zscore channel of [ct, zscore]: %v %v", c.UseMaskForNorm, err)
	}
	for in, want := range map[string]string{
		"resample_order: cubic":                                    "data.resample_order",
		"use_mask_for_norm: maybe":                                 "use_mask_for_norm",
		"normalization: ct\nuse_mask_for_norm: [true]":             "data.use_mask_for_norm",
		"normalization: [zscore, none]\nuse_mask_for_norm: [true]": "channel 1",
	} {
		if _, err := parseData(t, "dataset: x\n"+in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", in, err, want)
		}
	}
}

// TestManifestSetting: a manifest replaces dataset and cases, which it
// may not be given with; a store defaults to beside it.
func TestManifestSetting(t *testing.T) {
	d := Default().Data
	d.Dataset, d.Manifest = "", "/m/crops.yaml"
	if err := d.Validate(); err != nil {
		t.Errorf("a manifest alone: %v", err)
	}
	if got := d.StoreDir(); got != "/m/.voxtrain-store" {
		t.Errorf("store dir %s", got)
	}
	d.Dataset = "/ds"
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "data.manifest") {
		t.Errorf("manifest and dataset: %v", err)
	}
}
