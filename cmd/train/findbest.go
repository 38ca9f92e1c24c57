package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/ensemble"
	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/internal/jsonfloat"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/volume"
)

// FindBestOptions are `train find-best`'s.
type FindBestOptions struct {
	IO *IOStreams
	// CV are the configurations' pooled cross-validation predictions, in
	// the order given (the first of a tie wins).
	CV []cvConfig
	// RefDir holds the references, Output receives the results.
	RefDir, Output string
	labelFlags
	// NoEnsembling leaves the pairs of configurations out.
	NoEnsembling bool
	// MultiLabel: the models' channels are sigmoid classes without
	// regions (bit-packed labels), as train ensemble --multi-label.
	MultiLabel bool
	// RunID and Folds pick the runs whose final validations a --cv
	// training output folder contributes (Folds nil: every fold of the
	// runs' data.num_folds).
	RunID int
	Folds []int
}

// cvConfig is one --cv NAME=DIR.
type cvConfig struct {
	Name string
	// Dir holds the configuration's pooled cross-validation predictions:
	// DIR itself, or where gatherCrossval gathered a training output
	// folder's.
	Dir string
	// ModelDir is DIR when it is a training output folder (fold_<k>/
	// run_<r>/ with their final validations), else "". Folds are the folds
	// gathered from it and CheckpointName the checkpoint they validated
	// ("" for last: predict's default).
	ModelDir       string
	Folds          []int
	CheckpointName string
}

// parseCV reads --cv values, NAME=DIR each: names unique and usable in a
// folder name and a placeholder (letters, digits, _ . -), folders
// existing.
func parseCV(vals []string) ([]cvConfig, error) {
	var out []cvConfig
	seen := map[string]bool{}
	for _, v := range vals {
		name, dir, ok := strings.Cut(v, "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("--cv %q: want NAME=DIR (a configuration's name and its pooled cross-validation predictions, e.g. 3d_fullres=cv/3d_fullres)", v)
		}
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
				return nil, fmt.Errorf("--cv %q: the name %q may hold letters, digits, _ . and - only (it names folders and placeholders)", v, name)
			}
		}
		if name == "postprocessed" || strings.HasPrefix(name, "ensemble_") || name == "PP" {
			// OUT/postprocessed and OUT/ensemble_A+B are find-best's own,
			// OUTPUT_FOLDER_PP the instructions' post-processed output.
			return nil, fmt.Errorf("--cv %q: the name %s would clash with find-best's own folders (postprocessed, ensemble_*) or placeholders (OUTPUT_FOLDER_PP)", v, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("--cv %q: the name %s is given twice", v, name)
		}
		seen[name] = true
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--cv %s=%s: %s is not a folder (want the configuration's training output folder, or its pooled cross-validation predictions)", name, dir, dir)
		}
		if isModelDir(dir) {
			out = append(out, cvConfig{Name: name, ModelDir: dir})
			continue
		}
		out = append(out, cvConfig{Name: name, Dir: dir})
	}
	return out, nil
}

