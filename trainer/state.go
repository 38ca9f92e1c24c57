package trainer

import (
	"crypto/sha256"
	"encoding/hex"
)

// State is the training state saved beside the weights (state.json): all a
// resumed run needs to continue the exact sequence. Sampling and
// augmentation randomness is a pure function of (seed, epoch, sample
// index), so the data cursor (Epoch, StepInEpoch) is the whole of the data
// pipeline's state; the optimiser's moments travel in optimizer.safetensors.
type State struct {
	// Epoch is the number of completed epochs; StepInEpoch the batches of
	// the next epoch already trained (non-zero only in a mid-epoch save).
	Epoch       int `json:"epoch"`
	StepInEpoch int `json:"step_in_epoch"`
	// Step is the number of optimiser steps taken.
	Step int64 `json:"step"`
	// EpochLossSum is the training loss summed over the next epoch's
	// steps taken, EpochLossSteps how many that is, so that the epoch's
	// mean training loss survives a resume mid-epoch (or one between its
	// last step and its validation). A checkpoint of an older voxtrain
	// lacks them: the mean then covers the steps after the resume.
	EpochLossSum   float64 `json:"epoch_loss_sum,omitempty"`
	EpochLossSteps int     `json:"epoch_loss_steps,omitempty"`
	// GlobalBatch is the samples of one step over every rank of a
	// data-parallel job (train.batch_size × world size; 0 in an older
	// checkpoint): a resume with the same global batch, on any world size,
	// continues the exact sample sequence.
	GlobalBatch int `json:"global_batch,omitempty"`
	// TotalSteps is the schedule's length (epochs × iterations) when the
	// state was saved; the learning rate is a function of Step and it.
	TotalSteps int `json:"total_steps"`
	// Seed and DataSeed are the run's seeds.
	Seed     uint64 `json:"seed"`
	DataSeed uint64 `json:"data_seed"`
	// BestMetric is the best validation mean Dice so far.
	BestMetric *float64 `json:"best_metric,omitempty"`
	// ConfigSHA256 fingerprints the resolved config the state belongs to.
	ConfigSHA256 string `json:"config_sha256"`
	// Version is the voxtrain version that saved it.
	Version string `json:"version"`
	// InitWeights is the weights file a fine-tuning began from
	// (train.init_weights: a checkpoint's model.safetensors or a bare
	// file), InitSHA256 its checksum; empty for a run that began from a
	// random initialisation. A resume carries them on.
	InitWeights string `json:"init_weights,omitempty"`
	InitSHA256  string `json:"init_sha256,omitempty"`
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
