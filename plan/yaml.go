package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// YAMLOptions say where a configuration's YAML points.
type YAMLOptions struct {
	// Dataset is data.dataset as written: the dataset folder, relative to
	// the YAML's folder or absolute (config.Load resolves it against the
	// file's folder).
	Dataset string
	// Experiment prefixes the experiment name.
	Experiment string
}

// YAML renders configuration name of p as a run config that `train
// --config` reads unchanged, every derived value with a comment saying why
// it has that value. Axes are put back into the files' (D, H, W) order:
// voxtrain has no transpose, and a U-Net on permuted axes is the same
// network. A 2-D configuration becomes a 3-D one whose patch, kernels and
// strides are 1 along nnU-Net's slicing axis. fp provides the spacings
// (to tell whether resampling is needed) and the ct statistics.
func YAML(p *Plans, name string, fp *Fingerprint, ds Dataset, o YAMLOptions) (string, error) {
	c := p.Configurations[name]
	if c == nil || c.PatchSize == nil {
		return "", fmt.Errorf("plan: no configuration %q to write", name)
	}
	fwd := p.TransposeForward
	twoD := len(c.PatchSize) == 2
	// back maps a per-axis value of the configuration to (D, H, W); in
	// 2-D the slicing axis fwd[0] gets fill.
	back := func(v []int, fill int) [3]int {
		var o [3]int
		if twoD {
			o[fwd[0]] = fill
			o[fwd[1]], o[fwd[2]] = v[0], v[1]
			return o
		}
		for i, a := range fwd {
			o[a] = v[i]
		}
		return o
	}
	backF := func(v []float64) [3]float64 {
		var o [3]float64
		if twoD {
			o[fwd[0]] = math.NaN()
			o[fwd[1]], o[fwd[2]] = v[0], v[1]
			return o
		}
		for i, a := range fwd {
			o[a] = v[i]
		}
		return o
	}
	ak := c.Architecture.ArchKwargs
	encConvs, decoderConvs, err := convCounts(name, c.Architecture)
	if err != nil {
		return "", err
	}
	patch := back(c.PatchSize, 1)
	var kernels, strides [][3]int
	for s := range ak.NStages {
		kernels = append(kernels, back(ak.KernelSizes[s], 1))
		strides = append(strides, back(ak.Strides[s], 1))
	}
	spacing := backF(c.Spacing)
	if twoD {
		// Across slices each case keeps its own spacing, as nnU-Net's
		// DefaultPreprocessor gives a 2d configuration "the original
		// spacing" along the slicing axis: target_spacing's 0.
		spacing[fwd[0]] = 0
	}
	axisName := [3]string{"D", "H", "W"}
	dhw := func(v [3]int) string { return fmt.Sprintf("[%d, %d, %d]", v[0], v[1], v[2]) }
	list := func(v [][3]int) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = dhw(x)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	ints := func(v []int) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.Itoa(x)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 10, 64) }

	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	if c.Architecture.Residual() {
		line("# %s, planned by `train plan` with nnU-Net v2's residual-encoder planner rules", name)
		line("# (residual_encoder_unet_planners.py, plans %s) for a GPU of %s GB, from the dataset", p.PlansName, num(p.VRAMTargetGB))
	} else {
		line("# %s, planned by `train plan` with nnU-Net v2's ExperimentPlanner rules", name)
		line("# (default_experiment_planner.py) for a GPU of %s GB, from the dataset", num(p.VRAMTargetGB))
	}
	line("# fingerprint beside this file (%d cases). plans.json holds the same plan", ds.NumTraining)
	line("# in nnU-Net's layout; docs/PLANNING.md explains the rules.")
	line("#")
	line("#   train --config %s.yaml --fold 0", name)
	if name == "3d_lowres" {
		line("#")
		line("# voxtrain has no cascade: this trains 3d_lowres as a model of its own, not as the")
		line("# first stage of nnU-Net's 3d_cascade_fullres.")
	}
	line("experiment: %s_%s", o.Experiment, name)
	line("seed: 12345")
	line("device: cuda                      # sized for a GPU (--device cpu works, slowly)")
	line("")
	line("data:")
	line("  dataset: %s", yamlString(o.Dataset))
	line("  fold: 0")
	line("  num_folds: 5                    # nnU-Net's 5-fold cross-validation")

	// Normalisation per channel.
	var norms []string
	var ct *IntensityStats
	ctChannel := -1
	for i, s := range c.NormalizationSchemes {
		switch s {
		case "CTNormalization":
			norms = append(norms, "ct")
			if ct == nil {
				st := fp.ForegroundIntensityPropertiesPerChannel[strconv.Itoa(i)]
				ct, ctChannel = &st, i
			}
		case "ZScoreNormalization":
			norms = append(norms, "zscore")
		default: // NoNormalization, and the rescalings voxtrain lacks
			norms = append(norms, "none")
		}
	}
	line("  normalization: [%s]", strings.Join(norms, ", "))
	for i, s := range c.NormalizationSchemes {
		ch := fmt.Sprintf("channel %d (%q)", i, ds.ChannelNames[i])
		switch s {
		case "CTNormalization":
			line("  #   %s: ct, as nnU-Net for a channel named CT: clip to the dataset's foreground 0.5/99.5 percentiles, then its mean and std", ch)
		case "ZScoreNormalization":
			if c.UseMaskForNorm[i] {
				line("  #   %s: zscore (nnU-Net's default) inside the nonzero mask only (use_mask_for_norm:", ch)
				line("  #   cropping kept %.2f < 3/4 of the median image)", fp.MedianRelativeSizeAfterCropping)
			} else {
				line("  #   %s: zscore over the whole image (nnU-Net's default for a channel not named CT;", ch)
				line("  #   use_mask_for_norm false: cropping kept %.2f >= 3/4 of the median image)", fp.MedianRelativeSizeAfterCropping)
			}
		case "NoNormalization":
			line("  #   %s: none (named nonorm)", ch)
		default:
			line("  #   %s: nnU-Net would use %s, which voxtrain lacks; none keeps the intensities as stored", ch, s)
		}
	}
	mask, anyMask := make([]string, len(c.UseMaskForNorm)), false
	for i, m := range c.UseMaskForNorm {
		mask[i] = strconv.FormatBool(m)
		anyMask = anyMask || m
	}
	if anyMask {
		line("  use_mask_for_norm: [%s]   # nnU-Net's, per channel: z-score statistics over the nonzero mask, 0 outside", strings.Join(mask, ", "))
	}
	line("  crop_to_nonzero: true     # as nnU-Net's preprocessing always: each case cropped to its nonzero box, predictions pasted back")
	if ct != nil {
		line("  ct_window: [%s, %s]     # channel %d's foreground percentile_00_5 and percentile_99_5 (dataset_fingerprint.json)", num(ct.Percentile00_5), num(ct.Percentile99_5), ctChannel)
		line("  ct_mean: %s            # its foreground mean", num(ct.Mean))
		line("  ct_std: %s             # its foreground std", num(ct.Std))
		if n := strings.Count(strings.Join(norms, ","), "ct"); n > 1 {
			line("  # voxtrain has one ct window for all ct channels: channel %d's; nnU-Net has one per channel", ctChannel)
		}
	}
	sp := fmt.Sprintf("[%s, %s, %s]", num(spacing[0]), num(spacing[1]), num(spacing[2]))
	if fp.SpacingUnit != "" {
		line("  spacing_unit: %s   # the cases' unit, target_spacing's: predict converts it into an input's", fp.SpacingUnit)
	}
	line("  target_spacing: %s", sp)
	line("  resample_order: nnunet    # images cubic, labels one-hot linear, nearest across slices when anisotropic (> 3)")
	if name == "3d_lowres" {
		line("  #   the fullres spacing coarsened 3 %% a step (first the axes finer than half the coarsest) until")
		line("  #   the patch holds >= 1/4 of the median image's voxels (nnU-Net's lowres_creation_threshold)")
	} else if twoD {
		line("  #   in-plane the 3d_fullres spacing; across slices (axis %s, 0) each case keeps its own, as nnU-Net's 2d", axisName[fwd[0]])
	} else if p.TargetSpacingGiven != nil {
		line("  #   given by hand (train plan --target-spacing, nnU-Net's -overwrite_target_spacing), not the cases' median")
	} else {
		line("  #   the median spacing of the cases (the coarsest axis: its 10th percentile when very anisotropic)")
	}
	if !needsResampling(fp, spacing) {
		line("  #   every training case already has this spacing (resampling them is a copy); cases predicted")
		line("  #   with other spacings are resampled to it, as nnU-Net resamples every case it predicts")
	}
	line("  oversample_foreground: 0.33     # nnU-Net's oversample_foreground_percent")
	line("")
	line("augment:")
	line("  preset: nnunet                  # nnU-Net's default augmentation")
	switch {
	case twoD:
		in := []int{fwd[1], fwd[2]}
		line("  rotation: {axes: [%d], degrees: [-180, 180]}   # 2-D: in-plane only (about axis %s), nnU-Net's ±180° for 2d", fwd[0], axisName[fwd[0]])
		line("  mirror: {axes: %s}                            # 2-D: mirror in-plane axes only", ints(in))
	case dummy2D(c.PatchSize):
		line("  rotation: {axes: [%d], degrees: [-180, 180]}   # patch %v is anisotropic (>3× between axes): nnU-Net's dummy 2-D augmentation, in-plane only", fwd[0], patch)
	}
	line("")
	line("model:")
	line("  in_channels: %d", len(c.NormalizationSchemes))
	if len(ds.Regions) > 0 {
		line("  targets: multi_label            # dataset.json's nnU-Net regions: one sigmoid output per region")
		line("  num_classes: %d                  # the regions (%s), no background channel", len(ds.Regions), strings.Join(ds.Regions, ", "))
		line("  regions_class_order: %s        # dataset.json's: the label value each region paints", ints(ds.RegionsClassOrder))
	} else if ds.IgnoreLabel > 0 {
		line("  num_classes: %d                  # background included; not the ignore label %d", ds.Outputs, ds.IgnoreLabel)
	} else {
		line("  num_classes: %d                  # background included", ds.NumClasses)
	}
	maxF := maxFeatures3D
	if twoD {
		maxF = maxFeatures2D
	}
	line("  features: %s", ints(ak.FeaturesPerStage))
	line("  #   %d stages (n_stages): 32 doubling per stage, capped at %d (nnU-Net's UNet_base_num_features, UNet_max_features_%s)", ak.NStages, maxF, map[bool]string{true: "2d", false: "3d"}[twoD])
	line("  kernel_sizes: %s", list(kernels))
	line("  #   (D, H, W) per stage: 3 along an axis once its spacing is within 2× of the finest, else 1 (get_pool_and_conv_props)")
	line("  strides: %s", list(strides))
	line("  #   halve every axis within 2× of the finest spacing while it keeps >= 8 voxels (>= 12 when it is the only one)")
	if twoD {
		line("  #   2-D: kernels and strides are 1 across slices (axis %s), so this 3-D network is nnU-Net's 2-D one", axisName[fwd[0]])
	}
	if c.Architecture.Residual() {
		line("  encoder: residual               # nnU-Net's ResidualEncoderUNet (the %s preset's network)", p.PlansName)
		line("  blocks_per_level: %s   # n_blocks_per_stage: residual blocks (BasicBlockD) per stage", ints(ak.NBlocksPerStage))
		line("  decoder_convs: %d                # n_conv_per_stage_decoder", decoderConvs)
	} else {
		line("  convs_per_level: %d              # nnU-Net's n_conv_per_stage", encConvs)
		if decoderConvs != encConvs {
			line("  decoder_convs: %d                # n_conv_per_stage_decoder", decoderConvs)
		}
	}
	if ak.NStages >= 3 {
		line("  deep_supervision: true          # nnU-Net trains with deep supervision")
	} else {
		line("  deep_supervision: false         # nnU-Net uses it; voxtrain needs >= 3 stages for it")
	}
	line("")
	line("loss:")
	if len(ds.Regions) > 0 {
		line("  name: dice_bce                  # nnU-Net's DC_and_BCE_loss for regions")
	} else {
		line("  name: dice_ce                   # nnU-Net's Dice + CE")
	}
	switch {
	case ds.IgnoreLabel > 0 && len(ds.Regions) > 0:
		line("  ignore_label: %d               # dataset.json's \"ignore\", read as multi-label labels' ignore byte: left out of the loss and metrics", ds.IgnoreLabel)
	case ds.IgnoreLabel > 0:
		line("  ignore_label: %d                 # dataset.json's \"ignore\": its voxels are left out of the loss and metrics, as nnU-Net's", ds.IgnoreLabel)
	}
	line("")
	line("optim:                            # nnU-Net's SGD, poly schedule")
	line("  name: sgd")
	line("  lr: 0.01")
	line("  momentum: 0.99")
	line("  nesterov: true")
	line("  weight_decay: 3.0e-5")
	line("  grad_clip: 12")
	line("  schedule:")
	line("    name: poly")
	line("    exponent: 0.9")
	line("")
	line("train:")
	line("  epochs: 1000                    # nnU-Net's 1000 epochs of 250 iterations")
	line("  iterations_per_epoch: 250")
	w := c.Why
	cover := "5 %" // max_dataset_covered: 1 in the ResEnc planners
	if c.Architecture.Residual() {
		cover = "100 %"
	}
	line("  batch_size: %d", c.BatchSize)
	switch {
	case c.BatchSize == w.BatchFromVRAM:
		line("  #   what the VRAM budget allows (reference %.3g / estimate %d × %d)", w.Reference, w.Estimate, refBatch(twoD))
	case c.BatchSize == w.BatchCap5Pct:
		line("  #   capped so one batch covers at most %s of the dataset's voxels (%.0f); the VRAM budget allowed %d", cover, w.ApproxVoxelsAll, w.BatchFromVRAM)
	default:
		line("  #   nnU-Net's minimum of 2 (the VRAM budget allowed %d, the %s cap %d)", w.BatchFromVRAM, cover, w.BatchCap5Pct)
	}
	line("  patch_size: %s", dhw(patch))
	med := backF(c.MedianImageSizeInVoxels)
	medS := make([]string, 0, 3)
	for _, m := range med {
		if math.IsNaN(m) {
			medS = append(medS, "1")
		} else {
			medS = append(medS, num(m))
		}
	}
	line("  #   (D, H, W): the spacing's aspect ratio at the volume of %s, clipped to the median image", map[bool]string{true: "2048²", false: "256³"}[twoD])
	line("  #   [%s] and padded to a multiple of the strides' product", strings.Join(medS, ", "))
	if w.Reductions > 0 {
		line("  #   (%v), then shrunk %d times to fit the VRAM budget (feature-map estimate %d <= %.3g)", back(w.InitialPatch, 1), w.Reductions, w.Estimate, w.Reference)
	}
	line("")
	line("validation:")
	line("  every: 1")
	line("  mode: patch                     # nnU-Net's pseudo-Dice on 50 batches per epoch")
	line("  iterations: 50")
	line("  final: last                     # nnU-Net's final validation: fold_<k>/run_<r>/validation/ (train --npz adds CASE.npz)")
	line("  mirror: true                    # with test-time mirroring, as nnU-Net's (8 passes)")
	line("")
	line("checkpoint:")
	line("  best_mode: max")
	line("  every_epochs: 50")
	line("  keep: 4")
	return b.String(), nil
}

