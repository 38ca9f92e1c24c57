package config

import (
	"cmp"
	"fmt"
	"time"
)

// Default returns the config of an empty file: every setting at its
// default (except data.dataset and train.patch_size, which have none).
func Default() Config {
	c := table()
	c.derive(nil)
	return c
}

// table is every setting's default value: a config file says only what
// differs, decoded on top of this table. The values are nnU-Net v2's where
// it has one (nnUNetTrainer.__init__, the 3d_fullres plans, the dataset
// fingerprint), cited beside each; a setting whose default depends on
// another one is filled in by derive, below.
func table() Config {
	none, _ := AugmentPreset(PresetNone)
	return Config{
		Experiment: "default",
		Seed:       0,
		Device:     "cpu",
		Threads:    0, // every core
		OutputDir:  "runs",
		RunID:      0,

		Data: Data{
			Format:               "auto",
			Fold:                 0,
			NumFolds:             5,         // nnU-Net: 5-fold cross-validation
			HoldoutFraction:      0,         // k folds; nnU-Net's 80:20 fallback is 0.2
			Workers:              Workers{}, // min(8, cores−1)
			PrefetchFactor:       2,         // PyTorch's DataLoader prefetch_factor
			OversampleForeground: 0.33,      // oversample_foreground_percent
			Source:               "auto",
			CacheBytes:           4 << 30,
			StoreChunk:           64,
			StoreCodec:           "s2-shuffle",
			Normalization:        StringList{"zscore"}, // ZScoreNormalization
			ResampleOrder:        "linear",             // nnU-Net's is "nnunet" (cubic images, one-hot linear labels)
			OnError:              "fail",
			WatchdogTimeout:      120 * time.Second,
		},

		// No augment: section means no augmentation; `preset: nnunet` is
		// nnU-Net's (AugmentPreset, below).
		Augment: none,

		// The reference U-Net of bench/torch_unet_step.py; nnU-Net's plans
		// set features 32…320 and deep supervision (configs/).
		Model: Model{
			InChannels:    1,
			NumClasses:    2,
			Features:      []int{16, 32, 64, 128},
			ConvsPerLevel: 2,          // n_conv_per_stage
			Norm:          "instance", // InstanceNorm3d, affine
			NormEps:       1e-5,
			Nonlinearity:  "leaky_relu",
			NegativeSlope: 0.01, // LeakyReLU(0.01)
			ConvBias:      true, // conv_bias
			Targets:       TargetsSoftmax,
		},

		// nnU-Net's DC_and_CE_loss: soft Dice (smooth 1e-5, no background)
		// plus cross-entropy, weight 1 each.
		Loss: Loss{
			Name:          "dice_ce",
			Smooth:        1e-5,
			SkeletonIters: 3, // clDice's reference code
			ClDiceSmooth:  1,
			PosWeight:     1,
		},

		// nnUNetTrainer: SGD, initial_lr 1e-2, momentum 0.99, Nesterov,
		// weight_decay 3e-5, clip_grad_norm_ 12, PolyLRScheduler(0.9).
		Optim: Optim{
			Name:     "sgd",
			Momentum: 0.99,
			Nesterov: true,
			Betas:    [2]float64{0.9, 0.999}, // AdamW's, PyTorch's defaults
			Eps:      1e-8,
			GradClip: 12,
			Schedule: Schedule{
				Name:           "poly",
				Exponent:       0.9,
				PctStart:       0.3, // OneCycleLR's
				DivFactor:      25,
				FinalDivFactor: 1e4,
			},
		},

		Train: Train{
			Epochs:             1000, // num_epochs
			IterationsPerEpoch: 250,  // num_iterations_per_epoch
			BatchSize:          2,    // 3d_fullres plans' batch_size
			LogEverySeconds:    10,
			InitMismatch:       InitMismatchError, // refuse a partial fine-tuning unless asked
		},

		Validation: Validation{
			Every:   0, // after the last epoch only
			Mode:    "patch",
			Overlap: 0.5, // tile_step_size 0.5
			// Off unless asked (nnU-Net's configs and train plan's ask for
			// last): on a CPU the whole-case predictions can take longer
			// than a short run's training.
			Final: FinalNone,
		},

		Checkpoint: Checkpoint{
			BestMode:   "max", // mean validation Dice
			KeepRecent: 2,
		},

		// metrics.jsonl is always written; TensorBoard event files, which
		// repeat it, only on request.
		Logging: Logging{TensorBoard: false},
	}
}

