package trainer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/dist"
)

// TestFillRegions: a multi-label run on nnU-Net regions takes
// regions_class_order from dataset.json into model.regions_class_order; one
// given in the config that differs is an error naming the key and the
// file; softmax runs and manifests are left alone.
func TestFillRegions(t *testing.T) {
	ds := t.TempDir()
	meta := `{"labels": {"background": 0, "whole": [1, 2], "core": [2]}, "regions_class_order": [1, 2], "numTraining": 0, "file_ending": ".nii.gz", "channel_names": {"0": "MRI"}}`
	if err := os.WriteFile(filepath.Join(ds, "dataset.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Data.Dataset = ds
	cfg.Model.Targets, cfg.Model.NumClasses, cfg.Loss.Name = config.TargetsMultiLabel, 2, "dice_bce"
	c := cfg
	if err := fillRegions(&c); err != nil || !slices.Equal(c.Model.RegionsClassOrder, []int{1, 2}) {
		t.Fatalf("fillRegions: %v, order %v, want [1 2]", err, c.Model.RegionsClassOrder)
	}
	c = cfg
	c.Model.RegionsClassOrder = []int{2, 1}
	if err := fillRegions(&c); err == nil || !strings.Contains(err.Error(), "model.regions_class_order: [2 1], but "+filepath.Join(ds, "dataset.json")+" has [1 2]") {
		t.Fatalf("a differing order: %v", err)
	}
	c = cfg
	c.Model.Targets, c.Loss.Name = config.TargetsSoftmax, "dice_ce"
	if err := fillRegions(&c); err != nil || c.Model.RegionsClassOrder != nil {
		t.Fatalf("softmax: %v, order %v, want none", err, c.Model.RegionsClassOrder)
	}
}

// TestCheckDistEnv: a job's misspelt environment variables fail before
// any work (a run of one process ignores them).
func TestCheckDistEnv(t *testing.T) {
	for _, c := range []struct{ name, val string }{
		{"VOXTRAIN_DIST_BACKEND", "bogus"}, {"VOXTRAIN_DIST_OVERLAP", "maybe"}, {"VOXTRAIN_DIST_TIMEOUT", "soon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.name, c.val)
			if err := checkDistEnv(dist.Env{WorldSize: 2}, Options{}); err == nil || !strings.Contains(err.Error(), c.name) {
				t.Errorf("%s=%s in a job of 2: %v, want an error naming it", c.name, c.val, err)
			}
			if err := checkDistEnv(dist.Env{WorldSize: 1}, Options{}); err != nil {
				t.Errorf("%s=%s alone: %v, want none", c.name, c.val, err)
			}
		})
	}
}