// NewCmdFindBest builds `train find-best`; runF (nil: findBestRun)
// receives the options.
func NewCmdFindBest(f *Factory, runF func(context.Context, *FindBestOptions) error) *cobra.Command {
	opts := &FindBestOptions{IO: f.IO}
	var cv []string
	cmd := &cobra.Command{
		Use:   "find-best --cv NAME=DIR [--cv NAME=DIR ...] [--ref LABELS --dataset-json dataset.json] -o OUT",
		Short: "Pick the best configuration or pair of configurations from cross-validation (nnUNetv2_find_best_configuration)",
		Long: `find-best does what nnUNetv2_find_best_configuration does. Each --cv
NAME=DIR is one configuration: its training output folder (runs/EXP, with
fold_<k>/run_<r>/validation/ from each fold's final validation,
validation.final; train --npz adds the CASE.npz ensembling needs), whose
folds' validations are gathered into OUT/NAME as nnU-Net's
accumulate_cv_results does (--folds, default every fold of the runs'
data.num_folds, and then only those folds' cases are scored; --run-id;
--ref and --dataset-json default to the labelsTr and dataset.json of the
dataset the runs trained on); or a folder of pooled cross-validation
predictions: every training case's label file, and its CASE.npz for
ensembling (e.g. train validate --output DIR --save-probabilities of each
fold, all into DIR).

Every configuration is scored against --ref (nnU-Net's summary.json in
OUT/NAME/summary.json); unless --no-ensembling, every pair of
configurations that both have probabilities is ensembled (train ensemble)
into OUT/ensemble_A+B and scored. The best candidate is the one with the
highest foreground mean Dice (nnU-Net's rule; on a tie the first, so a
single configuration before an ensemble). Post-processing is then
determined on its predictions, as train postprocess determine does
(OUT/postprocessing.json, OUT/postprocessed/). OUT/inference_information.json
holds every candidate's score, the chosen one and the post-processing;
OUT/inference_instructions.txt the commands that predict a test folder the
same way: train predict --model-dir with each configuration's training
output folder, its folds, run and checkpoint, or MODEL_DIR_<NAME> standing
for it where --cv gave pooled predictions.`,
		Example: `  train find-best --cv 3d_fullres=/data/runs/Dataset004_Hippocampus_3d_fullres --cv 2d=/data/runs/Dataset004_Hippocampus_2d -o /data/find_best
  train find-best --cv 3d_fullres=/data/cv/3d_fullres --cv 2d=/data/cv/2d \
      --ref /data/Dataset004_Hippocampus/labelsTr --dataset-json /data/Dataset004_Hippocampus/dataset.json -o /data/find_best`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.labelFlags.check(cmd.Flags()); err != nil {
				return err
			}
			switch {
			case len(cv) == 0:
				return usageErr(cmd, errors.New("--cv NAME=DIR is required (repeat it for each configuration)"))
			case opts.Output == "":
				return usageErr(cmd, errors.New("--output (-o) is required"))
			}
			var err error
			if opts.CV, err = parseCV(cv); err != nil {
				return err
			}
			models := slices.ContainsFunc(opts.CV, func(c cvConfig) bool { return c.ModelDir != "" })
			switch {
			case opts.RunID < 0:
				return fmt.Errorf("--run-id %d: want ≥ 0", opts.RunID)
			case slices.ContainsFunc(opts.Folds, func(k int) bool { return k < 0 }):
				return fmt.Errorf("--folds %v: want folds ≥ 0", opts.Folds)
			case !models && (cmd.Flags().Changed("folds") || cmd.Flags().Changed("run-id")):
				return errors.New("--folds and --run-id pick the runs of a training output folder: no --cv names one (each is a folder of pooled predictions)")
			}
			if opts.RefDir == "" {
				if !models {
					return usageErr(cmd, errors.New("--ref is required (the folder of the training cases' labels)"))
				}
				if err := opts.trainedDataset(cmd.Flags().Changed("dataset-json")); err != nil {
					return err
				}
			}
			if fi, err := os.Stat(opts.RefDir); err != nil || !fi.IsDir() {
				return fmt.Errorf("--ref %s: not a folder (want the training cases' labels, e.g. labelsTr)", opts.RefDir)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return findBestRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&cv, "cv", nil, "NAME=DIR: a configuration's name and its training output folder (runs/EXP) or pooled cross-validation predictions (repeat)")
	fl.IntSliceVar(&opts.Folds, "folds", nil, "folds whose final validations a training output folder contributes, e.g. 0,1,2 (default: every fold of its runs' data.num_folds)")
	fl.IntVar(&opts.RunID, "run-id", 0, "run of each fold of a training output folder (run_<id>)")
	fl.StringVar(&opts.RefDir, "ref", "", "folder of the references (the training cases' labels), same file names (default with training output folders: their dataset's labelsTr, and its dataset.json)")
	fl.StringVarP(&opts.Output, "output", "o", "", "folder for the candidates' summaries, the ensembles, postprocessing.json and the inference instructions")
	fl.BoolVar(&opts.NoEnsembling, "no-ensembling", false, "score the configurations alone, no pairs (nnU-Net's --disable_ensembling)")
	fl.BoolVar(&opts.MultiLabel, "multi-label", false, "the models' channels are sigmoid classes (model.targets multi_label) without regions: ensembles give bit-packed labels, as train ensemble --multi-label")
	opts.labelFlags.register(fl, "foreground labels to score")
	return cmd
}

// candidate is a configuration or an ensemble of two, scored.
type candidate struct {
	Name string
	// Members are the --cv names it is made of (one, or a pair).
	Members []string
	// Dir holds its predictions, Summary its summary.json.
	Dir, Summary string
	pairs        []evaluation.Pair
	Dice         float64
	Cases        int
}

func findBestRun(opts *FindBestOptions) error {
	out := opts.IO.Out
	sc, err := opts.resolve()
	if err != nil {
		return err
	}
	lo, err := labelOptions(opts.DatasetJSON, opts.MultiLabel)
	if err != nil {
		return err
	}
	for _, c := range opts.CV {
		if c.ModelDir == "" && samepath.Same(c.Dir, opts.Output) {
			return fmt.Errorf("--output %s is --cv %s=%s: give another folder", opts.Output, c.Name, c.Dir)
		}
	}
	if err := checkOutputDir(opts.Output); err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	for i := range opts.CV {
		if c := &opts.CV[i]; c.ModelDir != "" {
			// The gathering empties OUT/NAME of label files first: never a
			// folder find-best reads.
			dst := filepath.Join(opts.Output, c.Name)
			for _, o := range opts.CV {
				if o.ModelDir == "" && samepath.Same(dst, o.Dir) || samepath.Same(dst, opts.RefDir) {
					return fmt.Errorf("--cv %s=%s gathers its folds into %s, which is an input (--cv or --ref): give another --output", c.Name, c.ModelDir, dst)
				}
			}
			if err := gatherCrossval(c, opts.Folds, opts.RunID, sc.ending, filepath.Join(opts.Output, c.Name), out); err != nil {
				return err
			}
		}
	}
	// score evaluates c's predictions as train evaluate does; errors are
	// the caller's to name.
	score := func(c *candidate) error {
		if err := commonCases(c.Dir, opts.RefDir, sc.ending); err != nil {
			return err
		}
		match := evaluation.MatchFiles
		if opts.Folds != nil {
			// Some folds' validations: their cases alone, as nnU-Net
			// scores a subset of the folds (chill).
			match = evaluation.MatchPredictions
		}
		pairs, err := match(c.Dir, opts.RefDir, sc.ending)
		if err != nil {
			return err
		}
		s, err := evaluation.Folder(pairs, evaluation.Options{Labels: sc.labels, Regions: sc.regions, Names: sc.names, Ignore: opts.Ignore})
		if err != nil {
			return err
		}
		if err := s.Write(c.Summary); err != nil {
			return err
		}
		c.pairs, c.Dice, c.Cases = pairs, s.ForegroundMean.Dice, len(s.Cases)
		fmt.Fprintf(out, "%s: foreground mean Dice %.5f over %d cases\n", c.Name, c.Dice, c.Cases)
		return nil
	}
	var cands []*candidate
	for _, cfg := range opts.CV {
		c := &candidate{Name: cfg.Name, Members: []string{cfg.Name}, Dir: cfg.Dir, Summary: filepath.Join(opts.Output, cfg.Name, "summary.json")}
		if err := score(c); err != nil {
			return fmt.Errorf("--cv %s=%s: %w", cfg.Name, cfg.source(), err)
		}
		cands = append(cands, c)
	}
	var skipped []string
	if !opts.NoEnsembling {
		for i := range opts.CV {
			for j := i + 1; j < len(opts.CV); j++ {
				a, b := opts.CV[i], opts.CV[j]
				name := "ensemble_" + a.Name + "+" + b.Name
				if why := noProbabilities(sc.ending, a, b); why != "" {
					skipped = append(skipped, name+": "+why)
					fmt.Fprintf(out, "%s skipped: %s\n", name, why)
					continue
				}
				dir := filepath.Join(opts.Output, name)
				if _, err := ensemble.Folders([]string{a.Dir, b.Dir}, dir, lo); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				c := &candidate{Name: name, Members: []string{a.Name, b.Name}, Dir: dir, Summary: filepath.Join(dir, "summary.json")}
				if err := score(c); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				cands = append(cands, c)
			}
		}
	}
	best := bestCandidate(cands)
	printCandidates(out, cands, best)

	fmt.Fprintf(out, "determining the post-processing on %s's predictions\n", best.Name)
	planPath := filepath.Join(opts.Output, "postprocessing.json")
	ppDir := filepath.Join(opts.Output, "postprocessed")
	res, err := determinePostprocessing(best.pairs, sc, opts.Ignore, ppDir, planPath, nil)
	if err != nil {
		return fmt.Errorf("%s: post-processing: %w", best.Name, err)
	}
	fmt.Fprintf(out, "%d post-processing step(s) kept; foreground mean Dice %.5f → %.5f\n", len(res.Plan.Steps),
		res.Baseline.ForegroundMean.Dice, res.Postprocess.ForegroundMean.Dice)

	info := inferenceInformation(opts, cands, best, skipped, planPath, len(res.Plan.Steps), res.Postprocess.ForegroundMean.Dice)
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	infoPath := filepath.Join(opts.Output, "inference_information.json")
	if err := atomicfile.WriteFileUmask(infoPath, append(b, '\n'), 0o666); err != nil {
		return fmt.Errorf("write %s: %w", infoPath, err)
	}
	text, err := inferenceInstructions(opts, best, planPath)
	if err != nil {
		return err
	}
	instrPath := filepath.Join(opts.Output, "inference_instructions.txt")
	if err := atomicfile.WriteFileUmask(instrPath, []byte(text), 0o666); err != nil {
		return fmt.Errorf("write %s: %w", instrPath, err)
	}
	fmt.Fprintf(out, "\n%s\nwrote %s and %s\n", text, infoPath, instrPath)
	return nil
}

// commonCases refuses a prediction folder that shares no case with the
// references (wrong folder, or another file ending), before MatchFiles
// lists every file of both as unmatched.
func commonCases(predDir, refDir, ending string) error {
	refs, err := labelNames(refDir, ending)
	if err != nil {
		return err
	}
	preds, err := labelNames(predDir, ending)
	if err != nil {
		return err
	}
	for n := range preds {
		if refs[n] {
			return nil
		}
	}
	e := ending
	if e == "" {
		e = strings.Join(volume.Endings(), ", ")
	}
	return fmt.Errorf("%s has no case in common with --ref %s (%d and %d label files ending in %s)", predDir, refDir, len(preds), len(refs), e)
}

// labelNames are the names of dir's label files ending in ending ("": any
// label file ending; evaluation.LabelNames), as a set.
func labelNames(dir, ending string) (map[string]bool, error) {
	names, err := evaluation.LabelNames(dir, ending)
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, err
}

// noProbabilities says why a pair cannot be ensembled: a folder with a
// label file (ending in ending; "": any) that has no CASE.npz beside it
// ("" when every one has). A folder of which only some folds were
// validated with --save-probabilities is named with its first such file,
// rather than ensembled over fewer cases and then scored as missing them.
func noProbabilities(ending string, cfgs ...cvConfig) string {
	for _, c := range cfgs {
		names, err := labelNames(c.Dir, ending)
		if err != nil {
			return fmt.Sprintf("%s (--cv %s): %v", c.Dir, c.Name, err)
		}
		var missing []string
		for n := range names {
			if fi, err := os.Stat(labelStem(filepath.Join(c.Dir, n)) + ".npz"); err != nil || fi.IsDir() {
				missing = append(missing, n)
			}
		}
		switch {
		case len(missing) > 0 && len(missing) == len(names):
			return fmt.Sprintf("%s (--cv %s) has no CASE.npz probabilities (train with --npz, or validate with --save-probabilities)", c.Dir, c.Name)
		case len(missing) > 0:
			slices.Sort(missing)
			return fmt.Sprintf("%s (--cv %s): %d of %d label files have no CASE.npz beside them (%s first): train every fold with --npz (or validate it with --save-probabilities)", c.Dir, c.Name, len(missing), len(names), missing[0])
		}
	}
	return ""
}

// bestCandidate is nnU-Net's choice: the highest foreground mean Dice, the
// first on a tie (single configurations come before ensembles); NaN
// scores lose to any number.
func bestCandidate(cands []*candidate) *candidate {
	best := cands[0]
	for _, c := range cands[1:] {
		if c.Dice > best.Dice || math.IsNaN(best.Dice) && !math.IsNaN(c.Dice) {
			best = c
		}
	}
	return best
}

// printCandidates prints the table of candidates, the best marked.
func printCandidates(w io.Writer, cands []*candidate, best *candidate) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ncandidate\tforeground mean Dice\tcases\t")
	for _, c := range cands {
		mark := ""
		if c == best {
			mark = "best"
		}
		fmt.Fprintf(tw, "%s\t%.5f\t%d\t%s\n", c.Name, c.Dice, c.Cases, mark)
	}
	tw.Flush()
}

