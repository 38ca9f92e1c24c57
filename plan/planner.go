package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// nnU-Net v2's constants (ExperimentPlanner.__init__ in
// nnunetv2/experiment_planning/experiment_planners/default_experiment_planner.py,
// ANISO_THRESHOLD in nnunetv2/configuration.py).
const (
	anisoThreshold       = 3           // ANISO_THRESHOLD
	baseFeatures         = 32          // UNet_base_num_features
	maxFeatures3D        = 320         // UNet_max_features_3d
	maxFeatures2D        = 512         // UNet_max_features_2d
	referenceVal3D       = 560_000_000 // UNet_reference_val_3d
	referenceVal2D       = 85_000_000  // UNet_reference_val_2d
	referenceGB          = 8           // UNet_reference_val_corresp_GB
	referenceBatch2D     = 12          // UNet_reference_val_corresp_bs_2d
	referenceBatch3D     = 2           // UNet_reference_val_corresp_bs_3d
	minFeatureMapEdge    = 4           // UNet_featuremap_min_edge_length
	convsPerStage        = 2           // UNet_blocks_per_stage_encoder/decoder
	minBatchSize         = 2           // UNet_min_batch_size
	maxDatasetCovered    = 0.05        // max_dataset_covered
	lowresThreshold      = 0.25        // lowres_creation_threshold
	lowresSpacingStep    = 1.03        // spacing_increase_factor in plan_experiment
	maskForNormThreshold = 0.75        // determine_normalization_scheme_and_whether_mask_is_used_for_norm
	// DefaultVRAMGB is nnU-Net's gpu_memory_target_in_gb default.
	DefaultVRAMGB = 8
)

// Dataset is what the planner needs to know of a dataset besides its
// fingerprint.
type Dataset struct {
	// Name names the plans.
	Name string
	// ChannelNames are the channels' names (dataset.json channel_names or
	// modality), which choose the normalisation ("CT": ct).
	ChannelNames []string
	// NumClasses counts the classes, background included (with regions:
	// background and the regions, dataset.json's labels, which nnU-Net's
	// planner counts as the network's outputs).
	NumClasses int
	// Regions names dataset.json's nnU-Net regions (region-based
	// training: sigmoid outputs, one per region), nil for plain classes;
	// RegionsClassOrder is its regions_class_order.
	Regions           []string
	RegionsClassOrder []int
	// IgnoreLabel is dataset.json's "ignore" label (nnU-Net v2's ignore
	// label; 0: none). nnU-Net's planner counts it among the labels
	// (NumClasses); the network has no output for it (Outputs).
	IgnoreLabel int
	// Outputs counts the network's classes, background included, when
	// that differs from NumClasses (an ignore label); 0: NumClasses.
	Outputs int
	// NumTraining is the number of training cases (nnU-Net's numTraining).
	NumTraining int
}

// Plans are the planner's result in nnU-Net v2's nnUNetPlans.json layout
// (the keys that describe what is trained).
type Plans struct {
	DatasetName                             string                    `json:"dataset_name"`
	PlansName                               string                    `json:"plans_name"`
	OriginalMedianSpacingAfterTransp        []float64                 `json:"original_median_spacing_after_transp"`
	OriginalMedianShapeAfterTransp          []int                     `json:"original_median_shape_after_transp"`
	TransposeForward                        []int                     `json:"transpose_forward"`
	TransposeBackward                       []int                     `json:"transpose_backward"`
	Configurations                          map[string]*Configuration `json:"configurations"`
	ExperimentPlannerUsed                   string                    `json:"experiment_planner_used"`
	ForegroundIntensityPropertiesPerChannel map[string]IntensityStats `json:"foreground_intensity_properties_per_channel"`
	// VRAMTargetGB is the GPU memory the configurations were sized for
	// (ours; nnU-Net's gpu_memory_target_in_gb).
	VRAMTargetGB float64 `json:"vram_target_gb"`
	// TargetSpacingGiven is the full resolution spacing given by hand
	// (Options.TargetSpacing, nnU-Net's -overwrite_target_spacing; ours,
	// in the fingerprint's axes), absent when the median rule chose it.
	TargetSpacingGiven []float64 `json:"target_spacing_given,omitempty"`
}

