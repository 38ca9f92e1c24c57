package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/nn"
)

// checkpoints saves a run's model, optimiser and state, and resumes from
// them. Sampling and augmentation randomness is a pure function of (seed,
// epoch, sample index), so the state's data cursor is all a resumed run
// needs to continue the exact sequence.
type checkpoints struct {
	dir     checkpoint.RunDir
	saver   checkpoint.Saver
	model   *nn.UNet
	learner *nn.Learner
	config  string // the run's config (YAML), saved in every checkpoint
	version string
	log     *slog.Logger
}

// refuseOverwrite refuses a fresh start (resume "") in a run directory
// that holds checkpoints: the new run would overwrite the old one's.
func refuseOverwrite(dir checkpoint.RunDir, resume string) error {
	if resume == "" && hasCheckpoints(dir.Checkpoints) {
		return fmt.Errorf("%s already holds checkpoints: resume with --resume auto, or choose another --run-id or --output-dir", dir.Checkpoints)
	}
	return nil
}

// initName is how the user gave the init weights, for messages.
func initName(flag bool) string {
	if flag {
		return "--init-weights"
	}
	return "train.init_weights"
}

// checkInit says whether this start loads the init weights path (""
// none) into its fresh model, or refuses: init weights begin a new run,
// so they do not go with the resume of a run that has checkpoints (when
// they come from the flag: the key alone is then not applied, see
// Options.InitWeightsFlag), nor with a fresh start over checkpoints. A
// file that is not there is named now, before the dataset's setup.
func checkInit(dir checkpoint.RunDir, path, resume string, flag bool) (bool, error) {
	if path == "" {
		return false, nil
	}
	name := initName(flag)
	has := hasCheckpoints(dir.Checkpoints)
	switch {
	case resume == "" && has:
		cont := "drop --init-weights and continue that run with --resume auto"
		if !flag {
			cont = "continue that run with --resume auto (it continues from its checkpoint: train.init_weights only starts a new run)"
		}
		return false, fmt.Errorf("%s starts a new run from %s, but %s already holds checkpoints: choose another --run-id or --output-dir for the fine-tuning, or %s",
			name, path, dir.Checkpoints, cont)
	case resume == "auto" && has && flag:
		return false, fmt.Errorf("--init-weights starts a new run from %s, but --resume auto continues the run in %s, which holds checkpoints: drop --init-weights to continue that run, or drop --resume auto and choose another --run-id or --output-dir to fine-tune from %s",
			path, dir.Path, path)
	case resume != "" && resume != "auto" && flag:
		return false, fmt.Errorf("--init-weights %s and --resume %s both give the weights to start from: drop --init-weights to continue from the checkpoint, or drop --resume to start a new run from %s",
			path, resume, path)
	case resume == "auto" && has, resume != "" && resume != "auto":
		return false, nil // the key alone: the run continues from its checkpoint
	}
	if _, err := os.Stat(path); err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return true, nil
}