// findBestInfo is inference_information.json: nnU-Net's keys where they
// have a meaning here (all_results, best_model_or_ensemble), and every
// candidate's folders. A NaN score (no case has a label) is null.
type findBestInfo struct {
	ReferenceFolder     string                     `json:"reference_folder"`
	DatasetJSON         string                     `json:"dataset_json,omitempty"`
	EnsemblingAllowed   bool                       `json:"ensembling_allowed"`
	ConsideredModels    []cvConfig                 `json:"considered_models"`
	Candidates          []candidateInfo            `json:"candidates"`
	SkippedEnsembles    []string                   `json:"skipped_ensembles,omitempty"`
	AllResults          map[string]jsonfloat.Float `json:"all_results"`
	BestModelOrEnsemble bestInfo                   `json:"best_model_or_ensemble"`
}

// candidateInfo is a candidate in inference_information.json.
type candidateInfo struct {
	Name    string          `json:"name"`
	Members []string        `json:"members"`
	Folder  string          `json:"folder"`
	Summary string          `json:"summary"`
	Dice    jsonfloat.Float `json:"foreground_mean_dice"`
	Cases   int             `json:"cases"`
}

// bestInfo is the chosen candidate and its post-processing.
type bestInfo struct {
	Name                   string          `json:"name"`
	SelectedModelOrModels  []string        `json:"selected_model_or_models"`
	ResultOnCrossvalPrePP  jsonfloat.Float `json:"result_on_crossval_pre_pp"`
	ResultOnCrossvalPostPP jsonfloat.Float `json:"result_on_crossval_post_pp"`
	PostprocessingFile     string          `json:"postprocessing_file"`
	PostprocessingSteps    int             `json:"postprocessing_steps"`
	PostprocessedFolder    string          `json:"postprocessed_folder"`
}

