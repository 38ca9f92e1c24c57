package postprocess

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Options are what Determine scores.
type Options struct {
	// Labels are the foreground labels (nil: every label present; with
	// Regions, every value a region lists but 0): the all-foreground
	// step's mask, nnU-Net's foreground_labels.
	Labels []int
	// Regions, when given, are nnU-Net v2's foreground regions
	// (evaluation.Dataset.Regions), scored instead of labels: every
	// decision reads their means, and the per-entry steps are theirs.
	Regions []evaluation.Region
	// Names names the labels in the log and the plan (may be nil; regions
	// name themselves).
	Names map[int]string
	// Ignore is the references' ignore label (0: none), left out of the
	// scores (evaluation.Options.Ignore).
	Ignore int
	// Log receives a line per decision (nil: none).
	Log io.Writer
}

// Result is what Determine found: the plan and the summaries of the
// predictions as given and as post-processed by it.
type Result struct {
	Plan                  *Plan
	Baseline, Postprocess *evaluation.Summary
}

// Determine decides from predictions and their references (the pairs of
// a cross-validation) which steps help, exactly as nnU-Net's
// determine_postprocessing does. The entries scored are the labels, or
// for a region-based dataset (Options.Regions) the regions:
//
//  1. keep the largest component of all foreground labels together (for
//     regions too: nnU-Net's foreground_labels, not the regions); kept
//     when the foreground mean Dice (over the entries) rises strictly and
//     no entry's mean Dice falls ("if a single class got worse as a
//     result we won't do this");
//  2. only when there is more than one entry, for each entry in order
//     (dataset.json's, for regions), keep the largest component of its
//     mask — a region's is the union of its labels — on top of the steps
//     kept so far, the voxels removed becoming background; kept when that
//     entry's mean Dice rises strictly. The other entries are not checked,
//     though with regions they can fall: removing a stray piece of
//     "tumor core" from inside the edema leaves a hole in "whole tumor".
//
// A comparison with NaN is false, as in Python: a step judged on a NaN
// mean is not kept, and a NaN entry mean does not veto step 1. The
// predictions are post-processed in memory, one case at a time, for each
// candidate.
func Determine(pairs []evaluation.Pair, o Options) (*Result, error) {
	eo := evaluation.Options{Labels: o.Labels, Names: o.Names, Ignore: o.Ignore}
	if len(o.Regions) > 0 {
		eo.Labels, eo.Regions = nil, o.Regions
	}
	base, err := evaluation.Folder(pairs, eo)
	if err != nil {
		return nil, err
	}
	labels := base.Labels
	// Every candidate scores the baseline's entries: with Labels nil, the
	// labels a post-processed folder still holds could be fewer.
	eo.Labels = labels
	if base.Regions != nil {
		if labels = o.Labels; labels == nil {
			labels = foregroundLabels(base.Regions)
		}
		if err := evaluation.CheckLabels(append([]int(nil), labels...)); err != nil {
			return nil, fmt.Errorf("the foreground labels of regions %s: %w", regionKeys(base.Regions), err)
		}
	}
	plan := &Plan{Format: Format, Labels: labels, Steps: []Step{}, Before: scoresOf(base)}
	for l, n := range o.Names {
		if plan.LabelNames == nil {
			plan.LabelNames = map[string]string{}
		}
		plan.LabelNames[strconv.Itoa(l)] = n
	}
	for _, r := range base.Regions {
		plan.Regions = append(plan.Regions, r.Key())
		if r.Name != "" {
			if plan.RegionNames == nil {
				plan.RegionNames = map[string]string{}
			}
			plan.RegionNames[r.Key()] = r.Name
		}
	}
	try := func(s Step) (*evaluation.Summary, error) {
		steps := append(append([]Step(nil), plan.Steps...), s)
		p := &Plan{Steps: steps}
		to := eo
		to.Transform = p.Apply
		return evaluation.Folder(pairs, to)
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format, a...)
		}
	}
	source := base
	all := Step{Op: KeepLargestOp, Labels: append([]int(nil), labels...)}
	pp, err := try(all)
	if err != nil {
		return nil, err
	}
	d := Decision{Step: all, Criterion: "foreground_mean",
		DiceBefore: jf(base.ForegroundMean.Dice), DiceAfter: jf(pp.ForegroundMean.Dice)}
	var worse []string
	for j := range base.Mean {
		if pp.Mean[j].Dice < base.Mean[j].Dice {
			worse = append(worse, base.EntryName(j))
			if base.Regions != nil {
				d.WorseRegions = append(d.WorseRegions, base.Key(j))
			} else {
				d.WorseLabels = append(d.WorseLabels, base.Labels[j])
			}
		}
	}
	d.Kept = pp.ForegroundMean.Dice > base.ForegroundMean.Dice && len(worse) == 0
	plan.Decisions = append(plan.Decisions, d)
	if d.Kept {
		plan.Steps = append(plan.Steps, all)
		source = pp
		logf("keeping the largest foreground component improves the mean Dice: %.5f → %.5f; kept\n", base.ForegroundMean.Dice, pp.ForegroundMean.Dice)
	} else {
		why := "does not improve it"
		if len(worse) > 0 && pp.ForegroundMean.Dice > base.ForegroundMean.Dice {
			why = "improves it but lowers " + strings.Join(worse, ", ")
		}
		logf("keeping the largest foreground component: mean Dice %.5f → %.5f %s; not kept\n", base.ForegroundMean.Dice, pp.ForegroundMean.Dice, why)
	}
	// nnU-Net: len(labels_or_regions) > 1, the entries scored.
	if len(base.Mean) > 1 {
		for j := range base.Mean {
			var s Step
			var crit string
			if base.Regions != nil {
				s = RegionStep(base.Regions[j])
				crit = "mean of region " + base.Key(j)
			} else {
				s = Step{Op: KeepLargestOp, Labels: []int{base.Labels[j]}}
				crit = "mean of label " + base.Key(j)
			}
			pp, err := try(s)
			if err != nil {
				return nil, err
			}
			d := Decision{Step: s, Criterion: crit,
				DiceBefore: jf(source.Mean[j].Dice), DiceAfter: jf(pp.Mean[j].Dice)}
			d.Kept = pp.Mean[j].Dice > source.Mean[j].Dice
			plan.Decisions = append(plan.Decisions, d)
			verdict := "not kept"
			if d.Kept {
				plan.Steps = append(plan.Steps, s)
				verdict = "kept"
			}
			logf("keeping the largest component of %s: Dice %.5f → %.5f; %s\n", base.EntryName(j), source.Mean[j].Dice, pp.Mean[j].Dice, verdict)
			if d.Kept {
				source = pp
			}
		}
	}
	plan.After = scoresOf(source)
	return &Result{Plan: plan, Baseline: base, Postprocess: source}, nil
}

// foregroundLabels are the values regions list but 0, sorted, each once:
// nnU-Net's foreground_labels of a region-based dataset.json (every
// label value but background and ignore, each of which is in a region).
func foregroundLabels(regions []evaluation.Region) []int {
	var all []int
	for _, r := range regions {
		all = append(all, r.Labels...)
	}
	all = regionLabels(all)
	if len(all) > 0 && all[0] == 0 {
		all = all[1:]
	}
	return all
}

func regionKeys(regions []evaluation.Region) string {
	keys := make([]string, len(regions))
	for i, r := range regions {
		keys[i] = r.Key()
	}
	return strings.Join(keys, ", ")
}

func jf(v float64) jsonfloat.Float { return jsonfloat.Float(v) }
