package config

import (
	"time"

	"github.com/voxtrain/voxtrain/augment"
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
	none, _ := augment.Preset(augment.PresetNone)
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
		// nnU-Net's (augment.Preset).
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