// derive fills the settings whose default follows another one the file
// gives (present reports whether a key, "model.levels", was in the file;
// nil: none was).
func (c *Config) derive(present func(key string) bool) {
	if present == nil {
		present = func(string) bool { return false }
	}
	// A manifest's masks write the ignore label into the labels they read.
	c.Data.IgnoreLabel = max(c.Loss.Ignore(), 0)
	// Multi-label targets change what a label byte is (bit c: class c).
	c.Data.MultiLabel = c.Model.MultiLabel()
	m := &c.Model
	// model.features from base_features (32), doubled per level and capped
	// at max_features (320), for levels (4) levels: nnU-Net's planner rule,
	// for a file that gives any of those and no features.
	if !present("model.features") && (present("model.base_features") || present("model.max_features") || present("model.levels")) {
		levels, base, maxF := cmp.Or(m.Levels, 4), cmp.Or(m.BaseFeatures, 32), cmp.Or(m.MaxFeatures, 320)
		m.Features = nil
		for f := range levels {
			m.Features = append(m.Features, min(base<<f, maxF))
		}
	}
}

// The settings below follow others whenever they are left out, in a file
// or in code: they are read through these methods.

// KernelSize is level l's convolution kernel: kernel_sizes[l], the one
// kernel_sizes entry for every level, or 3×3×3.
func (m Model) KernelSize(l int) [3]int {
	switch len(m.KernelSizes) {
	case 0:
		return [3]int{3, 3, 3}
	case 1:
		return m.KernelSizes[0]
	}
	return m.KernelSizes[l]
}

// DecoderConvsPerStage is the number of conv blocks per decoder stage:
// decoder_convs, or convs_per_level.
func (m Model) DecoderConvsPerStage() int { return cmp.Or(m.DecoderConvs, m.ConvsPerLevel) }

// ResidualBlocks is the number of residual blocks at level l of a
// residual encoder: blocks_per_level[l], or its one entry.
func (m Model) ResidualBlocks(l int) int {
	if len(m.BlocksPerLevel) == 1 {
		return m.BlocksPerLevel[0]
	}
	return m.BlocksPerLevel[l]
}

// Stride is the stride of level l's first convolution (and of the
// transposed convolution that comes back up to it): strides[l], or 1 at
// level 0 and 2 below.
func (m Model) Stride(l int) [3]int {
	switch {
	case len(m.Strides) > 0:
		return m.Strides[l]
	case l == 0:
		return [3]int{1, 1, 1}
	}
	return [3]int{2, 2, 2}
}

// TermWeights are the loss's term weights: those the file gives, the rest
// by name — dice_ce: ce 1, dice 1 (nnU-Net's DC_and_CE_loss); ce: ce 1;
// dice: dice 1; cldice: dice 0.5, cldice 0.5 (soft_dice_cldice, alpha
// 0.5); bce: none (the BCE term is always on); dice_bce: ce (its BCE) 1,
// dice 1 (nnU-Net's DC_and_BCE_loss).
func (l Loss) TermWeights() (ce, dice, cldice float64) {
	switch l.Name {
	case "dice_ce":
		ce, dice = 1, 1
	case "ce":
		ce = 1
	case "dice":
		dice = 1
	case "cldice":
		dice, cldice = 0.5, 0.5
	case "dice_bce":
		ce, dice = 1, 1
	}
	return cmpPtr(l.CEWeight, ce), cmpPtr(l.DiceWeight, dice), cmpPtr(l.ClDiceWeight, cldice)
}

// BaseLR is the learning rate the schedule starts from: lr, else the
// optimiser's — sgd 1e-2 (nnUNetTrainer's initial_lr), adamw 1e-3.
func (o Optim) BaseLR() float64 {
	if o.Name == "adamw" {
		return cmpPtr(o.LR, 1e-3)
	}
	return cmpPtr(o.LR, 1e-2)
}

// Decay is the weight decay: weight_decay, else the optimiser's — sgd 3e-5
// (nnUNetTrainer's), adamw 0.01 (PyTorch's AdamW).
func (o Optim) Decay() float64 {
	if o.Name == "adamw" {
		return cmpPtr(o.WeightDecay, 0.01)
	}
	return cmpPtr(o.WeightDecay, 3e-5)
}