func refBatch(twoD bool) int {
	if twoD {
		return referenceBatch2D
	}
	return referenceBatch3D
}

// dummy2D is nnU-Net's do_dummy_2d_data_aug for 3-D patches
// (nnUNetTrainer.configure_rotation_dummyDA_mirroring_and_inital_patch_size):
// the patch's largest edge is more than ANISO_THRESHOLD times its first
// (transposed, coarsest) one.
func dummy2D(patch []int) bool {
	return len(patch) == 3 && float64(slices.Max(patch))/float64(patch[0]) > anisoThreshold
}

// needsResampling reports whether some case's spacing differs from target
// (axes of 0, each case's own, ignored) by more than a part in 10⁶.
func needsResampling(fp *Fingerprint, target [3]float64) bool {
	for _, s := range fp.Spacings {
		for a := range 3 {
			if target[a] != 0 && math.Abs(s[a]-target[a]) > 1e-6*target[a] {
				return true
			}
		}
	}
	return false
}

// yamlString quotes s when YAML would read it as something else.
func yamlString(s string) string {
	if s == "" || strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`") || strings.TrimSpace(s) != s {
		return strconv.Quote(s)
	}
	return s
}

// convCounts returns the conv blocks per encoder stage (plain networks)
// and per decoder stage of configuration name's network, which voxtrain
// holds as one number each: lists that vary by stage, or a residual
// network without n_blocks_per_stage, are an error naming the key.
func convCounts(name string, a Architecture) (enc, dec int, err error) {
	ak := a.ArchKwargs
	uniform := func(key string, v []int, want int) (int, error) {
		if len(v) == 0 {
			return 2, nil // nnU-Net's default, which its planners always write
		}
		if len(v) != want {
			return 0, fmt.Errorf("plan: %s's %s has %d entries for %d stages", name, key, len(v), want)
		}
		for _, x := range v {
			if x != v[0] || x < 1 {
				return 0, fmt.Errorf("plan: %s's %s %v: voxtrain takes one number of conv blocks for every stage", name, key, v)
			}
		}
		return v[0], nil
	}
	if enc, err = uniform("n_conv_per_stage", ak.NConvPerStage, ak.NStages); err != nil {
		return 0, 0, err
	}
	if dec, err = uniform("n_conv_per_stage_decoder", ak.NConvPerStageDecoder, ak.NStages-1); err != nil {
		return 0, 0, err
	}
	if a.Residual() {
		if len(ak.NBlocksPerStage) != ak.NStages {
			return 0, 0, fmt.Errorf("plan: %s's n_blocks_per_stage %v: want one entry for each of the %d stages (a ResidualEncoderUNet)", name, ak.NBlocksPerStage, ak.NStages)
		}
		for _, b := range ak.NBlocksPerStage {
			if b < 1 {
				return 0, 0, fmt.Errorf("plan: %s's n_blocks_per_stage %v: want >= 1 block per stage", name, ak.NBlocksPerStage)
			}
		}
	}
	return enc, dec, nil
}
