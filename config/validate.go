package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/voxtrain/voxtrain/volume"
)

// Validate checks every setting and reports every invalid one, each named
// by its key (section.key).
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Experiment == "" || strings.ContainsAny(c.Experiment, `/\`) {
		bad("experiment", "%q, want a name (no slashes)", c.Experiment)
	}
	if !strings.HasPrefix(c.Device, "cpu") && !strings.HasPrefix(c.Device, "cuda") && !strings.HasPrefix(c.Device, "gpu") {
		bad("device", "%q, want cpu, cuda, cuda:N, cuda:N,tf32 or cuda:N,bf16", c.Device)
	}
	if c.Threads < 0 {
		bad("threads", "%d, want ≥ 0 (0: every core)", c.Threads)
	}
	if c.OutputDir == "" {
		bad("output_dir", "empty")
	}
	if c.RunID < 0 {
		bad("run_id", "%d, want ≥ 0", c.RunID)
	}
	errs = append(errs, c.Train.validate()...)
	errs = append(errs, c.Validation.validate()...)
	errs = append(errs, c.Checkpoint.validate()...)
	if c.Validation.Final == FinalBest && c.Checkpoint.BestMode == "" {
		bad("validation.final", "best, but checkpoint.best_mode is empty (no best checkpoint is kept): want last or none, or set best_mode")
	}
	errs = append(errs, c.Data.validate()...)
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, err)
	} else {
		// The decoder restores each level's size only if every axis divides
		// by the product of the strides down to it.
		prod := [3]int{1, 1, 1}
		for l := range c.Model.Features {
			st := c.Model.Stride(l)
			for a := range prod {
				prod[a] *= st[a]
			}
		}
		for a, p := range c.Train.PatchSize {
			if p > 0 && p%prod[a] != 0 {
				bad("train.patch_size", "%v: axis %d (%d) is not divisible by %d, the product of model.strides on that axis",
					c.Train.PatchSize, a, p, prod[a])
			}
		}
	}
	if err := c.Loss.Validate(); err != nil {
		errs = append(errs, err)
	} else if multi := c.Model.MultiLabel(); multi != (c.Loss.Name == "dice_bce") {
		// The loss and the outputs must agree on what a label byte is.
		if multi {
			bad("loss.name", "%s, but model.targets is multi_label (sigmoid channels, bit-packed labels); use dice_bce (nnU-Net's DC_and_BCE_loss)", c.Loss.Name)
		} else {
			bad("loss.name", "dice_bce trains multi-label sigmoid outputs; set model.targets: multi_label (or use dice_ce for softmax classes)")
		}
	} else if n := c.Loss.Ignore(); !multi && n >= 0 && n < c.Model.NumClasses {
		// A class's own value cannot also be ignored.
		bad("loss.ignore_label", "%d is a class (model.num_classes %d counts labels 0..%d); the ignore label must be ≥ model.num_classes (nnU-Net: the highest label value)",
			n, c.Model.NumClasses, c.Model.NumClasses-1)
	}
	if err := c.Optim.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Augment.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (t Train) validate() []error {
	var errs []error
	if t.Epochs < 1 {
		errs = append(errs, fmt.Errorf("train.epochs: %d, want ≥ 1", t.Epochs))
	}
	if t.IterationsPerEpoch < 0 {
		errs = append(errs, fmt.Errorf("train.iterations_per_epoch: %d, want ≥ 1 (or 0: one pass over the training cases)", t.IterationsPerEpoch))
	}
	if t.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("train.batch_size: %d, want ≥ 1", t.BatchSize))
	}
	for i, p := range t.PatchSize {
		if p < 1 {
			errs = append(errs, fmt.Errorf("train.patch_size[%d] = %d: want [D, H, W] of positive sizes", i, p))
			break
		}
	}
	if !(t.LogEverySeconds > 0) {
		errs = append(errs, fmt.Errorf("train.log_every_seconds: %v, want > 0", t.LogEverySeconds))
	}
	switch t.InitMismatch {
	case InitMismatchError, InitMismatchSkip:
	default:
		errs = append(errs, fmt.Errorf("train.init_mismatch: %q, want error (refuse tensors that do not fit the model) or skip (keep their fresh initialisation)", t.InitMismatch))
	}
	return errs
}

func (v Validation) validate() []error {
	var errs []error
	switch v.Mode {
	case "patch", "sliding", "both":
	default:
		errs = append(errs, fmt.Errorf("validation.mode: %q, want patch, sliding or both", v.Mode))
	}
	if v.Every < -1 {
		errs = append(errs, fmt.Errorf("validation.every: %d, want ≥ -1", v.Every))
	}
	if v.Iterations < 0 {
		errs = append(errs, fmt.Errorf("validation.iterations: %d, want ≥ 0 (0: one pass)", v.Iterations))
	}
	if v.MaxCases < 0 {
		errs = append(errs, fmt.Errorf("validation.max_cases: %d, want ≥ 0 (0: all)", v.MaxCases))
	}
	if !(v.Overlap >= 0 && v.Overlap < 1) {
		errs = append(errs, fmt.Errorf("validation.overlap: %v, want 0 ≤ overlap < 1", v.Overlap))
	}
	switch v.Final {
	case FinalNone, FinalLast, FinalBest:
	default:
		errs = append(errs, fmt.Errorf("validation.final: %q, want last (nnU-Net's final validation, with the last weights), best or none", v.Final))
	}
	if v.FinalProbabilities && v.Final == FinalNone {
		errs = append(errs, errors.New("validation.final_probabilities: true, but validation.final is none (no final validation to write them)"))
	}
	return errs
}

func (p Checkpoint) validate() []error {
	var errs []error
	if p.BestMode != "" && p.BestMode != "max" && p.BestMode != "min" {
		errs = append(errs, fmt.Errorf("checkpoint.best_mode: %q, want max, min or empty (no best)", p.BestMode))
	}
	if p.EveryEpochs < 0 {
		errs = append(errs, fmt.Errorf("checkpoint.every_epochs: %d, want ≥ 0", p.EveryEpochs))
	}
	if p.Keep < 0 {
		errs = append(errs, fmt.Errorf("checkpoint.keep: %d, want ≥ 0 (0: every snapshot)", p.Keep))
	}
	if p.KeepRecent < 1 {
		errs = append(errs, fmt.Errorf("checkpoint.keep_recent: %d, want ≥ 1", p.KeepRecent))
	}
	return errs
}

func (d Data) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("data.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch {
	case d.Manifest != "" && (d.Dataset != "" || len(d.Cases) > 0):
		bad("manifest", "give a manifest, a dataset folder or a cases list, not several")
	case d.Dataset == "" && len(d.Cases) == 0 && d.Manifest == "":
		bad("dataset", "neither a dataset folder, a cases list nor a manifest is given")
	}
	switch d.Format {
	case "auto", "msd", "nnunet":
	default:
		bad("format", "%q is not auto, msd or nnunet", d.Format)
	}
	if d.NumFolds < 2 {
		bad("num_folds", "%d, want ≥ 2", d.NumFolds)
	}
	if p := d.HoldoutFraction; !(p >= 0 && p < 1) {
		bad("holdout_fraction", "%g, want 0 (k folds) or a fraction above 0 and below 1", p)
	}
	switch {
	case d.HoldoutFraction > 0 && (d.Fold < -1 || d.Fold > 0):
		bad("fold", "%d, with holdout_fraction %g want 0 (the hold-out split) or -1 (all cases)", d.Fold, d.HoldoutFraction)
	case d.Fold < -1 || d.Fold >= d.NumFolds:
		bad("fold", "%d, want -1 (all cases) or 0..%d", d.Fold, d.NumFolds-1)
	}
	if d.PrefetchFactor < 1 {
		bad("prefetch_factor", "%d, want ≥ 1", d.PrefetchFactor)
	}
	if p := d.OversampleForeground; !(p >= 0 && p <= 1) {
		bad("oversample_foreground", "%g, want 0..1", p)
	}
	for id, w := range d.CaseWeights {
		if !(w >= 0) || math.IsInf(w, 0) {
			bad("case_weights", "case %s has weight %g, want a finite value ≥ 0", id, w)
		}
	}
	switch d.Source {
	case "auto", "gz", "cache", "store":
	default:
		bad("source", "%q is not auto, gz, cache or store", d.Source)
	}
	if d.CacheBytes < 0 {
		bad("cache_bytes", "negative")
	}
	if d.StoreChunk < 8 || d.StoreChunk > 512 {
		bad("store_chunk", "%d, want 8..512", d.StoreChunk)
	}
	switch d.StoreCodec {
	case "s2", "zstd", "s2-shuffle", "zstd-shuffle", "raw":
	default:
		bad("store_codec", "%q is not s2, zstd, s2-shuffle, zstd-shuffle or raw", d.StoreCodec)
	}
	if len(d.Normalization) == 0 {
		bad("normalization", "empty, want zscore, ct or none (one per channel, or one for all)")
	}
	ctChecked := false
	for _, n := range d.Normalization {
		switch n {
		case "zscore", "none":
		case "ct":
			if ctChecked {
				continue
			}
			ctChecked = true
			// Absent values (an empty window, a zero std) are computed from
			// the dataset; given ones must be usable.
			if w := d.CTWindow; len(w) != 0 && (len(w) != 2 || !(w[0] < w[1]) || math.IsInf(w[0], 0) || math.IsInf(w[1], 0)) {
				bad("ct_window", "ct normalisation needs [low, high] with low < high (or no ct_window, to compute it from the dataset), got %v", d.CTWindow)
			}
			if d.CTStd < 0 || math.IsNaN(d.CTStd) || math.IsInf(d.CTStd, 0) {
				bad("ct_std", "ct normalisation needs the dataset's foreground std (> 0, or no ct_std, to compute it from the dataset), got %g", d.CTStd)
			}
			if math.IsNaN(d.CTMean) || math.IsInf(d.CTMean, 0) {
				bad("ct_mean", "%g is not a finite mean", d.CTMean)
			}
		default:
			bad("normalization", "%q is not zscore, ct or none", n)
		}
	}
	if t := d.TargetSpacing; t != nil {
		if len(t) != 3 {
			bad("target_spacing", "want three voxel sizes [d, h, w] (NIfTI z, y, x), got %d values %v", len(t), t)
		} else {
			invalid := func(s float64) bool { return s != 0 && (!(s > 0) || math.IsInf(s, 0)) }
			switch {
			case slices.ContainsFunc(t, invalid):
				bad("target_spacing", "voxel sizes must be finite and > 0 (0: keep each case's own along that axis), got %v", t)
			case slices.Equal(t, []float64{0, 0, 0}):
				bad("target_spacing", "every axis is 0 (each case's own spacing): leave target_spacing out for no resampling")
			}
		}
	}
	if u := d.TargetUnit(); u != "" {
		if _, ok := volume.UnitMeters(u); !ok {
			bad("spacing_unit", "%q is not a length unit (want one of UDUNITS-2's, as OME-NGFF: nanometer, micrometer, millimeter, … or nm, um, mm, …)", d.SpacingUnit)
		}
	} else if strings.TrimSpace(d.SpacingUnit) != "" {
		bad("spacing_unit", "%q is not a length unit: leave the key out when the unit is unknown", d.SpacingUnit)
	}
	switch d.ResampleOrder {
	case "linear", "nnunet":
	default:
		bad("resample_order", "%q is not linear or nnunet", d.ResampleOrder)
	}
	// Both lists extend their last value to the channels after it.
	for ch := range max(len(d.Normalization), len(d.UseMaskForNorm)) {
		if len(d.UseMaskForNorm) == 0 || len(d.Normalization) == 0 || !d.UseMaskForNorm[min(ch, len(d.UseMaskForNorm)-1)] {
			continue
		}
		if n := d.Normalization[min(ch, len(d.Normalization)-1)]; n != "zscore" {
			bad("use_mask_for_norm", "true for channel %d, whose normalization is %s: the nonzero mask is for zscore only (nnU-Net's other schemes ignore it)", ch, n)
			break
		}
	}
	switch d.OnError {
	case "fail", "skip":
	default:
		bad("on_error", "%q is not fail or skip", d.OnError)
	}
	if d.WatchdogTimeout < 0 {
		bad("watchdog_timeout", "negative")
	}
	if d.HardTimeout < 0 {
		bad("hard_timeout", "negative")
	}
	for i, cs := range d.Cases {
		if len(cs.Image) == 0 {
			bad(fmt.Sprintf("cases[%d].image", i), "missing")
		}
		if cs.Weight < 0 {
			bad(fmt.Sprintf("cases[%d].weight", i), "%g, want ≥ 0", cs.Weight)
		}
	}
	return errs
}

// Validate checks the data section alone (for callers that build one by
// hand; Config.Validate checks it with the rest).
func (d Data) Validate() error { return errors.Join(d.validate()...) }

// Validate checks the checkpoint section alone (checkpoint.Saver uses it).
func (p Checkpoint) Validate() error { return errors.Join(p.validate()...) }

// Problems returns the single errors of a validation error — Validate
// joins one per bad key (errors.Join, possibly nested) — in order, so a
// caller can annotate each (its YAML line, the flag that set it).
func Problems(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []error{err}
}
