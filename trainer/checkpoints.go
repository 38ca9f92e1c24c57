package trainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
		// longer the one the checkpoint began: say what changed.
		c.log.Warn("resume: the config differs from the checkpoint's; continuing with the new one",
			"checkpoint", l.Dir, "changed", strings.Join(config.Changes(l.Config, c.config), "; "))
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
	if metric != nil && (st.BestMetric == nil || c.saver.Policy.Better(*metric, *st.BestMetric)) {
		v := *metric
		st.BestMetric = &v
	}
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
