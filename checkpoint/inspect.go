package checkpoint

import (
	"fmt"
	"path/filepath"
	"time"
)

// Info is what a checkpoint's manifest records, read without its tensors:
// enough to tell how far a run got (a sweep's summary) without loading a
// model.
type Info struct {
	Dir      string // the checkpoint directory
	Epoch    int    // completed epochs
	Step     int64
	MidEpoch bool     // saved before its epoch finished (e.g. on SIGTERM)
	Metric   *float64 // the validation metric, nil when none
	Version  string
	SavedAt  time.Time
}

// Latest returns the manifest of the newest checkpoint in dir (a run's
// checkpoints directory) whose manifest reads, the one LoadLatest would
// try first among those. Files are not verified (LoadLatest does that).
// When dir holds no readable checkpoint the error wraps ErrNoCheckpoint.
func Latest(dir string) (*Info, error) {
	es, err := scan(dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	for _, e := range es {
		if e.err == nil {
			return info(filepath.Join(dir, e.name), e.m), nil
		}
	}
	return nil, fmt.Errorf("%w in %s", ErrNoCheckpoint, dir)
}

// Best returns the manifest of the checkpoint dir's best pointer names
// (dir is a run's checkpoints directory); the error wraps ErrNoCheckpoint
// when there is no best pointer (no validation yet) or its target is gone.
func Best(dir string) (*Info, error) {
	t := readPointer(dir, "best")
	if t == "" {
		return nil, fmt.Errorf("%w: no best pointer in %s", ErrNoCheckpoint, dir)
	}
	m, err := readManifest(filepath.Join(dir, t))
	if err != nil {
		return nil, fmt.Errorf("%w: best in %s: %v", ErrNoCheckpoint, dir, err)
	}
	return info(filepath.Join(dir, t), m), nil
}

func info(dir string, m *manifest) *Info {
	return &Info{Dir: dir, Epoch: m.Epoch, Step: m.Step, MidEpoch: m.MidEpoch, Metric: finite(m.Metric),
		Version: m.Version, SavedAt: m.SavedAt}
}
