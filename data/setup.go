package data

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/config"
)

// SetupOptions configures Setup.
type SetupOptions struct {
	// Logger receives progress (default slog.Default()).
	Logger *slog.Logger
	// SplitsDir receives generated splits when the config names no splits
	// file and the dataset and store hold none: a training's experiment
	// folder, <output_dir>/<experiment>, shared by its folds and runs.
	// Empty: generated splits are kept in memory only (they come out the
	// same wherever they are generated again).
	SplitsDir string
}

// Setup writes what Open only reads, and returns cfg completed: the ct
// statistics cfg leaves to compute (cached in the store folder, see
// resolveCT), the splits of a fold (see setupSplits: an existing file,
// else the generated splits written to o.SplitsDir, never into the dataset
// or store folder), and
// the prepared store, brought up to date, when the source reads it
// (source store, or auto with a store already there; see Prepare). A run
// calls it once before Open and saves the returned section in its
// config.yaml.
func Setup(ctx context.Context, cfg config.Data, o SetupOptions) (config.Data, error) {
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	ds, ch, err := openWithChannels(cfg)
	if err != nil {
		return cfg, err
	}
	if err := checkTargetUnit(cfg, ds); err != nil {
		return cfg, err
	}
	if cfg, _, err = resolveCT(ctx, cfg, ds, ch, max(1, cfg.WorkerCount()), log); err != nil {
		return cfg, err
	}
	if cfg.Fold >= 0 {
		if cfg, err = setupSplits(ds, cfg, o.SplitsDir); err != nil {
			return cfg, err
		}
		// Which file decides the folds, as nnU-Net says it.
		if cfg.SplitsFile != "" {
			log.Info("data: splits", "file", cfg.SplitsFile)
		} else {
			log.Info("data: splits generated (nnU-Net's), kept in memory")
		}
	}
	if usesStore(cfg) {
		rep, err := prepareStore(ctx, cfg, ds, ch, PrepareOptions{Logger: log, Quiet: true, Workers: cfg.WorkerCount()})
		if err != nil {
			return cfg, err
		}
		if rep.Written > 0 {
			log.Info("data: prepared store refreshed", "store", rep.Dir, "rebuilt", rep.Written, "current", rep.Current)
		}
	}
	return cfg, nil
}

// usesStore reports whether Open reads cfg's voxels from the prepared
// store: source store, or auto with a store in place.
func usesStore(cfg config.Data) bool {
	switch cfg.Source {
	case "store":
		return true
	case "auto":
		_, err := os.Stat(filepath.Join(cfg.StoreDir(), "index.json"))
		return err == nil
	}
	return false
}

// errUnresolvedCT is Open's error for a config whose ct statistics Setup
// has not filled in.
func errUnresolvedCT(cfg config.Data) error {
	return fmt.Errorf("data: ct normalisation without ct_window/ct_std: compute them with data.Setup (train does) or give them in the config (dataset %s)", cfg.Dataset)
}