// Configuration is one of nnU-Net's configurations (3d_fullres, 2d,
// 3d_lowres). Patch size, spacing, kernels and strides are in the
// transposed axis order (see Plans.TransposeForward); 2d ones have the
// two in-plane axes.
type Configuration struct {
	DataIdentifier          string       `json:"data_identifier"`
	BatchSize               int          `json:"batch_size"`
	PatchSize               []int        `json:"patch_size"`
	MedianImageSizeInVoxels []float64    `json:"median_image_size_in_voxels"`
	Spacing                 []float64    `json:"spacing"`
	NormalizationSchemes    []string     `json:"normalization_schemes"`
	UseMaskForNorm          []bool       `json:"use_mask_for_norm"`
	Architecture            Architecture `json:"architecture"`
	BatchDice               bool         `json:"batch_dice"`
	NextStage               string       `json:"next_stage,omitempty"`
	// InheritsFrom and PreviousStage describe 3d_cascade_fullres, which
	// only names its parents (voxtrain has no cascade; it is in the plans
	// for nnU-Net's sake, not in a YAML).
	InheritsFrom  string `json:"inherits_from,omitempty"`
	PreviousStage string `json:"previous_stage,omitempty"`

	// Why records how the values came about, for the YAML's comments
	// (not written to the plans).
	Why Reasons `json:"-"`
}

// Architecture is nnU-Net's architecture entry: the network class and the
// keyword arguments that shape it.
type Architecture struct {
	NetworkClassName string     `json:"network_class_name"`
	ArchKwargs       ArchKwargs `json:"arch_kwargs"`
}

// The networks' class names as nnU-Net's planners write them.
const (
	plainUNetClass    = "dynamic_network_architectures.architectures.unet.PlainConvUNet"
	residualUNetClass = "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet"
)

// isClass reports whether a network_class_name names the class of the
// module path full, with or without the module.
func isClass(name, full string) bool {
	short := full[strings.LastIndexByte(full, '.')+1:]
	return name == short || strings.HasSuffix(name, "."+short)
}

// Plain reports whether the network is nnU-Net's PlainConvUNet.
func (a Architecture) Plain() bool { return isClass(a.NetworkClassName, plainUNetClass) }

// Residual reports whether the network is nnU-Net's ResidualEncoderUNet
// (the ResEnc presets' network).
func (a Architecture) Residual() bool { return isClass(a.NetworkClassName, residualUNetClass) }

// ArchKwargs are PlainConvUNet's and ResidualEncoderUNet's shape
// arguments: n_conv_per_stage for the first, n_blocks_per_stage for the
// second.
type ArchKwargs struct {
	NStages              int     `json:"n_stages"`
	FeaturesPerStage     []int   `json:"features_per_stage"`
	KernelSizes          [][]int `json:"kernel_sizes"`
	Strides              [][]int `json:"strides"`
	NConvPerStage        []int   `json:"n_conv_per_stage,omitempty"`
	NBlocksPerStage      []int   `json:"n_blocks_per_stage,omitempty"`
	NConvPerStageDecoder []int   `json:"n_conv_per_stage_decoder"`
	ConvBias             bool    `json:"conv_bias"`
}

// Reasons are the intermediate values of one configuration's planning.
type Reasons struct {
	InitialPatch    []int   // before the VRAM loop (padded)
	Reductions      int     // patch reductions by the VRAM loop
	Estimate        int64   // final feature-map estimate
	Reference       float64 // the budget it was held to
	BatchFromVRAM   int     // batch size the budget allows
	BatchCap5Pct    int     // the 5 %-of-dataset cap
	ApproxVoxelsAll float64 // voxels of the dataset at this spacing
}

// Preset is one of nnU-Net v2's experiment planners: its default
// ExperimentPlanner, or a residual-encoder planner of its ResEnc presets
// (residual_encoder_unet_planners.py), which plan a ResidualEncoderUNet
// against their own VRAM references.
type Preset struct {
	// Name is voxtrain's name for it (train plan --planner).
	Name string
	// Planner is nnU-Net's class; PlansName the plans' name voxtrain
	// writes: nnU-Net's with "voxtrain" for "nnUNet"
	// (nnUNetResEncUNetMPlans → voxtrainResEncUNetMPlans), so that
	// voxtrain's plans are not taken for nnU-Net's.
	Planner, PlansName string
	// Residual plans nnU-Net's ResidualEncoderUNet: blocks per stage
	// 1, 3, 4, 6, 6, …, one decoder conv per stage.
	Residual bool
	// RefVal3D and RefVal2D are UNet_reference_val_3d/_2d, the
	// feature-map budget at RefGB (UNet_reference_val_corresp_GB);
	// VRAMGB is the planner's default gpu_memory_target_in_gb.
	RefVal3D, RefVal2D, RefGB, VRAMGB float64
	// MaxDatasetCovered is max_dataset_covered: the largest share of the
	// dataset's voxels one batch may hold.
	MaxDatasetCovered float64
}

