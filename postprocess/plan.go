package postprocess

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/jsonfloat"
)

// Format is the "format" of a postprocessing.json this package writes.
const Format = "voxtrain-postprocessing-1"

// KeepLargestOp is the one step operation: remove all but the largest
// connected component of the step's labels taken together.
const KeepLargestOp = "keep_largest_component"

// Step is one post-processing step: every voxel whose label is one of
// Labels, outside the largest connected component of all those voxels
// taken together, becomes background (0).
//
// A region step (nnU-Net v2 regions) is that over the region's label
// values: nnU-Net's remove_all_but_largest_component_from_segmentation
// with a region builds the mask np.isin(seg, region) on the painted label
// map and sets what it removes to background, exactly as a step over
// those labels does, so Labels are the region's values (sorted, each once;
// 0 only where the region lists it) and Region records which region it
// was. Plans written before regions have no Region and read as before.
type Step struct {
	Op     string `json:"op"`
	Labels []int  `json:"labels"`
	// Region is the region's summary.json key ("(2, 3)", "3"; see
	// evaluation.Region.Key), set on a region step only.
	Region string `json:"region,omitempty"`
	// Name is the region's dataset.json name (may be empty).
	Name string `json:"name,omitempty"`
}

// RegionStep is the step keeping the largest component of region r.
func RegionStep(r evaluation.Region) Step {
	return Step{Op: KeepLargestOp, Labels: regionLabels(r.Labels), Region: r.Key(), Name: r.Name}
}

// regionLabels are a region's label values sorted, each once.
func regionLabels(vals []int) []int {
	out := append([]int(nil), vals...)
	sort.Ints(out)
	return slices.Compact(out)
}

// Decision records one candidate step Determine tried: the Dice it was
// judged on before and after (the foreground mean for the all-foreground
// step, the class's or region's mean for a per-entry step) and whether it
// was kept.
type Decision struct {
	Step
	// Criterion is "foreground_mean", "mean of label k" or "mean of
	// region KEY".
	Criterion  string          `json:"criterion"`
	DiceBefore jsonfloat.Float `json:"dice_before"`
	DiceAfter  jsonfloat.Float `json:"dice_after"`
	Kept       bool            `json:"kept"`
	// WorseLabels are the labels whose mean Dice the step lowered, which
	// rejects an all-foreground step even when the mean rose.
	WorseLabels []int `json:"worse_labels,omitempty"`
	// WorseRegions are the same for a region-based dataset: the keys of
	// the regions whose mean Dice the all-foreground step lowered.
	WorseRegions []string `json:"worse_regions,omitempty"`
}

// Scores are a folder's mean Dice: per label (or region, by its
// summary.json key) and over them (summary.json's mean and
// foreground_mean Dice).
type Scores struct {
	ForegroundMeanDice jsonfloat.Float            `json:"foreground_mean_dice"`
	MeanDice           map[string]jsonfloat.Float `json:"mean_dice"`
}

// Plan is postprocessing.json: the steps to apply in order, and how they
// were chosen. nnU-Net keeps its plan as a pickle of Python functions
// (postprocessing.pkl) beside a postprocessing.json of scores; this file
// is both, readable by anything. NaN scores are written as null.
type Plan struct {
	Format string `json:"format"`
	// Labels are the foreground labels (nnU-Net's foreground_labels), the
	// all-foreground step's.
	Labels     []int             `json:"labels"`
	LabelNames map[string]string `json:"label_names,omitempty"`
	// Regions, for a region-based dataset, are the regions scored, by
	// their summary.json keys in dataset.json's order, and RegionNames
	// their names by key.
	Regions     []string          `json:"regions,omitempty"`
	RegionNames map[string]string `json:"region_names,omitempty"`
	Steps       []Step            `json:"steps"`
	Decisions   []Decision        `json:"decisions,omitempty"`
	Before      *Scores           `json:"input_folder,omitempty"`
	After       *Scores           `json:"postprocessed,omitempty"`
}

func scoresOf(s *evaluation.Summary) *Scores {
	out := &Scores{ForegroundMeanDice: jsonfloat.Float(s.ForegroundMean.Dice), MeanDice: map[string]jsonfloat.Float{}}
	for j := range s.Mean {
		out.MeanDice[s.Key(j)] = jsonfloat.Float(s.Mean[j].Dice)
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

// check reports a step Apply could not run, or a region step whose
// labels are not its region's.
func (s Step) check() error {
	if s.Op != KeepLargestOp {
		return fmt.Errorf("op %q: want %q", s.Op, KeepLargestOp)
	}
	if s.Region == "" {
		if err := evaluation.CheckLabels(append([]int(nil), s.Labels...)); err != nil {
			return fmt.Errorf("labels %v: %w", s.Labels, err)
		}
		return nil
	}
	r, err := evaluation.ParseRegionKey(s.Region)
	if err != nil {
		return fmt.Errorf("region: %w", err)
	}
	if err := evaluation.CheckRegions([]evaluation.Region{r}); err != nil {
		return fmt.Errorf("region %s: %w", s.Region, err)
	}
	if want := regionLabels(r.Labels); !slices.Equal(s.Labels, want) {
		return fmt.Errorf("region %s: labels %v, want its label values %v", s.Region, s.Labels, want)
	}
	return nil
}

// PredictedLabels are the foreground labels the plan names (Labels and
// every step's), sorted, each once: what a model applying it must be
// able to predict.
func (p *Plan) PredictedLabels() []int {
	all := append([]int(nil), p.Labels...)
	for _, s := range p.Steps {
		all = append(all, s.Labels...)
	}
	all = regionLabels(all)
	if len(all) > 0 && all[0] == 0 {
		all = all[1:] // a region may list background; every model predicts it
	}
	return all
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
