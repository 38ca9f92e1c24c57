// Package databench measures the data pipeline alone, with no model: the
// engine behind `train bench-data`, and the config file reader that
// `train bench-data` and `train prepare` share until the trainer owns the
// full config schema.
package databench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/data"
	"go.yaml.in/yaml/v3"
)

// File is the part of a voxtrain config these commands read: the data and
// augment sections, and the patch and batch size from the train section.
// Other top-level keys and other train keys are left to the trainer.
type File struct {
	Data    data.Config    `yaml:"data"`
	Augment augment.Config `yaml:"augment"`
	Train   struct {
		PatchSize []int `yaml:"patch_size"`
		BatchSize int   `yaml:"batch_size"`
		// Rest holds the trainer's keys, not read here.
		Rest map[string]yaml.Node `yaml:",inline"`
	} `yaml:"train"`
	// Rest holds other sections, not read here.
	Rest map[string]yaml.Node `yaml:",inline"`
}

// LoadFile reads a config file. Unknown keys inside data: and augment: are
// errors with their line numbers. Relative paths in data: (dataset, store,
// splits_file, case files) are taken relative to the config file's folder.
func LoadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if f.Augment.Preset == "" {
		f.Augment, _ = augment.Preset(augment.PresetNone)
	}
	f.Data.ResolvePaths(filepath.Dir(path))
	return &f, nil
}

// Patch returns train.patch_size as (D, H, W).
func (f *File) Patch() ([3]int, error) {
	p := f.Train.PatchSize
	if len(p) != 3 || p[0] < 1 || p[1] < 1 || p[2] < 1 {
		return [3]int{}, fmt.Errorf("train.patch_size: %v, want [D, H, W] of positive sizes", p)
	}
	return [3]int{p[0], p[1], p[2]}, nil
}