// The planners (nnunetv2 2.8.1's values).
var (
	PresetDefault = Preset{Name: "default", Planner: "ExperimentPlanner", PlansName: "voxtrainPlans",
		RefVal3D: referenceVal3D, RefVal2D: referenceVal2D, RefGB: referenceGB, VRAMGB: DefaultVRAMGB, MaxDatasetCovered: maxDatasetCovered}
	PresetResEncM = Preset{Name: "resenc-m", Planner: "nnUNetPlannerResEncM", PlansName: "voxtrainResEncUNetMPlans", Residual: true,
		RefVal3D: 680_000_000, RefVal2D: 135_000_000, RefGB: 8, VRAMGB: 8, MaxDatasetCovered: 1}
	PresetResEncL = Preset{Name: "resenc-l", Planner: "nnUNetPlannerResEncL", PlansName: "voxtrainResEncUNetLPlans", Residual: true,
		RefVal3D: 2_100_000_000, RefVal2D: 380_000_000, RefGB: 24, VRAMGB: 24, MaxDatasetCovered: 1}
	PresetResEncXL = Preset{Name: "resenc-xl", Planner: "nnUNetPlannerResEncXL", PlansName: "voxtrainResEncUNetXLPlans", Residual: true,
		RefVal3D: 3_600_000_000, RefVal2D: 560_000_000, RefGB: 40, VRAMGB: 40, MaxDatasetCovered: 1}
	Presets = []Preset{PresetDefault, PresetResEncM, PresetResEncL, PresetResEncXL}
)

// residualBlocksPerStage is ResEncUNetPlanner's
// UNet_blocks_per_stage_encoder, cut to the stages.
var residualBlocksPerStage = []int{1, 3, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}

