package trainer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nn"
	"go.yaml.in/yaml/v3"
)

// Config is a run's whole YAML file. Every section is checked strictly:
// an unknown key anywhere is an error naming its line.
type Config struct {
	// Experiment names the run directory <output_dir>/<experiment>/.
	Experiment string `yaml:"experiment"`
	// Seed drives weight initialisation and (copied into data.seed when
	// that is unset) sampling and augmentation.
	Seed uint64 `yaml:"seed"`
	// Device is "cpu" or "cuda" (also "cuda:N", "cuda:N,tf32"); Threads caps the CPU device's goroutines
	// (0: all cores).
	Device  string `yaml:"device"`
	Threads int    `yaml:"threads"`
	// OutputDir holds the runs (default "runs", relative to the working
	// directory).
	OutputDir string `yaml:"output_dir"`
	// RunID numbers repeated runs of one experiment and fold.
	RunID int `yaml:"run_id"`

	Data       data.Config       `yaml:"data"`
	Augment    augment.Config    `yaml:"augment"`
	Model      nn.UNetConfig     `yaml:"model"`
	Loss       nn.LossConfig     `yaml:"loss"`
	Optim      nn.OptimConfig    `yaml:"optim"`
	Train      TrainConfig       `yaml:"train"`
	Validation ValidationConfig  `yaml:"validation"`
	Checkpoint checkpoint.Policy `yaml:"checkpoint"`
}

// TrainConfig is the `train:` section: the schedule of the loop.
type TrainConfig struct {
	// Epochs of IterationsPerEpoch optimiser steps each (nnU-Net: 1000 ×
	// 250). IterationsPerEpoch 0 takes data.iterations_per_epoch.
	Epochs             int `yaml:"epochs"`
	IterationsPerEpoch int `yaml:"iterations_per_epoch"`
	// BatchSize and PatchSize (D, H, W) of training batches.
	BatchSize int    `yaml:"batch_size"`
	PatchSize [3]int `yaml:"patch_size"`
	// LogEverySeconds spaces the plain progress lines printed when stdout
	// is not a terminal (default 10).
	LogEverySeconds float64 `yaml:"log_every_seconds"`
}

// ValidationConfig is the `validation:` section.
type ValidationConfig struct {
	// Every runs validation after every Every-th epoch and after the last
	// (0: only after the last; -1: never).
	Every int `yaml:"every"`
	// Mode is "patch" (plain patches of the held-out fold through the
	// worker pool, nnU-Net's pseudo-Dice: fast), "sliding" (whole cases by
	// sliding window, per-case Dice and HD95, as nnU-Net's final
	// validation) or "both".
	Mode string `yaml:"mode"`
	// Iterations is the number of patch batches per validation (0: one
	// pass over the validation cases).
	Iterations int `yaml:"iterations"`
	// MaxCases caps the cases of a sliding-window validation (0: all).
	MaxCases int `yaml:"max_cases"`
	// Overlap of neighbouring windows (nnU-Net: 0.5); Mirror averages over
	// flips of every axis (nnU-Net's test-time mirroring).
	Overlap float64 `yaml:"overlap"`
	Mirror  bool    `yaml:"mirror"`
	// HD95 also computes the 95th-percentile Hausdorff distance per case
	// and class (sliding mode).
	HD95 bool `yaml:"hd95"`
}

// LoadConfig reads a run config. Relative paths inside data: are taken
// relative to the config file's folder, so a config works from any
// working directory. Defaults are applied; the result is validated.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := ParseConfig(b, path)
	if err != nil {
		return nil, err
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Data.ResolvePaths(base)
	return c, nil
}

// ParseConfig decodes a config document (name is used in errors). Paths
// are left as written.
func ParseConfig(b []byte, name string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	if c.Augment.Preset == "" {
		// No augment: section at all means no augmentation, as written.
		c.Augment, _ = augment.Preset(augment.PresetNone)
	}
	return &c, nil
}

