package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// The fixtures are nnU-Net v2's own fingerprint and plans of testdata/demo,
// made by testdata/make_nnunet_plans.py.

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var (
	demoOnce sync.Once
	demoFP   *Fingerprint
	demoDS   *data.Dataset
	demoErr  error
)

// demoFingerprint extracts the demo's fingerprint once for every test
// (80 cases: 0.2 s, 3 s under the race detector, so the tests that need it
// run there too; TestExtractSameForAnyWorkerCount holds the concurrency).
func demoFingerprint(t *testing.T) (*Fingerprint, *data.Dataset) {
	t.Helper()
	demoOnce.Do(func() {
		demoDS, demoErr = data.OpenDataset(config.Data{Dataset: testutil.DemoDir(t)})
		if demoErr != nil {
			return
		}
		demoFP, demoErr = Extract(context.Background(), demoDS, 0, runtime.GOMAXPROCS(0))
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	return demoFP, demoDS
}

func TestFingerprintMatchesNNUNet(t *testing.T) {
	fp, _ := demoFingerprint(t)
	var ref Fingerprint
	readJSON(t, filepath.Join("testdata", "nnunet_dataset_fingerprint.json"), &ref)
	// nnU-Net lists cases in sorted file-name order, as the demo's
	// dataset.json does.
	if !reflect.DeepEqual(fp.Spacings, ref.Spacings) {
		t.Errorf("spacings differ from nnU-Net's:\n got %v\nwant %v", fp.Spacings, ref.Spacings)
	}
	if !reflect.DeepEqual(fp.ShapesAfterCrop, ref.ShapesAfterCrop) {
		t.Errorf("shapes after crop differ from nnU-Net's:\n got %v\nwant %v", fp.ShapesAfterCrop, ref.ShapesAfterCrop)
	}
	if fp.MedianRelativeSizeAfterCropping != ref.MedianRelativeSizeAfterCropping {
		t.Errorf("median relative size %v, nnU-Net %v", fp.MedianRelativeSizeAfterCropping, ref.MedianRelativeSizeAfterCropping)
	}
	got, want := fp.ForegroundIntensityPropertiesPerChannel["0"], ref.ForegroundIntensityPropertiesPerChannel["0"]
	t.Logf("ours   %+v\nnnU-Net %+v", got, want)
	for _, c := range []struct {
		name      string
		got, want float64
		rel       float64
	}{
		// min and max: nnU-Net's 1.25 M draws per case see every voxel of
		// these few-thousand-voxel foregrounds; exact.
		{"min", got.Min, want.Min, 0},
		{"max", got.Max, want.Max, 0},
		// mean and std: sampling noise of 10^8 draws, ~std/10^4.
		{"mean", got.Mean, want.Mean, 1e-3},
		{"std", got.Std, want.Std, 1e-3},
		// percentiles: sampling noise moves the quantile between
		// neighbouring intensities.
		{"median", got.Median, want.Median, 1e-2},
		{"percentile_00_5", got.Percentile00_5, want.Percentile00_5, 2e-2},
		{"percentile_99_5", got.Percentile99_5, want.Percentile99_5, 2e-2},
	} {
		if d := math.Abs(c.got - c.want); d > c.rel*math.Abs(c.want) {
			t.Errorf("%s: %v, nnU-Net %v (relative difference %.2g > %.2g)", c.name, c.got, c.want, d/math.Abs(c.want), c.rel)
		}
	}
	var sum float64
	for _, f := range fp.ClassFrequencies {
		sum += f
	}
	if len(fp.ClassFrequencies) != 3 || math.Abs(sum-1) > 1e-9 || !(fp.ClassFrequencies["1"] > 0) || !(fp.ClassFrequencies["2"] > 0) {
		t.Errorf("class frequencies %v, want labels 0, 1, 2 summing to 1", fp.ClassFrequencies)
	}
}

func TestPlansMatchNNUNet(t *testing.T) {
	fp, ds := demoFingerprint(t)
	d, err := DescribeDataset(ds, fp, len(fp.ForegroundIntensityPropertiesPerChannel))
	if err != nil {
		t.Fatal(err)
	}
	if d.NumClasses != 3 || d.NumTraining != 80 || !reflect.DeepEqual(d.ChannelNames, []string{"MRI"}) {
		t.Fatalf("dataset %+v, want 3 classes, 80 cases, channel MRI", d)
	}
	got, err := Make(fp, d, DefaultVRAMGB)
	if err != nil {
		t.Fatal(err)
	}
	var ref Plans
	readJSON(t, filepath.Join("testdata", "nnunet_nnUNetPlans.json"), &ref)
	comparePlans(t, got, &ref)
}

// TestPlansMatchNNUNetSynthetic plans a made-up anisotropic two-channel
// CT dataset whose fullres patch must shrink to fit, which needs a
// transpose and a 3d_lowres configuration: what the demo does not reach.
func TestPlansMatchNNUNetSynthetic(t *testing.T) {
	var fp Fingerprint
	readJSON(t, filepath.Join("testdata", "synthetic_fingerprint.json"), &fp)
	got, err := Make(&fp, Dataset{Name: "Dataset900_Synthetic", ChannelNames: []string{"CT", "T2"}, NumClasses: 4, NumTraining: 30}, DefaultVRAMGB)
	if err != nil {
		t.Fatal(err)
	}
	var ref Plans
	readJSON(t, filepath.Join("testdata", "nnunet_synthetic_plans.json"), &ref)
	comparePlans(t, got, &ref)
	if full := got.Configurations["3d_fullres"]; full == nil || full.Why.Reductions == 0 {
		t.Errorf("3d_fullres: want the VRAM loop to have shrunk the patch: %+v", full)
	}
}

// TestResEncPlansMatchNNUNet: the residual-encoder presets (nnU-Net's
// nnUNetPlannerResEncM, L and XL) plan the demo and the synthetic dataset
// as nnU-Net 2.8.1 does, from the same fingerprints
// (testdata/make_nnunet_resenc_plans.py).
func TestResEncPlansMatchNNUNet(t *testing.T) {
	var demo, synth Fingerprint
	readJSON(t, filepath.Join("testdata", "nnunet_dataset_fingerprint.json"), &demo)
	readJSON(t, filepath.Join("testdata", "synthetic_fingerprint.json"), &synth)
	datasets := []struct {
		name string
		fp   *Fingerprint
		ds   Dataset
		file string
	}{
		{"demo", &demo, Dataset{Name: "Dataset004_Hippocampus", ChannelNames: []string{"MRI"}, NumClasses: 3, NumTraining: 80}, "nnunet_resenc_%s_plans.json"},
		{"synthetic", &synth, Dataset{Name: "Dataset900_Synthetic", ChannelNames: []string{"CT", "T2"}, NumClasses: 4, NumTraining: 30}, "nnunet_synthetic_resenc_%s_plans.json"},
	}
	for _, d := range datasets {
		for _, size := range []string{"M", "L", "XL"} {
			t.Run(d.name+" "+size, func(t *testing.T) {
				preset, err := PresetNamed("nnUNetPlannerResEnc" + size)
				if err != nil {
					t.Fatal(err)
				}
				got, err := MakeWith(d.fp, d.ds, preset, 0)
				if err != nil {
					t.Fatal(err)
				}
				var ref Plans
				readJSON(t, filepath.Join("testdata", fmt.Sprintf(d.file, size)), &ref)
				comparePlans(t, got, &ref)
				if got.VRAMTargetGB != preset.VRAMGB {
					t.Errorf("gpu memory target %v, want the preset's %v", got.VRAMTargetGB, preset.VRAMGB)
				}
			})
		}
	}
}

// TestTargetSpacingPlansMatchNNUNet: a full resolution spacing given by
// hand (nnU-Net's -overwrite_target_spacing) plans as nnU-Net 2.8.1 plans
// it from the same fingerprints (testdata/make_nnunet_spacing_plans.py):
// the transpose, 3d_fullres, 3d_lowres or none, and 2d all follow it.
func TestTargetSpacingPlansMatchNNUNet(t *testing.T) {
	var demo, synth Fingerprint
	readJSON(t, filepath.Join("testdata", "nnunet_dataset_fingerprint.json"), &demo)
	readJSON(t, filepath.Join("testdata", "synthetic_fingerprint.json"), &synth)
	demoDS := Dataset{Name: "Dataset004_Hippocampus", ChannelNames: []string{"MRI"}, NumClasses: 3, NumTraining: 80}
	synthDS := Dataset{Name: "Dataset900_Synthetic", ChannelNames: []string{"CT", "T2"}, NumClasses: 4, NumTraining: 30}
	for _, tc := range []struct {
		name    string
		fp      *Fingerprint
		ds      Dataset
		preset  Preset
		spacing []float64
		file    string
	}{
		{"demo 2,1,1", &demo, demoDS, PresetDefault, []float64{2, 1, 1}, "nnunet_spacing_demo_plans.json"},
		{"synthetic 1,1,3", &synth, synthDS, PresetDefault, []float64{1, 1, 3}, "nnunet_spacing_synthetic_plans.json"},
		{"demo resenc-m 1.5", &demo, demoDS, PresetResEncM, []float64{1.5, 1.5, 1.5}, "nnunet_spacing_resenc_m_plans.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MakeOpts(tc.fp, tc.ds, Options{Preset: tc.preset, TargetSpacing: tc.spacing})
			if err != nil {
				t.Fatal(err)
			}
			var ref Plans
			readJSON(t, filepath.Join("testdata", tc.file), &ref)
			comparePlans(t, got, &ref)
			if !slices.Equal(got.TargetSpacingGiven, tc.spacing) {
				t.Errorf("TargetSpacingGiven %v, want %v", got.TargetSpacingGiven, tc.spacing)
			}
			def, err := MakeWith(tc.fp, tc.ds, tc.preset, 0)
			if err != nil {
				t.Fatal(err)
			}
			if def.TargetSpacingGiven != nil || reflect.DeepEqual(def.Configurations["3d_fullres"].Spacing, got.Configurations["3d_fullres"].Spacing) {
				t.Errorf("the median rule's plans: given %v, 3d_fullres spacing %v; want nil and another spacing than %v",
					def.TargetSpacingGiven, def.Configurations["3d_fullres"].Spacing, got.Configurations["3d_fullres"].Spacing)
			}
		})
	}
	for _, bad := range [][]float64{{1, 1}, {1, 0, 1}, {1, math.Inf(1), 1}, {1, math.NaN(), 1}} {
		if _, err := MakeOpts(&demo, demoDS, Options{TargetSpacing: bad}); err == nil || !strings.Contains(err.Error(), "target spacing") {
			t.Errorf("target spacing %v: error %v, want one naming the target spacing", bad, err)
		}
	}
}

// comparePlans holds got to nnU-Net's plans: transpose, medians, and per
// configuration everything that shapes the network and the batches.
func comparePlans(t *testing.T, got, ref *Plans) {
	t.Helper()
	if !reflect.DeepEqual(got.TransposeForward, ref.TransposeForward) || !reflect.DeepEqual(got.TransposeBackward, ref.TransposeBackward) {
		t.Errorf("transpose %v/%v, nnU-Net %v/%v", got.TransposeForward, got.TransposeBackward, ref.TransposeForward, ref.TransposeBackward)
	}
	if !reflect.DeepEqual(got.OriginalMedianShapeAfterTransp, ref.OriginalMedianShapeAfterTransp) ||
		!reflect.DeepEqual(got.OriginalMedianSpacingAfterTransp, ref.OriginalMedianSpacingAfterTransp) {
		t.Errorf("median shape %v spacing %v, nnU-Net %v %v", got.OriginalMedianShapeAfterTransp, got.OriginalMedianSpacingAfterTransp,
			ref.OriginalMedianShapeAfterTransp, ref.OriginalMedianSpacingAfterTransp)
	}
	names := func(m map[string]*Configuration) []string {
		var n []string
		for k := range m {
			n = append(n, k)
		}
		slices.Sort(n)
		return n
	}
	if !reflect.DeepEqual(names(got.Configurations), names(ref.Configurations)) {
		t.Fatalf("configurations %v, nnU-Net %v", names(got.Configurations), names(ref.Configurations))
	}
	for name, want := range ref.Configurations {
		g := got.Configurations[name]
		if want.PatchSize == nil { // 3d_cascade_fullres only names its parents
			continue
		}
		for _, c := range []struct {
			key       string
			got, want any
		}{
			{"patch_size", g.PatchSize, want.PatchSize},
			{"spacing", g.Spacing, want.Spacing},
			{"median_image_size_in_voxels", g.MedianImageSizeInVoxels, want.MedianImageSizeInVoxels},
			{"batch_size", g.BatchSize, want.BatchSize},
			{"n_stages", g.Architecture.ArchKwargs.NStages, want.Architecture.ArchKwargs.NStages},
			{"strides", g.Architecture.ArchKwargs.Strides, want.Architecture.ArchKwargs.Strides},
			{"kernel_sizes", g.Architecture.ArchKwargs.KernelSizes, want.Architecture.ArchKwargs.KernelSizes},
			{"features_per_stage", g.Architecture.ArchKwargs.FeaturesPerStage, want.Architecture.ArchKwargs.FeaturesPerStage},
			{"n_conv_per_stage", g.Architecture.ArchKwargs.NConvPerStage, want.Architecture.ArchKwargs.NConvPerStage},
			{"n_blocks_per_stage", g.Architecture.ArchKwargs.NBlocksPerStage, want.Architecture.ArchKwargs.NBlocksPerStage},
			{"n_conv_per_stage_decoder", g.Architecture.ArchKwargs.NConvPerStageDecoder, want.Architecture.ArchKwargs.NConvPerStageDecoder},
			{"network_class_name", g.Architecture.NetworkClassName, want.Architecture.NetworkClassName},
			{"normalization_schemes", g.NormalizationSchemes, want.NormalizationSchemes},
			{"use_mask_for_norm", g.UseMaskForNorm, want.UseMaskForNorm},
			{"batch_dice", g.BatchDice, want.BatchDice},
			{"next_stage", g.NextStage, want.NextStage},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s %s: %v, nnU-Net %v", name, c.key, c.got, c.want)
			}
		}
	}
}

