package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/nn"
)

// Checkpoint is what one save writes.
type Checkpoint struct {
	// Epoch is the number of completed epochs; Step the number of
	// optimiser steps taken. Both are recorded in the manifest and in the
	// weights file's metadata.
	Epoch int
	Step  int64
	// MidEpoch marks a save taken before the epoch finished (e.g. on
	// SIGTERM). Such a save is never kept as an every-N snapshot.
	MidEpoch bool
	// Metric is the validation metric of this save, nil when there was no
	// validation. A NaN or infinite metric is recorded as none.
	Metric *float64
	// Model holds the weights written to model.safetensors, in order.
	Model []nn.HostTensor
	// Optimizer holds the optimiser's state tensors (moments, momentum
	// buffers), written to optimizer.safetensors. May be empty.
	Optimizer []nn.HostTensor
	// State is the trainer's state (epoch, step, schedule, RNG and data
	// cursor, ...), encoded with encoding/json into state.json; a
	// json.RawMessage is written as is.
	State any
	// Config is the resolved config text, written to config.yaml when not
	// empty.
	Config string
	// Version is the voxtrain version that wrote the checkpoint.
	Version string
}

// Saved tells what a save did.
type Saved struct {
	Dir      string   // the new checkpoint's directory
	Best     bool     // it is now the best checkpoint
	Snapshot bool     // it is kept as an every-N snapshot
	Pruned   []string // checkpoint directories removed by the retention policy
	// Warnings lists problems that did not stop the save (a checkpoint
	// that could not be pruned, a stale temporary directory that could not
	// be removed); worth logging.
	Warnings []string
}

// Loaded describes a loaded checkpoint. The tensors themselves were
// written into the Data of the slices given to Load.
type Loaded struct {
	Dir      string // the checkpoint directory (or the bare weights file)
	Epoch    int
	Step     int64
	MidEpoch bool
	Metric   *float64
	Version  string
	SavedAt  time.Time
	// State is state.json as saved; decode it with json.Unmarshal. Nil
	// for a bare weights file.
	State json.RawMessage
	// Config is config.yaml as saved, "" when none.
	Config string
	// Skipped lists newer checkpoints LoadLatest could not use (damaged),
	// each with the reason; log them.
	Skipped []string
}

// ErrNoCheckpoint is returned (wrapped) by LoadLatest when a run has no
// checkpoint yet: start from scratch.
var ErrNoCheckpoint = errors.New("no checkpoint")

// ErrBareWeights is wrapped by Load's error when it is asked for the
// optimiser state of a bare weights file, which holds weights only (a
// resume needs a checkpoint directory; the weights can start a new run).
var ErrBareWeights = errors.New("a bare weights file holds no optimiser state")

// MismatchError reports tensors in a checkpoint file that do not match the
// ones the caller expects.
type MismatchError struct {
	File       string
	Missing    []string // expected, not in the file
	Unexpected []string // in the file, not expected
	Mismatched []string // in both, with another shape or a non-float dtype: "name: ..."
}

// Error names the file and lists the missing, unexpected and mismatched
// tensors.
func (e *MismatchError) Error() string {
	var parts []string
	list := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		shown := names
		more := ""
		if len(shown) > 8 {
			shown, more = shown[:8], fmt.Sprintf(", and %d more", len(names)-8)
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s%s)", len(names), what, strings.Join(shown, ", "), more))
	}
	list("missing from the file", e.Missing)
	list("unexpected in the file", e.Unexpected)
	list("mismatched", e.Mismatched)
	return fmt.Sprintf("%s does not match the expected tensors: %s", e.File, strings.Join(parts, "; "))
}

// manifestFormat identifies the checkpoint layout; bump it on
// incompatible changes.
const manifestFormat = "voxtrain-checkpoint/1"

// Names of the files in a checkpoint directory.
const (
	modelFile     = "model.safetensors"
	optimizerFile = "optimizer.safetensors"
	stateFile     = "state.json"
	configFile    = "config.yaml"
	manifestFile  = "manifest.json"
)

// manifest is manifest.json, written last in a checkpoint directory.
type manifest struct {
	Format   string             `json:"format"`
	Epoch    int                `json:"epoch"`
	Step     int64              `json:"step"`
	Seq      int64              `json:"seq"` // orders saves of one run, newest highest
	MidEpoch bool               `json:"mid_epoch,omitempty"`
	Metric   *float64           `json:"metric,omitempty"`
	Snapshot bool               `json:"snapshot,omitempty"`
	Version  string             `json:"version,omitempty"`
	SavedAt  time.Time          `json:"saved_at"`
	Files    map[string]fileSum `json:"files"`
}

func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	v := *p
	return &v
}