// source is the folder --cv named.
func (c cvConfig) source() string {
	if c.ModelDir != "" {
		return c.ModelDir
	}
	return c.Dir
}

// MarshalJSON writes a --cv as {"name": NAME, "folder": DIR}, with the
// training output folder and the folds gathered from it when it was one
// (DIR is then where they were gathered).
func (c cvConfig) MarshalJSON() ([]byte, error) {
	m := map[string]any{"name": c.Name, "folder": c.Dir}
	if c.ModelDir != "" {
		m["model_folder"], m["folds"] = c.ModelDir, c.Folds
	}
	return json.Marshal(m)
}

func inferenceInformation(opts *FindBestOptions, cands []*candidate, best *candidate, skipped []string, planPath string, steps int, post float64) findBestInfo {
	info := findBestInfo{ReferenceFolder: opts.RefDir, DatasetJSON: opts.DatasetJSON, EnsemblingAllowed: !opts.NoEnsembling,
		ConsideredModels: opts.CV, SkippedEnsembles: skipped, AllResults: map[string]jsonfloat.Float{}}
	for _, c := range cands {
		info.Candidates = append(info.Candidates, candidateInfo{Name: c.Name, Members: c.Members, Folder: c.Dir, Summary: c.Summary,
			Dice: jsonfloat.Float(c.Dice), Cases: c.Cases})
		info.AllResults[c.Name] = jsonfloat.Float(c.Dice)
	}
	info.BestModelOrEnsemble = bestInfo{Name: best.Name, SelectedModelOrModels: best.Members, ResultOnCrossvalPrePP: jsonfloat.Float(best.Dice),
		ResultOnCrossvalPostPP: jsonfloat.Float(post), PostprocessingFile: planPath, PostprocessingSteps: steps,
		PostprocessedFolder: filepath.Join(opts.Output, "postprocessed")}
	return info
}