// PresetNamed returns the planner called name: voxtrain's name
// (default, resenc-m, resenc-l, resenc-xl) or nnU-Net's class name.
func PresetNamed(name string) (Preset, error) {
	var names []string
	for _, p := range Presets {
		if strings.EqualFold(name, p.Name) || name == p.Planner {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Preset{}, fmt.Errorf("planner %q: want one of %s (or nnU-Net's class names ExperimentPlanner, nnUNetPlannerResEncM, L, XL)", name, strings.Join(names, ", "))
}

// Make plans the configurations from a fingerprint, as nnU-Net v2's
// ExperimentPlanner.plan_experiment, for a GPU of vramGB.
func Make(fp *Fingerprint, ds Dataset, vramGB float64) (*Plans, error) {
	if !(vramGB > 0) {
		return nil, fmt.Errorf("plan: GPU memory target %v GB, want > 0", vramGB)
	}
	return MakeWith(fp, ds, PresetDefault, vramGB)
}

// MakeWith is Make with the planner preset (its plan_experiment; vramGB
// is its gpu_memory_target_in_gb, 0 for the preset's VRAMGB).
func MakeWith(fp *Fingerprint, ds Dataset, preset Preset, vramGB float64) (*Plans, error) {
	return MakeOpts(fp, ds, Options{Preset: preset, VRAMGB: vramGB})
}

// Options are the planner's settings beyond the fingerprint and dataset:
// nnUNetv2_plan_experiment's -pl, -gpu_memory_target and
// -overwrite_target_spacing.
type Options struct {
	Preset Preset
	// VRAMGB is the GPU memory target in GB; 0 for the preset's.
	VRAMGB float64
	// TargetSpacing, when set, replaces the median rule for the full
	// resolution spacing (three values in the fingerprint's axes, before
	// the transpose). As in nnU-Net it shapes everything planned from it:
	// the transpose, 3d_fullres, 3d_lowres (which starts there) and 2d
	// (its in-plane spacing).
	TargetSpacing []float64
}

// CheckTargetSpacing checks a full resolution spacing given by hand
// (Options.TargetSpacing): three values, each > 0 and finite.
func CheckTargetSpacing(v []float64) error {
	if len(v) != 3 {
		return fmt.Errorf("%v: %d values, want three (D, H, W)", v, len(v))
	}
	for _, x := range v {
		if !(x > 0) || math.IsInf(x, 0) {
			return fmt.Errorf("%v: want spacings > 0 and finite", v)
		}
	}
	return nil
}

// MakeOpts plans with o, as the planner o.Preset names would.
func MakeOpts(fp *Fingerprint, ds Dataset, o Options) (*Plans, error) {
	preset, vramGB := o.Preset, o.VRAMGB
	if preset.Planner == "" {
		preset = PresetDefault
	}
	if vramGB == 0 {
		vramGB = preset.VRAMGB
	}
	if o.TargetSpacing != nil {
		if err := CheckTargetSpacing(o.TargetSpacing); err != nil {
			return nil, fmt.Errorf("plan: target spacing %w", err)
		}
	}
	if err := fp.checkCases(); err != nil {
		return nil, fmt.Errorf("plan: fingerprint: %w", err)
	}
	if ds.NumClasses < 1 || ds.NumTraining < 1 || len(ds.ChannelNames) < 1 {
		return nil, fmt.Errorf("plan: dataset %q: %d classes, %d training cases, %d channels; want each >= 1", ds.Name, ds.NumClasses, ds.NumTraining, len(ds.ChannelNames))
	}
	if !(vramGB > 0) {
		return nil, fmt.Errorf("plan: GPU memory target %v GB, want > 0", vramGB)
	}
	p := &planner{fp: fp, ds: ds, vramGB: vramGB, preset: preset, target: slices.Clone(o.TargetSpacing)}
	return p.plan()
}

type planner struct {
	fp     *Fingerprint
	ds     Dataset
	vramGB float64
	preset Preset
	target []float64 // Options.TargetSpacing
}

// fullresSpacing is determine_fullres_target_spacing: the median spacing,
// except that on a dataset whose coarsest axis is both more than 3× the
// others' spacing and less than a third of their voxels, that axis gets
// the 10th percentile of its spacings (at least the others' largest
// spacing + 1e-5), which avoids interpolating few thick slices. A target
// spacing given by hand (Options.TargetSpacing) replaces all of it.
func (p *planner) fullresSpacing() []float64 {
	if p.target != nil {
		return slices.Clone(p.target)
	}
	n := len(p.fp.Spacings)
	target := make([]float64, 3)
	size := make([]float64, 3)
	for a := range 3 {
		sp, sz := make([]float64, n), make([]float64, n)
		for i := range n {
			sp[i], sz[i] = p.fp.Spacings[i][a], float64(p.fp.ShapesAfterCrop[i][a])
		}
		target[a], size[a] = percentile(sp, 50), percentile(sz, 50)
	}
	worst := argmaxFirst(target)
	maxOther, minOtherSize := 0.0, math.Inf(1)
	for a := range 3 {
		if a != worst {
			maxOther = math.Max(maxOther, target[a])
			minOtherSize = math.Min(minOtherSize, size[a])
		}
	}
	if target[worst] > anisoThreshold*maxOther && size[worst]*anisoThreshold < minOtherSize {
		sp := make([]float64, n)
		for i := range n {
			sp[i] = p.fp.Spacings[i][worst]
		}
		t := percentile(sp, 10)
		if t < maxOther {
			t = math.Max(maxOther, t) + 1e-5
		}
		target[worst] = t
	}
	return target
}

func argmaxFirst(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// transpose is determine_transpose: the coarsest axis first, the others
// in order.
func transpose(target []float64) (fwd, bwd []int) {
	m := argmaxFirst(target)
	fwd = []int{m}
	for a := range 3 {
		if a != m {
			fwd = append(fwd, a)
		}
	}
	bwd = make([]int, 3)
	for i, a := range fwd {
		bwd[a] = i
	}
	return fwd, bwd
}

func permute[T any](x []T, fwd []int) []T {
	o := make([]T, len(fwd))
	for i, a := range fwd {
		o[i] = x[a]
	}
	return o
}

// roundHalfEven is Python 3's and numpy's round.
func roundHalfEven(x float64) float64 { return math.RoundToEven(x) }

func (p *planner) plan() (*Plans, error) {
	spacing := p.fullresSpacing()
	fwd, bwd := transpose(spacing)
	spacingT := permute(spacing, fwd)

	// The median shape after resampling to the target (compute_new_shape).
	n := len(p.fp.Spacings)
	newShapes := make([][]float64, 3)
	for a := range 3 {
		newShapes[a] = make([]float64, n)
		for i := range n {
			newShapes[a][i] = roundHalfEven(p.fp.Spacings[i][a] / spacing[a] * float64(p.fp.ShapesAfterCrop[i][a]))
		}
	}
	median := make([]float64, 3)
	for a := range 3 {
		median[a] = percentile(newShapes[a], 50)
	}
	medianT := permute(median, fwd)
	voxelsAll := prodF(medianT) * float64(p.ds.NumTraining)

	plans := &Plans{
		DatasetName:                             p.ds.Name,
		PlansName:                               p.preset.PlansName,
		TransposeForward:                        fwd,
		TransposeBackward:                       bwd,
		Configurations:                          map[string]*Configuration{},
		ExperimentPlannerUsed:                   "voxtrain plan (nnU-Net v2 " + p.preset.Planner + " rules)",
		VRAMTargetGB:                            p.vramGB,
		ForegroundIntensityPropertiesPerChannel: p.fp.ForegroundIntensityPropertiesPerChannel,
		TargetSpacingGiven:                      slices.Clone(p.target),
	}
	cache := map[string]int64{}
	if medianT[0] != 1 {
		full, err := p.configuration(spacingT, medianT, "3d_fullres", voxelsAll, cache)
		if err != nil {
			return nil, err
		}
		lowres, err := p.lowres(full, medianT, cache)
		if err != nil {
			return nil, err
		}
		full.BatchDice = lowres != nil
		plans.Configurations["3d_fullres"] = full
		if lowres != nil {
			lowres.BatchDice = false
			lowres.NextStage = "3d_cascade_fullres"
			plans.Configurations["3d_lowres"] = lowres
			plans.Configurations["3d_cascade_fullres"] = &Configuration{InheritsFrom: "3d_fullres", PreviousStage: "3d_lowres"}
		}
	}
	c2, err := p.configuration(spacingT[1:], medianT[1:], "2d", voxelsAll, cache)
	if err != nil {
		return nil, err
	}
	c2.BatchDice = true
	plans.Configurations["2d"] = c2

	sp, sh := make([]float64, 3), make([]float64, 3)
	for a := range 3 {
		s, z := make([]float64, n), make([]float64, n)
		for i := range n {
			s[i], z[i] = p.fp.Spacings[i][a], float64(p.fp.ShapesAfterCrop[i][a])
		}
		sp[a], sh[a] = percentile(s, 50), percentile(z, 50)
	}
	plans.OriginalMedianSpacingAfterTransp = permute(sp, fwd)
	for _, v := range permute(sh, fwd) {
		plans.OriginalMedianShapeAfterTransp = append(plans.OriginalMedianShapeAfterTransp, int(roundHalfEven(v)))
	}
	return plans, nil
}

// lowres is plan_experiment's 3d_lowres search: while the fullres patch
// covers less than a quarter of the median image, coarsen the spacing by
// 3 % a step (first the axes finer than half the coarsest) and replan;
// the configuration is dropped when its median image is less than half
// the fullres one's voxels.
func (p *planner) lowres(full *Configuration, medianT []float64, cache map[string]int64) (*Configuration, error) {
	medianVoxels := prodF(medianT)
	patchVoxels := prodF(intsToF(full.PatchSize))
	spacing := slices.Clone(full.Spacing)
	var low *Configuration
	for patchVoxels/medianVoxels < lowresThreshold {
		maxSp := slices.Max(spacing)
		aniso := false
		for _, s := range spacing {
			if maxSp/s > 2 {
				aniso = true
			}
		}
		for a := range spacing {
			if !aniso || maxSp/spacing[a] > 2 {
				spacing[a] *= lowresSpacingStep
			}
		}
		shape := make([]float64, 3)
		scaled := 1.0
		for a := range 3 {
			f := full.Spacing[a] / spacing[a] * medianT[a]
			scaled *= f
			shape[a] = roundHalfEven(f)
		}
		medianVoxels = scaled
		var err error
		low, err = p.configuration(slices.Clone(spacing), shape, "3d_lowres", medianVoxels*float64(p.ds.NumTraining), cache)
		if err != nil {
			return nil, err
		}
		patchVoxels = prodF(intsToF(low.PatchSize))
		if len(cache) > 100000 {
			return nil, errors.New("plan: 3d_lowres search does not converge")
		}
	}
	if prodF(medianT)/medianVoxels < 2 {
		return nil, nil
	}
	return low, nil
}

// configuration is get_plans_for_configuration: an initial patch of the
// spacing's aspect ratio and the volume of 256³ (2048² in 2-D), clipped to
// the median shape; its topology; then, while the feature-map estimate for
// batch 2 exceeds the VRAM reference, the axis largest relative to the
// median shape loses one step of its divisibility; the batch size fills
// the remaining budget, at most 5 % of the dataset's voxels, at least 2.
func (p *planner) configuration(spacing, median []float64, name string, voxelsAll float64, cache map[string]int64) (*Configuration, error) {
	dim := len(spacing)
	pre := p.preset
	maxF, refVal, refBS := maxFeatures3D, pre.RefVal3D, referenceBatch3D
	if dim == 2 {
		maxF, refVal, refBS = maxFeatures2D, pre.RefVal2D, referenceBatch2D
	}
	inv := make([]float64, dim)
	for i, s := range spacing {
		inv[i] = 1 / s
	}
	edge := 256.0
	if dim == 2 {
		edge = 2048
	}
	scale := math.Pow(math.Pow(edge, float64(dim))/prodF(inv), 1/float64(dim))
	initial := make([]float64, dim)
	for i := range dim {
		initial[i] = math.Min(roundHalfEven(inv[i]*scale), median[i])
	}
	topo := poolAndConvProps(spacing, initial, minFeatureMapEdge, 999999)
	estimate := func(t Topology) int64 {
		key := fmt.Sprint(t.Patch, t.Strides)
		if e, ok := cache[key]; ok {
			return e
		}
		e := p.architecture(t, maxF).featureMapVoxels(t.Patch, p.ds.NumClasses)
		cache[key] = e
		return e
	}
	est := estimate(topo)
	reference := refVal * (p.vramGB / pre.RefGB)
	why := Reasons{InitialPatch: slices.Clone(topo.Patch), Reference: reference, ApproxVoxelsAll: voxelsAll}
	// ExperimentPlanner holds the estimate for batch 2 (÷ the reference
	// batch × 2) to the budget; the ResEnc planners the estimate itself.
	tooLarge := func(est int64) bool {
		if pre.Residual {
			return float64(est) > reference
		}
		return float64(est)/float64(refBS)*2 > reference
	}
	for tooLarge(est) {
		// The last axis among the largest patch/median ratios, as numpy's
		// argsort(...)[-1] (stable for so few elements).
		axis, best := 0, math.Inf(-1)
		for i := range dim {
			if r := float64(topo.Patch[i]) / median[i]; r >= best {
				axis, best = i, r
			}
		}
		patch := slices.Clone(topo.Patch)
		tmp := intsToF(patch)
		tmp[axis] -= float64(topo.DivisibleBy[axis])
		div := poolAndConvProps(spacing, tmp, minFeatureMapEdge, 999999).DivisibleBy
		patch[axis] -= div[axis]
		if patch[axis] < 1 {
			return nil, fmt.Errorf("plan: %s: the patch cannot shrink to fit %.3g GB of GPU memory", name, p.vramGB)
		}
		topo = poolAndConvProps(spacing, intsToF(patch), minFeatureMapEdge, 999999)
		est = estimate(topo)
		why.Reductions++
	}
	batch := int(roundHalfEven(reference / float64(est) * float64(refBS)))
	cap5 := int(roundHalfEven(voxelsAll * pre.MaxDatasetCovered / prodF(intsToF(topo.Patch))))
	why.BatchFromVRAM, why.BatchCap5Pct, why.Estimate = batch, cap5, est
	batch = max(min(batch, cap5), minBatchSize)

	// The ResEnc planners reuse the default plans' preprocessed data
	// for 2d and 3d_fullres (generate_data_identifier).
	dataID := p.preset.PlansName + "_" + name
	if pre.Residual && name != "3d_lowres" {
		dataID = PresetDefault.PlansName + "_" + name
	}
	schemes, mask := p.normalization()
	return &Configuration{
		DataIdentifier:          dataID,
		BatchSize:               batch,
		PatchSize:               topo.Patch,
		MedianImageSizeInVoxels: median,
		Spacing:                 spacing,
		NormalizationSchemes:    schemes,
		UseMaskForNorm:          mask,
		Architecture:            p.architecture(topo, maxF),
		Why:                     why,
	}, nil
}

// architecture is the network the preset plans for topology t (features
// doubling from 32, capped at maxF): PlainConvUNet with convsPerStage
// convs per encoder and decoder stage, or ResidualEncoderUNet with
// residualBlocksPerStage blocks per stage and one decoder conv per stage.
func (p *planner) architecture(t Topology, maxF int) Architecture {
	n := t.Stages()
	each := func(count, v int) []int {
		s := make([]int, count)
		for i := range s {
			s[i] = v
		}
		return s
	}
	ak := ArchKwargs{NStages: n, FeaturesPerStage: featuresPerStage(n, baseFeatures, maxF), KernelSizes: t.Kernels, Strides: t.Strides, ConvBias: true}
	if !p.preset.Residual {
		ak.NConvPerStage, ak.NConvPerStageDecoder = each(n, convsPerStage), each(n-1, convsPerStage)
		return Architecture{NetworkClassName: plainUNetClass, ArchKwargs: ak}
	}
	ak.NBlocksPerStage = make([]int, n)
	for i := range ak.NBlocksPerStage {
		ak.NBlocksPerStage[i] = residualBlocksPerStage[min(i, len(residualBlocksPerStage)-1)]
	}
	ak.NConvPerStageDecoder = each(n-1, 1)
	return Architecture{NetworkClassName: residualUNetClass, ArchKwargs: ak}
}

// featureMapVoxels is the network's VRAM proxy (its
// compute_conv_feature_map_size, without deep supervision) for one sample
// of patch and classes outputs.
func (a Architecture) featureMapVoxels(patch []int, classes int) int64 {
	ak := a.ArchKwargs
	dec := convsPerStage
	if len(ak.NConvPerStageDecoder) > 0 {
		dec = ak.NConvPerStageDecoder[0] // the planners' are uniform
	}
	if a.Residual() {
		return residualFeatureMapVoxels(patch, ak.Strides, ak.FeaturesPerStage, ak.NBlocksPerStage, dec, classes)
	}
	return featureMapVoxels(patch, ak.Strides, ak.FeaturesPerStage, ak.NConvPerStage[0], classes)
}

// normalization is determine_normalization_scheme_and_whether_mask_is_used_for_norm
// with get_normalization_scheme's channel-name table: "CT" (any case) is
// CTNormalization, "nonorm", "zscore", "rescale_to_0_1" and "rgb_to_0_1"
// their schemes, anything else ZScoreNormalization; the nonzero mask is
// used for z-scoring when cropping kept less than 3/4 of the median image.
func (p *planner) normalization() ([]string, []bool) {
	var schemes []string
	var mask []bool
	useMask := p.fp.MedianRelativeSizeAfterCropping < maskForNormThreshold
	for _, c := range p.ds.ChannelNames {
		s := "ZScoreNormalization"
		switch strings.ToLower(c) {
		case "ct":
			s = "CTNormalization"
		case "nonorm":
			s = "NoNormalization"
		case "rescale_to_0_1":
			s = "RescaleTo01Normalization"
		case "rgb_to_0_1":
			s = "RGBTo01Normalization"
		}
		schemes = append(schemes, s)
		mask = append(mask, useMask && s == "ZScoreNormalization")
	}
	return schemes, mask
}

func prodF(x []float64) float64 {
	p := 1.0
	for _, v := range x {
		p *= v
	}
	return p
}

func intsToF(x []int) []float64 {
	o := make([]float64, len(x))
	for i, v := range x {
		o[i] = float64(v)
	}
	return o
}

// MarshalJSON writes 3d_cascade_fullres as nnU-Net does, with only its
// parents' names.
func (c *Configuration) MarshalJSON() ([]byte, error) {
	if c.InheritsFrom != "" {
		return json.Marshal(map[string]string{"inherits_from": c.InheritsFrom, "previous_stage": c.PreviousStage})
	}
	type plain Configuration // without this method
	return json.Marshal((*plain)(c))
}