// TestExtractSameForAnyWorkerCount: the fingerprint is a function of the
// cases, not of how many goroutines decode them or the order they finish.
func TestExtractSameForAnyWorkerCount(t *testing.T) {
	dir := testutil.DemoSubset(t, []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019", "hippocampus_024", "hippocampus_033"})
	ds, err := data.OpenDataset(config.Data{Dataset: dir})
	if err != nil {
		t.Fatal(err)
	}
	one, err := Extract(context.Background(), ds, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	many, err := Extract(context.Background(), ds, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, many) {
		t.Errorf("1 worker:\n%+v\n4 workers:\n%+v", one, many)
	}
	if len(one.Spacings) != 6 || len(one.CaseIDs) != 6 || one.CaseIDs[5] != "hippocampus_033" {
		t.Errorf("cases %v", one.CaseIDs)
	}
	// A cancelled context stops it with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, ds, 0, 2); err == nil {
		t.Error("a cancelled extraction returned no error")
	}
}

// TestFeatureMapEstimatesMatchNNUNet holds the VRAM proxies to
// dynamic_network_architectures' compute_conv_feature_map_size for
// ResidualEncoderUNet and PlainConvUNet on the ResEnc plans'
// configurations and nnU-Net's 128³ ResEnc M example
// (testdata/nnunet_resenc_feature_maps.json).
func TestFeatureMapEstimatesMatchNNUNet(t *testing.T) {
	var cases []struct {
		Name          string  `json:"name"`
		Patch         []int   `json:"patch"`
		Strides       [][]int `json:"strides"`
		Features      []int   `json:"features"`
		Blocks        []int   `json:"n_blocks_per_stage"`
		Decoder       []int   `json:"n_conv_per_stage_decoder"`
		Classes       int     `json:"num_classes"`
		Estimate      int64   `json:"estimate"`
		EstimatePlain int64   `json:"estimate_plain"`
	}
	readJSON(t, filepath.Join("testdata", "nnunet_resenc_feature_maps.json"), &cases)
	if len(cases) < 2 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if got := residualFeatureMapVoxels(c.Patch, c.Strides, c.Features, c.Blocks, c.Decoder[0], c.Classes); got != c.Estimate {
			t.Errorf("%s: ResidualEncoderUNet estimate %d, nnU-Net %d", c.Name, got, c.Estimate)
		}
		if got := featureMapVoxels(c.Patch, c.Strides, c.Features, 2, c.Classes); got != c.EstimatePlain {
			t.Errorf("%s: PlainConvUNet estimate %d, nnU-Net %d", c.Name, got, c.EstimatePlain)
		}
	}
}
