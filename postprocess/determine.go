package postprocess

import (
	"fmt"
	"io"
	"strconv"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Options are what Determine scores.
type Options struct {
	// Labels are the foreground labels (nil: every label present).
	Labels []int
	// Names names them in the log and the plan (may be nil).
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
// determine_postprocessing does:
//
//  1. keep the largest component of all foreground labels together; kept
//     when the foreground mean Dice rises (strictly) and no label's mean
//     Dice falls ("if a single class got worse as a result we won't do
//     this");
//  2. only when there is more than one label, for each label in order,
//     keep that label's largest component, on top of the steps kept so
//     far; kept when that label's mean Dice rises strictly (the other
//     labels are not checked: removing voxels of one label can only turn
//     them into background).
//
// A comparison with NaN is false, as in Python: a step judged on a NaN
// mean is not kept, and a NaN label mean does not veto step 1. The
// predictions are post-processed in memory, one case at a time, for each
// candidate.
func Determine(pairs []evaluation.Pair, o Options) (*Result, error) {
	base, err := evaluation.Folder(pairs, evaluation.Options{Labels: o.Labels, Names: o.Names, Ignore: o.Ignore})
	if err != nil {
		return nil, err
	}
	labels := base.Labels
	plan := &Plan{Format: Format, Labels: labels, Steps: []Step{}, Before: scoresOf(base)}
	for l, n := range o.Names {
		if plan.LabelNames == nil {
			plan.LabelNames = map[string]string{}
		}
		plan.LabelNames[strconv.Itoa(l)] = n
	}
	try := func(s Step) (*evaluation.Summary, error) {
		steps := append(append([]Step(nil), plan.Steps...), s)
		p := &Plan{Steps: steps}
		return evaluation.Folder(pairs, evaluation.Options{Labels: labels, Names: o.Names, Ignore: o.Ignore, Transform: p.Apply})
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
	for j, l := range labels {
		if pp.Mean[j].Dice < base.Mean[j].Dice {
			d.WorseLabels = append(d.WorseLabels, l)
		}
	}
	d.Kept = pp.ForegroundMean.Dice > base.ForegroundMean.Dice && len(d.WorseLabels) == 0
	plan.Decisions = append(plan.Decisions, d)
	if d.Kept {
		plan.Steps = append(plan.Steps, all)
		source = pp
		logf("keeping the largest foreground component improves the mean Dice: %.5f → %.5f; kept\n", base.ForegroundMean.Dice, pp.ForegroundMean.Dice)
	} else {
		why := "does not improve it"
		if len(d.WorseLabels) > 0 && pp.ForegroundMean.Dice > base.ForegroundMean.Dice {
			why = "improves it but lowers " + names(d.WorseLabels, base)
		}
		logf("keeping the largest foreground component: mean Dice %.5f → %.5f %s; not kept\n", base.ForegroundMean.Dice, pp.ForegroundMean.Dice, why)
	}
	if len(labels) > 1 {
		for j, l := range labels {
			s := Step{Op: KeepLargestOp, Labels: []int{l}}
			pp, err := try(s)
			if err != nil {
				return nil, err
			}
			d := Decision{Step: s, Criterion: "mean of label " + strconv.Itoa(l),
				DiceBefore: jf(source.Mean[j].Dice), DiceAfter: jf(pp.Mean[j].Dice)}
			d.Kept = pp.Mean[j].Dice > source.Mean[j].Dice
			plan.Decisions = append(plan.Decisions, d)
			verdict := "not kept"
			if d.Kept {
				plan.Steps = append(plan.Steps, s)
				verdict = "kept"
			}
			logf("keeping the largest component of %s: Dice %.5f → %.5f; %s\n", base.LabelName(l), source.Mean[j].Dice, pp.Mean[j].Dice, verdict)
			if d.Kept {
				source = pp
			}
		}
	}
	plan.After = scoresOf(source)
	return &Result{Plan: plan, Baseline: base, Postprocess: source}, nil
}

func jf(v float64) jsonfloat.Float { return jsonfloat.Float(v) }

func names(labels []int, s *evaluation.Summary) string {
	out := ""
	for i, l := range labels {
		if i > 0 {
			out += ", "
		}
		out += s.LabelName(l)
	}
	return out
}