// inferenceInstructions are the commands that predict a test folder as
// the best candidate did, as nnU-Net's print_inference_instructions:
// predict with each member (with probabilities when there are two), the
// ensemble, then the post-processing. Paths are absolute so that the
// commands run from anywhere.
func inferenceInstructions(opts *FindBestOptions, best *candidate, planPath string) (string, error) {
	plan, err := filepath.Abs(planPath)
	if err != nil {
		return "", err
	}
	models := map[string]string{} // member → its --model-dir and the flags picking its runs
	placeholders := false
	for _, m := range best.Members {
		c := cvConfig{Name: m} // a member not among opts.CV: a placeholder
		if i := slices.IndexFunc(opts.CV, func(c cvConfig) bool { return c.Name == m }); i >= 0 {
			c = opts.CV[i]
		}
		if models[m], err = modelArgs(c, opts.RunID); err != nil {
			return "", err
		}
		placeholders = placeholders || c.ModelDir == ""
	}
	var b strings.Builder
	if placeholders {
		b.WriteString("Run inference like this (INPUT_FOLDER: the test images; MODEL_DIR_<NAME>: the training output folder of\n")
		b.WriteString("configuration NAME, <output_dir>/<experiment>, holding fold_<k>/; add --device cuda to predict on a GPU):\n\n")
	} else {
		b.WriteString("Run inference like this (INPUT_FOLDER: the test images; add --device cuda to predict on a GPU):\n\n")
	}
	if len(best.Members) == 1 {
		fmt.Fprintf(&b, "train predict --model-dir %s -i INPUT_FOLDER -o OUTPUT_FOLDER\n", models[best.Members[0]])
	} else {
		b.WriteString("An ensemble won: predict with each member, saving the probabilities, then ensemble them:\n\n")
		var outs []string
		for _, m := range best.Members {
			o := "OUTPUT_FOLDER_" + m
			outs = append(outs, o)
			fmt.Fprintf(&b, "train predict --model-dir %s -i INPUT_FOLDER -o %s --save-probabilities\n", models[m], o)
		}
		fmt.Fprintf(&b, "train ensemble -i %s -o OUTPUT_FOLDER", strings.Join(outs, " "))
		if opts.DatasetJSON != "" {
			dj, err := filepath.Abs(opts.DatasetJSON)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, " --dataset-json %s", shellQuote(dj))
		}
		if opts.MultiLabel {
			b.WriteString(" --multi-label")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nOnce inference is completed, run the post-processing like this:\n\n")
	fmt.Fprintf(&b, "train postprocess apply --plan %s OUTPUT_FOLDER OUTPUT_FOLDER_PP\n", shellQuote(plan))
	if len(best.Members) == 1 {
		fmt.Fprintf(&b, "\n(or both at once: train predict --model-dir %s -i INPUT_FOLDER -o OUTPUT_FOLDER_PP --postprocessing %s)\n",
			models[best.Members[0]], shellQuote(plan))
	}
	return b.String(), nil
}

// modelArgs is what follows predict's --model-dir for configuration c:
// its training output folder (absolute) with the folds, run id and
// checkpoint its cross-validation used, or the placeholder MODEL_DIR_<NAME>
// for a folder of pooled predictions, whose models find-best cannot know.
func modelArgs(c cvConfig, runID int) (string, error) {
	if c.ModelDir == "" {
		return "MODEL_DIR_" + c.Name, nil
	}
	dir, err := filepath.Abs(c.ModelDir)
	if err != nil {
		return "", err
	}
	out := shellQuote(dir) + " --fold " + intsText(c.Folds, ",")
	if runID != 0 {
		out += fmt.Sprintf(" --run-id %d", runID)
	}
	if c.CheckpointName != "" {
		out += " --checkpoint-name " + c.CheckpointName
	}
	return out, nil
}

// trainedDataset sets RefDir (and DatasetJSON unless given: keepJSON) from
// the dataset the --cv training output folders trained on (data.dataset
// of a run's config.yaml): its labelsTr and dataset.json, nnU-Net's
// layout and MSD's, as nnU-Net's find_best takes the references from the
// dataset. Every folder must have trained on the same dataset.
func (o *FindBestOptions) trainedDataset(keepJSON bool) error {
	dataset := ""
	for _, c := range o.CV {
		if c.ModelDir == "" {
			continue
		}
		folds, err := modelFolds(c.ModelDir, func(k int) bool {
			_, err := os.Stat(filepath.Join(foldRunDir(c.ModelDir, k, o.RunID), "config.yaml"))
			return err == nil
		})
		if err != nil || len(folds) == 0 {
			return fmt.Errorf("--cv %s=%s: no fold_<k>/run_%d/config.yaml to take the dataset from: give --ref", c.Name, c.ModelDir, o.RunID)
		}
		cfg, err := config.Load(filepath.Join(foldRunDir(c.ModelDir, folds[0], o.RunID), "config.yaml"))
		if err != nil {
			return fmt.Errorf("--cv %s=%s: %w (or give --ref)", c.Name, c.ModelDir, err)
		}
		switch {
		case cfg.Data.Dataset == "":
			return fmt.Errorf("--cv %s=%s trained on a list of cases (data.cases), not a dataset folder: give --ref", c.Name, c.ModelDir)
		case dataset != "" && !samepath.Same(dataset, cfg.Data.Dataset):
			return fmt.Errorf("--cv %s=%s trained on %s, another --cv on %s: give --ref", c.Name, c.ModelDir, cfg.Data.Dataset, dataset)
		}
		dataset = cfg.Data.Dataset
	}
	o.RefDir = filepath.Join(dataset, "labelsTr")
	if fi, err := os.Stat(o.RefDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("the runs' dataset %s has no labelsTr folder: give --ref", dataset)
	}
	if dj := filepath.Join(dataset, "dataset.json"); !keepJSON {
		if _, err := os.Stat(dj); err == nil {
			o.DatasetJSON = dj
		}
	}
	return nil
}
