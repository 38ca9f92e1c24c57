package plan

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// TestWrittenYAMLsLoad writes the demo's and the synthetic dataset's
// plans and loads every YAML with config.Load (which validates), checking
// that the run config trains what was planned, in (D, H, W), with the
// fingerprint's spacing unit (the synthetic one states none).
func TestWrittenYAMLsLoad(t *testing.T) {
	fp, dsDemo := demoFingerprint(t)
	if fp.SpacingUnit != "millimeter" {
		t.Errorf("the demo's fingerprint: spacing unit %q, want millimeter", fp.SpacingUnit)
	}
	demo, err := DescribeDataset(dsDemo, fp, 1)
	if err != nil {
		t.Fatal(err)
	}
	var synFP Fingerprint
	readJSON(t, filepath.Join("testdata", "synthetic_fingerprint.json"), &synFP)
	syn := Dataset{Name: "Dataset900_Synthetic", ChannelNames: []string{"CT", "T2"}, NumClasses: 4, NumTraining: 30}
	for _, tc := range []struct {
		fp      *Fingerprint
		ds      Dataset
		dataset string
		want    []string
	}{
		{fp, demo, dsDemo.Root, []string{"2d", "3d_fullres"}},
		{&synFP, syn, "/data/Dataset900_Synthetic", []string{"2d", "3d_fullres", "3d_lowres"}},
	} {
		p, err := Make(tc.fp, tc.ds, DefaultVRAMGB)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		files, err := Write(dir, tc.dataset, tc.fp, p, tc.ds)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 2+len(tc.want) {
			t.Errorf("%s: wrote %v, want the fingerprint, the plans and %v", tc.ds.Name, files, tc.want)
		}
		for _, name := range tc.want {
			path := filepath.Join(dir, name+".yaml")
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			c := p.Configurations[name]
			fwd := p.TransposeForward
			if got, want := cfg.Data.Dataset, mustAbs(t, tc.dataset); got != want {
				t.Errorf("%s: data.dataset %q, want %q", path, got, want)
			}
			// The cases' unit, when they state one (the demo's NIfTI
			// files: millimetres), is target_spacing's.
			if cfg.Data.SpacingUnit != tc.fp.SpacingUnit {
				t.Errorf("%s: data.spacing_unit %q, the fingerprint's %q", path, cfg.Data.SpacingUnit, tc.fp.SpacingUnit)
			}
			if cfg.Train.BatchSize != c.BatchSize {
				t.Errorf("%s: batch_size %d, planned %d", path, cfg.Train.BatchSize, c.BatchSize)
			}
			ak := c.Architecture.ArchKwargs
			if len(cfg.Model.Features) != ak.NStages || cfg.Model.InChannels != len(tc.ds.ChannelNames) || cfg.Model.NumClasses != tc.ds.NumClasses {
				t.Errorf("%s: model %+v, planned %+v", path, cfg.Model, ak)
			}
			// Every planned per-axis value sits on its file axis, and in
			// 2-D the slicing axis is 1 throughout.
			// The target spacing likewise; in 2-D the slicing axis keeps
			// each case's own (0), as nnU-Net's 2d.
			off := 0
			if len(c.PatchSize) == 2 {
				off = 1
				if cfg.Train.PatchSize[fwd[0]] != 1 {
					t.Errorf("%s: patch %v, want 1 along slicing axis %d", path, cfg.Train.PatchSize, fwd[0])
				}
				if ts := cfg.Data.TargetSpacing; len(ts) != 3 || ts[fwd[0]] != 0 {
					t.Errorf("%s: target_spacing %v, want 0 along slicing axis %d", path, ts, fwd[0])
				}
			}
			for i := range c.PatchSize {
				a := fwd[i+off]
				if ts := cfg.Data.TargetSpacing; len(ts) != 3 || math.Abs(ts[a]-c.Spacing[i]) > 1e-9*c.Spacing[i] {
					t.Errorf("%s: target_spacing %v, planned %v (transpose %v)", path, ts, c.Spacing, fwd)
				}
				if cfg.Train.PatchSize[a] != c.PatchSize[i] {
					t.Errorf("%s: patch %v, planned %v (transpose %v)", path, cfg.Train.PatchSize, c.PatchSize, fwd)
				}
				for s := range ak.NStages {
					if cfg.Model.KernelSize(s)[a] != ak.KernelSizes[s][i] || cfg.Model.Stride(s)[a] != ak.Strides[s][i] {
						t.Errorf("%s: stage %d kernel %v stride %v, planned %v %v", path, s, cfg.Model.KernelSize(s), cfg.Model.Stride(s), ak.KernelSizes[s], ak.Strides[s])
					}
				}
			}
			for i, n := range c.NormalizationSchemes {
				want := map[string]string{"CTNormalization": "ct", "ZScoreNormalization": "zscore"}[n]
				if cfg.Data.Normalization[i] != want {
					t.Errorf("%s: normalization %v, planned %v", path, cfg.Data.Normalization, c.NormalizationSchemes)
				}
			}
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