// initFrom loads the init weights at path (a checkpoint or a bare
// .safetensors file) into the fresh model, before its first step; the
// optimiser, schedule and data cursor stay fresh. Tensors that do not fit
// the model (missing from the file, another shape, or the file's that the
// model lacks) refuse the start under policy "error", naming each with
// both shapes and the file; under "skip" the model's keep their fresh
// initialisation and the file's are ignored. The log reports what was
// loaded, re-initialised and unused, and st records the file and its
// SHA-256. name is how the user gave path (--init-weights or the key).
func (c *checkpoints) initFrom(path, policy, name string, st *State) error {
	dev := c.model.Device()
	weights, err := nn.ExportParams(dev, c.model.Params()) // the fresh initialisation, kept where nothing fits
	if err != nil {
		return err
	}
	m, err := checkpoint.LoadMatching(path, weights)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(m.Filled) == 0 {
		return fmt.Errorf("%s: none of the model's %d tensors is in %s with its name and shape (the file's are named like %s, the model's like %s): not weights of a voxtrain U-Net (python/voxtrain_torch.py's UNet3D)",
			name, len(weights), m.File, firstOf(m.Diff.Unexpected), firstOf(m.Diff.Missing))
	}
	if !m.Exact() && policy != config.InitMismatchSkip {
		return &initMismatchError{name: name, diff: &m.Diff}
	}
	if err := nn.ImportParams(dev, c.model.Params(), weights); err != nil {
		return fmt.Errorf("%s %s: %w", name, m.File, err)
	}
	args := []any{"file", m.File, "sha256", m.SHA256, "loaded", len(m.Filled), "of", len(weights),
		"reinitialised", len(m.Diff.Missing) + len(m.Diff.Mismatched), "unused", len(m.Diff.Unexpected), "mismatch", policy}
	if m.Step > 0 {
		args = append(args, "checkpoint_epoch", m.Epoch, "checkpoint_step", m.Step)
	}
	c.log.Info("init weights: fine-tuning from "+m.File, args...)
	for _, s := range m.Diff.Mismatched {
		tensor, why, _ := strings.Cut(s, ": ")
		c.log.Warn("init weights: kept the fresh initialisation", "tensor", tensor, "reason", why)
	}
	for _, n := range m.Diff.Missing {
		c.log.Warn("init weights: kept the fresh initialisation", "tensor", n, "reason", "not in the file")
	}
	for _, n := range m.Diff.Unexpected {
		c.log.Warn("init weights: unused", "tensor", n, "reason", "the model has no such tensor")
	}
	st.InitWeights, st.InitSHA256 = m.File, m.SHA256
	return nil
}

// initMismatchError refuses init weights that do not fit the model
// (train.init_mismatch: error), naming the file and every tensor that
// does not fit, one per line, with both shapes.
type initMismatchError struct {
	name string // how the user gave the file: --init-weights or the key
	diff *checkpoint.MismatchError
}

func (e *initMismatchError) Error() string {
	d := e.diff
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s does not fit the model: %d tensors mismatched, %d missing from the file, %d in the file but not in the model:",
		e.name, d.File, len(d.Mismatched), len(d.Missing), len(d.Unexpected))
	for _, s := range d.Mismatched {
		b.WriteString("\n  " + s)
	}
	for _, n := range d.Missing {
		b.WriteString("\n  " + n + ": missing from the file")
	}
	for _, n := range d.Unexpected {
		b.WriteString("\n  " + n + ": in the file, not in the model")
	}
	b.WriteString("\nto load the tensors that fit and keep the fresh initialisation of the others (a new head), use --init-mismatch skip (train.init_mismatch: skip)")
	return b.String()
}

// Unwrap returns the file's *checkpoint.MismatchError.
func (e *initMismatchError) Unwrap() error { return e.diff }

// firstOf quotes names' first, or says there is none.
func firstOf(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return fmt.Sprintf("%q", names[0])
}