// explicit returns c with every setting that follows another written out
// (the YAML a run saves says what it ran with).
func (c Config) explicit() Config {
	given, m := c.Model, &c.Model
	m.KernelSizes, m.Strides = nil, nil
	for l := range m.Features {
		m.KernelSizes = append(m.KernelSizes, given.KernelSize(l))
		m.Strides = append(m.Strides, given.Stride(l))
	}
	if m.Levels == 0 {
		m.Levels = len(m.Features)
	}
	ce, dice, cldice := c.Loss.TermWeights()
	c.Loss.CEWeight, c.Loss.DiceWeight, c.Loss.ClDiceWeight = &ce, &dice, &cldice
	lr, wd := c.Optim.BaseLR(), c.Optim.Decay()
	c.Optim.LR, c.Optim.WeightDecay = &lr, &wd
	return c
}

// cmpPtr is *p, or def when p is nil.
func cmpPtr(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

// Augmentation preset names.
const (
	PresetNNUNet = "nnunet"
	PresetLight  = "light"
	PresetNone   = "none"
)

// AugmentPreset returns the augment: section a preset names: the starting
// point that a config's augment: keys override.
//
// "nnunet" is nnU-Net v2's default training augmentation, from
// nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py (get_training_transforms
// and configure_rotation_dummyDA_mirroring_and_inital_patch_size) and the
// batchgeneratorsv2 transforms it builds:
//
//	SpatialTransform: p_rotation 0.2, rotation ±30° (3D patches; ±180° in-plane
//	  for anisotropic "dummy 2D" patches), p_scaling 0.2, scaling (0.7, 1.4),
//	  p_synchronize_scaling_across_axes 1, p_elastic_deform 0
//	GaussianNoiseTransform(noise_variance (0, 0.1), synchronize_channels) p 0.1
//	GaussianBlurTransform(blur_sigma (0.5, 1), p_per_channel 0.5, per axis) p 0.2
//	MultiplicativeBrightnessTransform(BGContrast (0.75, 1.25)) p 0.15
//	ContrastTransform(BGContrast (0.75, 1.25), preserve_range) p 0.15
//	SimulateLowResolutionTransform(scale (0.5, 1), p_per_channel 0.5) p 0.25
//	GammaTransform(BGContrast (0.7, 1.5), p_invert_image 1, retain stats) p 0.1
//	GammaTransform(BGContrast (0.7, 1.5), p_invert_image 0, retain stats) p 0.3
//	MirrorTransform(allowed_axes (0, 1, 2)): each axis with p 0.5
//
// Elastic deformation is off in v2 (p 0); its ranges here are ours. Rot90 is
// not in nnU-Net's default; it is off.
//
// "light" is a crop and mirroring on every axis (p 0.5 each), nothing else.
// "none" applies nothing. Both keep nnU-Net's ranges, so enabling a
// transform only takes its `p`.
func AugmentPreset(name string) (Augment, error) {
	c := Augment{
		Preset:        name,
		Interpolation: "linear",
		Rotation:      Rotation{Degrees: [2]float64{-30, 30}, Axes: []int{0, 1, 2}},
		Scaling:       Scaling{Range: [2]float64{0.7, 1.4}},
		Elastic:       Elastic{Magnitude: [2]float64{0, 8}, Scale: [2]float64{16, 32}},
		Mirror:        Mirror{Axes: []int{0, 1, 2}},
		Rot90:         Rot90{Axes: []int{1, 2}},
		Noise:         Noise{Std: [2]float64{0, 0.1}},
		Blur:          Blur{Sigma: [2]float64{0.5, 1}, PPerChannel: 0.5},
		Brightness:    Multiplier{Range: [2]float64{0.75, 1.25}},
		Contrast:      Contrast{Range: [2]float64{0.75, 1.25}, PreserveRange: true},
		LowRes:        LowRes{Scale: [2]float64{0.5, 1}, PPerChannel: 0.5, Axes: []int{0, 1, 2}},
		GammaInverted: Gamma{Range: [2]float64{0.7, 1.5}, RetainStats: true},
		Gamma:         Gamma{Range: [2]float64{0.7, 1.5}, RetainStats: true},
	}
	switch name {
	case PresetNNUNet:
		c.Rotation.P = 0.2
		c.Scaling.P = 0.2
		c.Mirror.P = 0.5
		c.Noise.P = 0.1
		c.Blur.P = 0.2
		c.Brightness.P = 0.15
		c.Contrast.P = 0.15
		c.LowRes.P = 0.25
		c.GammaInverted.P = 0.1
		c.Gamma.P = 0.3
	case PresetLight:
		c.Mirror.P = 0.5
	case PresetNone, "":
		c.Preset = PresetNone
	default:
		return Augment{}, fmt.Errorf("augment: unknown preset %q (want %s, %s or %s)", name, PresetNNUNet, PresetLight, PresetNone)
	}
	return c, nil
}
