package postprocess

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Format is the "format" of a postprocessing.json this package writes.
const Format = "voxtrain-postprocessing-1"

// KeepLargestOp is the one step operation: remove all but the largest
// connected component of the step's labels taken together.
const KeepLargestOp = "keep_largest_component"

// Step is one post-processing step.
type Step struct {
	Op     string `json:"op"`
	Labels []int  `json:"labels"`
}

// Decision records one candidate step Determine tried: the Dice it was
// judged on before and after (the foreground mean for the all-foreground
// step, the class's mean for a per-class step) and whether it was kept.
type Decision struct {
	Step
	Criterion  string          `json:"criterion"` // "foreground_mean" or "mean of label k"
	DiceBefore jsonfloat.Float `json:"dice_before"`
	DiceAfter  jsonfloat.Float `json:"dice_after"`
	Kept       bool            `json:"kept"`
	// WorseLabels are the labels whose mean Dice the step lowered, which
	// rejects an all-foreground step even when the mean rose.
	WorseLabels []int `json:"worse_labels,omitempty"`
}

// Scores are a folder's mean Dice: per label and over the labels
// (summary.json's mean and foreground_mean Dice).
type Scores struct {
	ForegroundMeanDice jsonfloat.Float            `json:"foreground_mean_dice"`
	MeanDice           map[string]jsonfloat.Float `json:"mean_dice"`
}

// Plan is postprocessing.json: the steps to apply in order, and how they
// were chosen. nnU-Net keeps its plan as a pickle of Python functions
// (postprocessing.pkl) beside a postprocessing.json of scores; this file
// is both, readable by anything. NaN scores are written as null.
type Plan struct {
	Format     string            `json:"format"`
	Labels     []int             `json:"labels"`
	LabelNames map[string]string `json:"label_names,omitempty"`
	Steps      []Step            `json:"steps"`
	Decisions  []Decision        `json:"decisions,omitempty"`
	Before     *Scores           `json:"input_folder,omitempty"`
	After      *Scores           `json:"postprocessed,omitempty"`
}

func scoresOf(s *evaluation.Summary) *Scores {
	out := &Scores{ForegroundMeanDice: jsonfloat.Float(s.ForegroundMean.Dice), MeanDice: map[string]jsonfloat.Float{}}
	for j, l := range s.Labels {
		out.MeanDice[strconv.Itoa(l)] = jsonfloat.Float(s.Mean[j].Dice)
	}
	return out
}

// Apply runs the plan's steps in order on a (D, H, W) label map, in place.
func (p *Plan) Apply(labels []uint8, shape [3]int) error {
	for i, s := range p.Steps {
		if err := s.apply(labels, shape); err != nil {
			return fmt.Errorf("post-processing step %d: %w", i+1, err)
		}
	}
	return nil
}

func (s Step) apply(labels []uint8, shape [3]int) error {
	if s.Op != KeepLargestOp {
		return fmt.Errorf("unknown op %q (want %q)", s.Op, KeepLargestOp)
	}
	return RemoveAllButLargest(labels, shape, s.Labels)
}

// check reports a step Apply could not run.
func (s Step) check() error {
	if s.Op != KeepLargestOp {
		return fmt.Errorf("op %q: want %q", s.Op, KeepLargestOp)
	}
	if err := evaluation.CheckLabels(append([]int(nil), s.Labels...)); err != nil {
		return fmt.Errorf("labels %v: %w", s.Labels, err)
	}
	return nil
}

// Write writes the plan to path (atomically, with the umask's permissions).
func (p *Plan) Write(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.WriteFileUmask(path, append(b, '\n'), 0o666); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Load reads a postprocessing.json and checks its steps; errors name the
// file and the step.
func Load(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if p.Format != Format {
		return nil, fmt.Errorf("%s: format %q, want %q (a postprocessing.json written by train postprocess determine; nnU-Net's own postprocessing.pkl is not read)", path, p.Format, Format)
	}
	if p.Steps == nil {
		return nil, fmt.Errorf("%s: no \"steps\" list (an empty list means no post-processing)", path)
	}
	for i, s := range p.Steps {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%s: steps[%d]: %w", path, i, err)
		}
	}
	return &p, nil
}
