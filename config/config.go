// Package config is voxtrain's run configuration: the schema of the one
// YAML file every command reads, every default in one table (defaults.go),
// the checks (validate.go) and the one loader (load.go).
//
// A config file has the top-level keys below and the sections data,
// augment, model, loss, optim, train, validation, checkpoint and logging.
// A file says only what differs from the defaults; unknown keys are errors
// naming their line. Every command loads the whole file with Load and passes on
// the sections it needs: data.Open takes Data, augment.New takes Augment,
// nn.NewUNet takes Model, and so on.
//
//	cfg, err := config.Load("configs/demo.yaml") // defaults, paths, checks
//	loader, err := data.Open(cfg.Data, data.Options{Seed: cfg.Seed, ...})
package config

// Config is a run's whole config file.
type Config struct {
	// Experiment names the run directory <output_dir>/<experiment>/.
	Experiment string `yaml:"experiment"`
	// Seed drives weight initialisation, sampling and augmentation: one
	// seed for the whole run.
	Seed uint64 `yaml:"seed"`
	// Device is "cpu", "cuda", "cuda:N", "cuda:N,tf32" or "cuda:N,bf16".
	Device string `yaml:"device"`
	// Threads caps the CPU device's goroutines (0: all cores).
	Threads int `yaml:"threads"`
	// OutputDir holds the runs.
	OutputDir string `yaml:"output_dir"`
	// RunID numbers repeated runs of one experiment and fold.
	RunID int `yaml:"run_id"`

	Data       Data       `yaml:"data"`
	Augment    Augment    `yaml:"augment"`
	Model      Model      `yaml:"model"`
	Loss       Loss       `yaml:"loss"`
	Optim      Optim      `yaml:"optim"`
	Train      Train      `yaml:"train"`
	Validation Validation `yaml:"validation"`
	Checkpoint Checkpoint `yaml:"checkpoint"`
	Logging    Logging    `yaml:"logging"`

	// Warnings are notes from loading (keys of an older config moved to
	// their replacements), for the caller to log. They are not saved.
	Warnings []string `yaml:"-"`
}

// Train is the `train:` section: the schedule of the training loop.
type Train struct {
	// Epochs of IterationsPerEpoch optimiser steps each (nnU-Net: 1000 ×
	// 250). IterationsPerEpoch 0 makes an epoch one pass over the training
	// cases in a fresh random order (PyTorch's epoch) instead of a fixed
	// number of batches drawn with replacement (nnU-Net's).
	Epochs             int `yaml:"epochs"`
	IterationsPerEpoch int `yaml:"iterations_per_epoch"`
	// BatchSize and PatchSize (D, H, W) of training batches.
	BatchSize int    `yaml:"batch_size"`
	PatchSize [3]int `yaml:"patch_size"`
	// LogEverySeconds spaces the plain progress lines printed when the
	// output is not a terminal.
	LogEverySeconds float64 `yaml:"log_every_seconds"`
	// InitWeights fine-tunes: a new run's model starts from these weights
	// instead of a random initialisation, with a fresh optimiser, schedule
	// and data cursor (epoch 0), unlike a resume, which continues a run. A
	// voxtrain checkpoint (its directory, a last/best pointer, its
	// model.safetensors) or a bare .safetensors file of a state_dict with
	// voxtrain's names (python/voxtrain_torch.py's UNet3D,
	// safetensors.torch.save_file(model.state_dict(), path)). "" (the
	// default): none. Relative to the config file; the --init-weights flag
	// overrides it. A resumed run continues from its checkpoint, not from
	// these weights.
	InitWeights string `yaml:"init_weights"`
	// InitMismatch is what a tensor of InitWeights that does not fit the
	// model does: "error" (the default) refuses the start naming each
	// tensor and both shapes; "skip" keeps the fresh initialisation of the
	// model's tensors the file lacks or has with another shape (a new
	// num_classes changes the head and the deep-supervision heads) and
	// ignores the file's tensors the model does not have. Either way the
	// log lists what was loaded, re-initialised and unused.
	InitMismatch string `yaml:"init_mismatch"`
}

// Validation is the `validation:` section.
type Validation struct {
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
	// Overlap of neighbouring windows (nnU-Net's tile_step_size 0.5 is an
	// overlap of 0.5); Mirror averages over flips of every axis (nnU-Net's
	// test-time mirroring).
	Overlap float64 `yaml:"overlap"`
	Mirror  bool    `yaml:"mirror"`
	// HD95 also computes the 95th-percentile Hausdorff distance per case
	// and class (sliding mode).
	HD95 bool `yaml:"hd95"`
	// Final is nnU-Net's final validation: once the run has completed its
	// epochs, the weights of checkpoint Final ("last", as nnU-Net's
	// checkpoint_final, or "best") predict every held-out case of the
	// fold whole (sliding window, the overlap, mirroring and HD95 above),
	// exported on the case's own grid, into the run's validation/ folder
	// with summary.json, exactly as `train validate --output` does; "none"
	// skips it.
	Final string `yaml:"final"`
	// FinalProbabilities also writes each case's CASE.npz there (nnU-Net's
	// --npz), which train find-best needs to ensemble configurations.
	FinalProbabilities bool `yaml:"final_probabilities"`
}

// Final validation checkpoints (Validation.Final).
const (
	FinalNone = "none"
	FinalLast = "last"
	FinalBest = "best"
)

// Validates reports whether validation runs after epoch e (1-based) of n.
func (v Validation) Validates(e, n int) bool {
	if v.Every < 0 {
		return false
	}
	if e == n {
		return true
	}
	return v.Every > 0 && e%v.Every == 0
}

// Checkpoint is the `checkpoint:` section: which checkpoints are kept.
type Checkpoint struct {
	// BestMode is "max" when a higher validation metric (mean Dice) is
	// better, "min" when lower is; "" disables best tracking.
	BestMode string `yaml:"best_mode"`
	// EveryEpochs > 0 keeps the save made at the end of every
	// EveryEpochs-th epoch as a snapshot.
	EveryEpochs int `yaml:"every_epochs"`
	// Keep is how many snapshots to keep, the newest; 0 keeps them all.
	Keep int `yaml:"keep"`
	// KeepRecent is how many of the newest saves to keep regardless (at
	// least 1), so that a damaged newest save has a predecessor to fall
	// back to.
	KeepRecent int `yaml:"keep_recent"`
}

// Better reports whether metric a beats b under BestMode ("min": lower is
// better; otherwise higher).
func (p Checkpoint) Better(a, b float64) bool {
	if p.BestMode == "min" {
		return a < b
	}
	return a > b
}

// Logging is the `logging:` section: what a run records besides train.log
// and metrics.jsonl, which it always writes.
type Logging struct {
	// TensorBoard also writes each epoch's metrics.jsonl values as
	// TensorBoard scalars, one event file per start or resume of the run in
	// <run>/tensorboard/, for `tensorboard --logdir` (runlog.TensorBoard).
	TensorBoard bool `yaml:"tensorboard"`
}

// The values of train.init_mismatch.
const (
	InitMismatchError = "error"
	InitMismatchSkip  = "skip"
)
