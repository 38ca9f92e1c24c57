package config

import (
	"fmt"
	"time"
)

// Default returns the config of an empty file: every setting at its
// default (except data.dataset and train.patch_size, which have none).
func Default() Config {
	c := table()
	c.derive()
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
			Workers:              Workers{}, // min(8, cores−1)
			PrefetchFactor:       2,         // PyTorch's DataLoader prefetch_factor
			OversampleForeground: 0.33,      // oversample_foreground_percent
			Source:               "auto",
			CacheBytes:           4 << 30,
			StoreChunk:           64,
			StoreCodec:           "s2-shuffle",
			Normalization:        StringList{"zscore"}, // ZScoreNormalization
			OnError:              "fail",
			WatchdogTimeout:      120 * time.Second,
		},

		// No augment: section means no augmentation; `preset: nnunet` is
		// nnU-Net's (AugmentPreset, below).
		Augment: none,

		Train: Train{
			Epochs:             1000, // num_epochs
			IterationsPerEpoch: 250,  // num_iterations_per_epoch
			BatchSize:          2,    // 3d_fullres plans' batch_size
			LogEverySeconds:    10,
		},

		Validation: Validation{
			Every:   0, // after the last epoch only
			Mode:    "patch",
			Overlap: 0.5, // tile_step_size 0.5
		},

		Checkpoint: Checkpoint{
			BestMode:   "max", // mean validation Dice
			KeepRecent: 2,
		},
	}
}

// derive fills the settings whose default follows another setting.
func (c *Config) derive() {
	c.Model = c.Model.WithDefaults()
	c.Loss = c.Loss.WithDefaults()
	c.Optim = c.Optim.WithDefaults()
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