// Resolve applies defaults and validates the config, after command-line
// overrides were written into it.
func (c *Config) Resolve() error {
	if c.Experiment == "" {
		c.Experiment = "default"
	}
	if c.Device == "" {
		c.Device = "cpu"
	}
	if c.OutputDir == "" {
		c.OutputDir = "runs"
	}
	if c.Data.Seed == 0 {
		c.Data.Seed = c.Seed
	}
	if c.Train.IterationsPerEpoch == 0 {
		c.Train.IterationsPerEpoch = c.Data.IterationsPerEpoch
	}
	if c.Train.IterationsPerEpoch == 0 {
		c.Train.IterationsPerEpoch = 250 // nnU-Net's num_iterations_per_epoch
	}
	c.Data.IterationsPerEpoch = c.Train.IterationsPerEpoch
	if c.Train.Epochs == 0 {
		c.Train.Epochs = 1000 // nnU-Net's num_epochs
	}
	if c.Train.BatchSize == 0 {
		c.Train.BatchSize = 2 // nnU-Net 3d_fullres
	}
	if c.Train.LogEverySeconds == 0 {
		c.Train.LogEverySeconds = 10
	}
	if c.Validation.Mode == "" {
		c.Validation.Mode = "patch"
	}
	if c.Validation.Overlap == 0 {
		c.Validation.Overlap = 0.5
	}
	if c.Checkpoint.BestMode == "" {
		c.Checkpoint.BestMode = "max" // mean validation Dice
	}
	c.Model = c.Model.WithDefaults()
	c.Loss = c.Loss.WithDefaults()
	c.Optim = c.Optim.WithDefaults()
	c.Data = c.Data.Defaults()

	var errs []error
	if !strings.HasPrefix(c.Device, "cpu") && !strings.HasPrefix(c.Device, "cuda") && !strings.HasPrefix(c.Device, "gpu") {
		errs = append(errs, fmt.Errorf("device: %q, want cpu, cuda, cuda:N or cuda:N,tf32", c.Device))
	}
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("threads: %d, want ≥ 0", c.Threads))
	}
	if c.Train.Epochs < 1 || c.Train.IterationsPerEpoch < 1 || c.Train.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("train: epochs %d, iterations_per_epoch %d, batch_size %d: all must be ≥ 1",
			c.Train.Epochs, c.Train.IterationsPerEpoch, c.Train.BatchSize))
	}
	for i, p := range c.Train.PatchSize {
		if p < 1 {
			errs = append(errs, fmt.Errorf("train.patch_size[%d] = %d: want [D, H, W] of positive sizes", i, p))
			break
		}
	}
	switch c.Validation.Mode {
	case "patch", "sliding", "both":
	default:
		errs = append(errs, fmt.Errorf("validation.mode: %q, want patch, sliding or both", c.Validation.Mode))
	}
	if c.Validation.Overlap < 0 || c.Validation.Overlap >= 1 {
		errs = append(errs, fmt.Errorf("validation.overlap: %v, want 0 ≤ overlap < 1", c.Validation.Overlap))
	}
	if c.Validation.Every < -1 {
		errs = append(errs, fmt.Errorf("validation.every: %d, want ≥ -1", c.Validation.Every))
	}
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("model: %w", err))
	} else {
		// The decoder restores each level's size only if every axis divides
		// by the product of the strides down to it.
		prod := [3]int{1, 1, 1}
		for _, st := range c.Model.Strides {
			for a := range prod {
				prod[a] *= st[a]
			}
		}
		for a, p := range c.Train.PatchSize {
			if p > 0 && p%prod[a] != 0 {
				errs = append(errs, fmt.Errorf("train.patch_size %v: axis %d (%d) is not divisible by %d, the product of the model's strides on that axis",
					c.Train.PatchSize, a, p, prod[a]))
			}
		}
	}
	if err := c.Loss.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("loss: %w", err))
	}
	if err := c.Optim.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("optim: %w", err))
	}
	if err := c.Data.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("data: %w", err))
	}
	if err := c.Augment.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("augment: %w", err))
	}
	return errors.Join(errs...)
}

// YAML returns the resolved config as YAML (written to the run directory
// and into every checkpoint).
func (c *Config) YAML() (string, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode resolved config: %w", err)
	}
	return string(b), nil
}

// validates reports whether validation runs after epoch e (1-based) of n.
func (v ValidationConfig) validates(e, n int) bool {
	if v.Every < 0 {
		return false
	}
	if e == n {
		return true
	}
	return v.Every > 0 && e%v.Every == 0
}
