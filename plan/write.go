package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// Files names what Write puts in its folder.
const (
	FingerprintFile = "dataset_fingerprint.json"
	PlansFile       = "plans.json"
)

// YAMLConfigurations are the configurations Write renders as YAML, in
// order (3d_cascade_fullres is not one: voxtrain has no cascade).
var YAMLConfigurations = []string{"3d_fullres", "2d", "3d_lowres"}

// Write writes the fingerprint, the plans and one YAML per configuration
// (<name>.yaml) into dir, creating it; each file is replaced atomically.
// datasetDir is the dataset folder the YAMLs point to, written relative
// to dir when it can be. It returns the paths written.
func Write(dir, datasetDir string, fp *Fingerprint, p *Plans, ds Dataset) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	ref := datasetDir
	if a, err := filepath.Abs(datasetDir); err == nil {
		ref = a
		if ad, err := filepath.Abs(dir); err == nil {
			if r, err := filepath.Rel(ad, a); err == nil {
				ref = r
			}
		}
	}
	var written []string
	put := func(name string, b []byte) error {
		path := filepath.Join(dir, name)
		if err := atomicfile.WriteFileUmask(path, b, 0o644); err != nil {
			return fmt.Errorf("plan: write %s: %w", path, err)
		}
		written = append(written, path)
		return nil
	}
	for name, v := range map[string]any{FingerprintFile: fp, PlansFile: p} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("plan: encode %s: %w", name, err)
		}
		if err := put(name, append(b, '\n')); err != nil {
			return nil, err
		}
	}
	for _, name := range YAMLConfigurations {
		if p.Configurations[name] == nil {
			continue
		}
		y, err := YAML(p, name, fp, ds, YAMLOptions{Dataset: ref, Experiment: ds.Name})
		if err != nil {
			return nil, err
		}
		if err := put(name+".yaml", []byte(y)); err != nil {
			return nil, err
		}
	}
	slices.Sort(written)
	return written, nil
}