// resume loads the checkpoint what names ("" fresh, "auto" the run's
// latest, else a path) into the model, optimiser and st; "" and "auto"
// without a checkpoint start fresh (refuseOverwrite has refused "" over
// checkpoints before). A checkpoint whose config differs from the run's
// is resumed with a warning naming the changed keys. It reads only.
func (c *checkpoints) resume(what string, st *State) error {
	if what == "" {
		return nil
	}
	// The expected names and shapes, with buffers the load fills.
	weights, moments, err := c.hostState()
	if err != nil {
		return err
	}
	dev := c.model.Device()
	var l *checkpoint.Loaded
	switch what {
	case "auto":
		l, err = checkpoint.LoadLatest(c.dir.Checkpoints, weights, moments)
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			c.log.Info("resume auto: no checkpoint yet, starting fresh")
			return nil
		}
	default:
		l, err = checkpoint.Load(what, weights, moments)
		if errors.Is(err, checkpoint.ErrBareWeights) {
			return fmt.Errorf("--resume %s: a bare weights file holds the weights only, not the optimiser and training state a resume continues: to start a new run from these weights use --init-weights %s", what, what)
		}
	}
	var me *checkpoint.MismatchError
	if errors.As(err, &me) && filepath.Base(me.File) == "optimizer.safetensors" && len(me.Missing) == len(moments) && len(moments) > 0 &&
		len(me.Mismatched)+len(me.Unexpected) == 0 {
		// An optimiser file without a tensor: weights saved without
		// their training (train import-nnunet writes such checkpoints).
		dir := filepath.Dir(me.File)
		return fmt.Errorf("resume: %s holds the weights only, no optimiser state to continue from (a model imported with train import-nnunet?): start a new run from them with --init-weights %s", dir, dir)
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, s := range l.Skipped {
		c.log.Warn("resume: skipped a damaged checkpoint", "reason", s)
	}
	if err := nn.ImportParams(dev, c.model.Params(), weights); err != nil {
		return fmt.Errorf("resume %s: %w", l.Dir, err)
	}
	if err := c.learner.Opt.LoadState(moments); err != nil {
		return fmt.Errorf("resume %s: %w", l.Dir, err)
	}
	if l.State == nil {
		return fmt.Errorf("resume %s: no training state (a bare weights file cannot be resumed; use it to fine-tune instead)", l.Dir)
	}
	now := st.ConfigSHA256
	if err := json.Unmarshal(l.State, st); err != nil {
		return fmt.Errorf("resume %s: state.json: %w", l.Dir, err)
	}
	if st.ConfigSHA256 != "" && st.ConfigSHA256 != now {
		// Allowed (more epochs, a new learning rate), but the run is no
		// longer the one the checkpoint began: say what changed. The init
		// keys say how a run began, which a resume does not change:
		// resuming without --init-weights is no change.
		changes := slices.DeleteFunc(config.Changes(l.Config, c.config), func(s string) bool {
			return strings.HasPrefix(s, "train.init_weights:") || strings.HasPrefix(s, "train.init_mismatch:")
		})
		if len(changes) > 0 {
			c.log.Warn("resume: the config differs from the checkpoint's; continuing with the new one",
				"checkpoint", l.Dir, "changed", strings.Join(changes, "; "))
		}
	}
	st.ConfigSHA256 = now
	c.learner.Opt.SetSteps(int(st.Step))
	c.log.Info("resumed", "checkpoint", l.Dir, "epoch", st.Epoch, "step_in_epoch", st.StepInEpoch, "step", st.Step)
	return nil
}

// hasCheckpoints reports whether dir holds a saved checkpoint (a ckpt-*
// directory).
func hasCheckpoints(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ckpt-") {
			return true
		}
	}
	return false
}

// save writes a checkpoint of st (mid: in the middle of an epoch, on an
// interruption), with metric (nil: none) for best tracking, which it
// updates in st. The run's directories are created again first, in case
// something removed them; the checkpoint package commits atomically.
func (c *checkpoints) save(st *State, mid bool, metric *float64) error {
	if err := c.dir.MkdirAll(); err != nil {
		return err
	}
	params, opt, err := c.hostState()
	if err != nil {
		return err
	}
	c.track(st, metric)
	saved, err := c.saver.Save(&checkpoint.Checkpoint{Epoch: st.Epoch, Step: st.Step, MidEpoch: mid, Metric: metric,
		Model: params, Optimizer: opt, State: *st, Config: c.config, Version: c.version})
	if err != nil {
		return err
	}
	for _, w := range saved.Warnings {
		c.log.Warn("checkpoint", "warning", w)
	}
	args := []any{"dir", saved.Dir}
	if saved.Best {
		args = append(args, "best", true)
	}
	c.log.Info("saved checkpoint", args...)
	return nil
}

// track records metric as the best in st when it is.
func (c *checkpoints) track(st *State, metric *float64) {
	if metric != nil && (st.BestMetric == nil || c.saver.Policy.Better(*metric, *st.BestMetric)) {
		v := *metric
		st.BestMetric = &v
	}
}

// hostState copies the model's weights and the optimiser's state to host
// tensors with their PyTorch names (what a checkpoint holds).
func (c *checkpoints) hostState() (weights, moments []nn.HostTensor, err error) {
	if weights, err = nn.ExportParams(c.model.Device(), c.model.Params()); err != nil {
		return nil, nil, err
	}
	if moments, err = c.learner.Opt.State(); err != nil {
		return nil, nil, err
	}
	return weights, moments, nil
}
