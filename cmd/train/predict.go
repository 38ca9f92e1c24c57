package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/postprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// PredictOptions are `train predict`'s.
type PredictOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)

	// Model holds the device, threads, batch, overlap and mirroring
	// (Model.Checkpoint is unused: see Checkpoints).
	Model modelFlags
	// Checkpoints are the ensemble's members given one by one; ModelDir
	// with Folds (nil: every fold_<k> that has the checkpoint), RunID and
	// CheckpointName adds <ModelDir>/fold_<k>/run_<RunID>/checkpoints/<name>
	// for each fold (-1: fold_all).
	Checkpoints    []string
	ModelDir       string
	Folds          []int
	RunID          int
	CheckpointName string

	// Inputs are image files and folders. When Output has a label file
	// name they are one case's channel files (in channel order, or one 4D
	// file); otherwise Output is a folder and the inputs are grouped into
	// cases (infer.FindCases), each written as <Output>/<case><ending>,
	// the ending of the case's files.
	Inputs []string
	Output string
	// SaveProbabilities writes <case>.npz beside each label file.
	SaveProbabilities bool
	// Continue skips cases whose outputs exist (nnU-Net's
	// --continue_prediction); by default they are overwritten, as there.
	Continue bool
	// NumParts and PartID split a folder's cases into NumParts shares
	// and predict share PartID alone (the cases in name order, every
	// NumParts-th from the PartID-th: nnU-Net's -num_parts/-part_id), so
	// that several processes (one per GPU, or array tasks) predict one
	// folder together. NumParts 1: every case.
	NumParts, PartID int
	// Postprocessing is a postprocessing.json (train postprocess
	// determine) applied to each case's labels after argmax ("": none).
	Postprocessing string
	// ROI (--roi z0:z1,y0:y1,x0:x1, "": the whole input) and Block (the
	// output blocks and chunks, z,y,x) apply when Output names an
	// OME-Zarr store: blockwise prediction (predict_zarr.go).
	ROI   string
	Block [3]int
}

// NewCmdPredict builds `train predict`; runF (nil: predictRun) receives
// the options.
func NewCmdPredict(f *Factory, runF func(context.Context, *PredictOptions) error) *cobra.Command {
	opts := &PredictOptions{IO: f.IO, OpenDevice: f.OpenDevice}
	var folds []string
	var noMirror, disableTTA bool
	var block string
	cmd := &cobra.Command{
		Use:   "predict (--checkpoint C ... | --model-dir runs/EXP [--fold K ...]) -i IN... -o OUT",
		Short: "Segment images by sliding window (one case, or a folder; one checkpoint or an ensemble)",
		Long: `predict segments images with trained checkpoints, applying the same
preprocessing as training, and writes the labels as uint8 on each
input's grid: same dimensions, voxel sizes and orientation (a NIfTI
input's own qform and sform), so ITK-SNAP, 3D Slicer and FSLeyes overlay
it on the input.

One case: -o names a label file (.nii, .nii.gz, .hdr; .nrrd, .nhdr, .mha,
.mhd, .tif, .tiff) and -i gives the case's files, one per channel in
channel order, or one 4D file.

Many cases, as nnUNetv2_predict: -o names a folder and -i a folder (or
image files): CASE_0000.nii.gz, CASE_0001.nii.gz, ... are grouped into
cases by their channel suffix (the nnU-Net layout), other names are one
case a file (an MSD imagesTs folder); each case is written as
OUT/CASE with its files' ending, as nnU-Net's file_ending: CASE.nii.gz,
CASE.nii, CASE.hdr (+ .img), CASE.nrrd, CASE.mha, CASE.tif (with nnU-Net's
CASE.json of its spacing). Cases are read ahead and written
behind while the next is predicted; Ctrl-C stops between cases, never
leaving a half-written file. Existing outputs are overwritten unless
--continue-prediction.

Ensembles: repeat --checkpoint, or give a training output folder
(--model-dir runs/EXP) and its folds (--fold 0 1 2 3 4, or --folds 0,1,2;
default every fold_<k> with the checkpoint). The members' softmax
probabilities are averaged, then argmax. They must agree on classes, input
channels and preprocessing.

Test-time mirroring (8 passes) is on, as in nnU-Net; --disable-tta turns
it off. --save-probabilities also writes CASE.npz, one float32 array
"probabilities" of shape (C, z, y, x) on the input's grid:
np.load("CASE.npz")["probabilities"]. --postprocessing applies the plan
train postprocess determine chose on the cross-validation predictions to
each case's labels (the probabilities are left as predicted).

Huge volumes: when -o names an OME-Zarr store (OUT.ome.zarr), -i is one
case (a volume file or store of any format, e.g. a .zarr, or one file per
channel; an OME-Zarr image whose level 0 is not at the checkpoint's
data.target_spacing is read at its level that is) and it is predicted
block by block: --block (default 128) voxels
a block, each block one chunk of the output, predicted from the windows of
the whole ROI's sliding-window grid that overlap it (so the labels equal a
prediction of the whole ROI at once), reading only the input they cover,
the block plus at most patch-1 voxels each side. Memory per block is about
4·(B+2P)³·(2·channels+classes+1) bytes for blocks of B and patches of P
voxels a side (printed at the start), whatever the volume's size, plus a
Zarr input's decoded-chunk cache (256 MiB at most).
--roi z0:z1,y0:y1,x0:x1 (voxels of the input — of the level read, when
an OME-Zarr image is read at its target-spacing level, which the output
names with its shape; ends exclusive; an empty bound is the edge)
predicts a region; default the whole volume. The store
holds the uint8 labels as an OME-NGFF 0.4 image (axes z, y, x; scale and
translation from the input's spacing and the ROI's origin) and, with
--save-probabilities, float32 probabilities in OUT.ome.zarr/probabilities
(axes c, z, y, x). A z-score channel is normalised with the ROI's mean and
std (one streaming pass over the ROI first), a ct channel with the
checkpoint's statistics. OUT.ome.zarr/.voxtrain_progress.json lists the
blocks written; Ctrl-C stops between blocks, leaving a valid store, and a
rerun with --continue-prediction predicts only the rest.`,
		Example: `  train predict --checkpoint runs/demo/fold_0/run_0/checkpoints/best \
      -i testdata/demo/imagesTr/hippocampus_001.nii.gz -o hippocampus_001_pred.nii.gz
  train predict --checkpoint runs/demo/fold_0/run_0/checkpoints/best --checkpoint runs/demo/fold_0/run_0/checkpoints/last \
      -i testdata/demo/imagesTr -o preds/ --save-probabilities
  train predict --model-dir /data/runs/hippocampus --fold 0 1 2 3 4 -i /data/Task04_Hippocampus/imagesTs -o /data/preds
  train predict --checkpoint runs/demo/fold_0/run_0/checkpoints/last -i /data/brain.ome.zarr \
      --roi 0:512,1000:3000,: --block 128 -o /data/brain_labels.ome.zarr --save-probabilities --continue-prediction`,
		// Positional arguments are the rest of a space-separated --fold
		// list (nnU-Net's -f 0 1 2 3 4); checked in RunE.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if len(args) > 0 && !fl.Changed("fold") {
				return usageErr(cmd, fmt.Errorf("unexpected argument %q (inputs go after -i; folds after --fold)", args[0]))
			}
			var err error
			if opts.Folds, err = parseFolds(append(folds, args...)); err != nil {
				return err
			}
			if len(opts.Inputs) == 0 || opts.Output == "" {
				return usageErr(cmd, errors.New("--input (-i) and --output (-o) are required"))
			}
			switch {
			case len(opts.Checkpoints) == 0 && opts.ModelDir == "":
				return usageErr(cmd, errors.New("give --checkpoint (repeat it for an ensemble) or --model-dir with --fold"))
			case opts.ModelDir == "" && (fl.Changed("fold") || fl.Changed("run-id") || fl.Changed("checkpoint-name")):
				return errors.New("--fold, --run-id and --checkpoint-name pick checkpoints in --model-dir: give --model-dir too")
			case opts.CheckpointName != "best" && opts.CheckpointName != "last":
				return fmt.Errorf("--checkpoint-name %q: want best or last", opts.CheckpointName)
			case opts.RunID < 0:
				return fmt.Errorf("--run-id %d: want ≥ 0", opts.RunID)
			case opts.NumParts < 1:
				return fmt.Errorf("--num-parts %d: want ≥ 1", opts.NumParts)
			case opts.PartID < 0 || opts.PartID >= opts.NumParts:
				return fmt.Errorf("--part-id %d: want 0 ≤ part-id < --num-parts (%d)", opts.PartID, opts.NumParts)
			case opts.NumParts > 1 && isStoreOutput(opts.Output):
				return fmt.Errorf("--num-parts splits a folder of cases: -o %s is one OME-Zarr store (predict its blocks with --continue-prediction instead)", opts.Output)
			}
			if err := opts.Model.check(fl); err != nil {
				return err
			}
			if (fl.Changed("roi") || fl.Changed("block")) && !isStoreOutput(opts.Output) {
				return fmt.Errorf("--roi and --block predict block by block into an OME-Zarr store: give -o OUT.ome.zarr (not %s)", opts.Output)
			}
			if opts.Block, err = parseBlock(block); err != nil {
				return err
			}
			if _, err := parseROI(opts.ROI); err != nil {
				return err
			}
			if noMirror || disableTTA {
				opts.Model.Window.Mirror = false
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return predictRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	opts.Model.registerRuntime(cmd)
	fl.StringArrayVar(&opts.Checkpoints, "checkpoint", nil, "checkpoint directory, or a run's checkpoints/best or checkpoints/last (repeat for an ensemble)")
	fl.StringVar(&opts.ModelDir, "model-dir", "", "training output folder of one experiment (runs/EXP, holding fold_<k>/run_<r>/)")
	fl.StringSliceVarP(&folds, "fold", "f", nil, "folds of --model-dir to ensemble: 0 1 2, 0,1,2 or all (fold_all); default every fold with the checkpoint")
	fl.IntVar(&opts.RunID, "run-id", 0, "run of each fold in --model-dir (run_<id>)")
	fl.StringVar(&opts.CheckpointName, "checkpoint-name", "last", "checkpoint of each fold in --model-dir: last (as nnU-Net's checkpoint_final) or best")
	fl.StringArrayVarP(&opts.Inputs, "input", "i", nil, "input folder or image file (repeat: several channel files of one case, or several files/folders)")
	fl.StringVarP(&opts.Output, "output", "o", "", "output label file (one case), folder (many), or OUT.ome.zarr store (blockwise, one case)")
	fl.BoolVar(&opts.SaveProbabilities, "save-probabilities", false, "also write the class probabilities as CASE.npz beside the labels")
	fl.IntVar(&opts.NumParts, "num-parts", 1, "split the folder's cases into this many parts and predict one (--part-id), e.g. one process per GPU (nnU-Net's -num_parts)")
	fl.IntVar(&opts.PartID, "part-id", 0, "the part of --num-parts this process predicts: 0 … num-parts−1 (nnU-Net's -part_id)")
	fl.BoolVar(&opts.Continue, "continue-prediction", false, "skip cases whose outputs already exist, or an OME-Zarr output's blocks already written (default: overwrite them)")
	fl.StringVar(&opts.ROI, "roi", "", "with -o OUT.ome.zarr: the region to predict, z0:z1,y0:y1,x0:x1 in the input's voxels (of the level read; default: the whole volume)")
	fl.StringVar(&block, "block", "128", "with -o OUT.ome.zarr: the output block (and chunk) size, one size or z,y,x; memory grows with (block+2·patch)³")
	fl.StringVar(&opts.Postprocessing, "postprocessing", "", "postprocessing.json from train postprocess determine, applied to each case's labels (probabilities are left as predicted)")
	fl.BoolVar(&opts.Model.Window.Mirror, "mirror", true, "test-time mirroring along every axis (8 passes), as nnU-Net")
	fl.BoolVar(&disableTTA, "disable-tta", false, "turn test-time mirroring off (nnU-Net's --disable_tta)")
	fl.BoolVar(&noMirror, "no-mirror", false, "the same as --disable-tta")
	// --folds is --fold, as nnU-Net users may type either.
	fl.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "folds" {
			name = "fold"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

// parseFolds reads fold numbers (or "all", -1) from --fold's values and
// the arguments that follow it.
func parseFolds(vals []string) ([]int, error) {
	var out []int
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			k, err := strconv.Atoi(s)
			if s == "all" {
				k, err = -1, nil
			}
			if err != nil || k < -1 {
				return nil, fmt.Errorf("--fold %q: want fold numbers (0 1 2, or 0,1,2) or all", s)
			}
			if slices.Contains(out, k) {
				return nil, fmt.Errorf("--fold %s given twice", s)
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// checkpointPaths returns the ensemble's checkpoints: --checkpoint's, then
// --model-dir's folds'.
func (o *PredictOptions) checkpointPaths() ([]string, error) {
	paths := slices.Clone(o.Checkpoints)
	if o.ModelDir == "" {
		return paths, nil
	}
	if fi, err := os.Stat(o.ModelDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--model-dir %s: not a folder (want a training output folder, <output_dir>/<experiment>)", o.ModelDir)
	}
	ckpt := func(fold int) string {
		return filepath.Join(foldRunDir(o.ModelDir, fold, o.RunID), "checkpoints", o.CheckpointName)
	}
	folds := o.Folds
	if folds == nil {
		// As nnU-Net's auto_detect_available_folds: every fold_<k> (not
		// fold_all) that has the checkpoint.
		var err error
		folds, err = modelFolds(o.ModelDir, func(k int) bool { _, err := os.Stat(ckpt(k)); return err == nil })
		if err != nil {
			return nil, fmt.Errorf("--model-dir %w", err)
		}
		if len(folds) == 0 {
			return nil, fmt.Errorf("--model-dir %s: no fold_<k>/run_%d/checkpoints/%s (give --fold, --run-id or --checkpoint-name)", o.ModelDir, o.RunID, o.CheckpointName)
		}
	}
	for _, k := range folds {
		p := ckpt(k)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("--model-dir %s --fold %d: no checkpoint %s", o.ModelDir, k, p)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// openEnsemble loads the checkpoints the options name (checkpointPaths)
// as loadEnsemble does.
func (o *PredictOptions) openEnsemble() (*infer.Ensemble, func(), error) {
	paths, err := o.checkpointPaths()
	if err != nil {
		return nil, nil, err
	}
	return o.loadEnsemble(paths)
}

// loadEnsemble opens the device and loads every checkpoint; done releases
// them all.
func (o *PredictOptions) loadEnsemble(paths []string) (*infer.Ensemble, func(), error) {
	dev, err := o.OpenDevice(o.Model.Device, o.Model.Threads)
	if err != nil {
		return nil, nil, err
	}
	var models []*infer.Model
	done := func() {
		for _, m := range models {
			m.Close()
		}
		dev.Close()
	}
	for _, p := range paths {
		m, err := infer.LoadModel(p, dev.Dev, o.Model.Batch)
		if err != nil {
			done()
			return nil, nil, err
		}
		models = append(models, m)
	}
	e, err := infer.NewEnsemble(models)
	if err != nil {
		done()
		return nil, nil, err
	}
	return e, done, nil
}

// labelStem drops a label file ending from a label file name, for the
// .npz beside it.
func labelStem(path string) string {
	if e := volume.FileEnding(path); e != "" {
		return strings.TrimSuffix(path, e)
	}
	for _, ext := range []string{".img.gz", ".img"} { // a NIfTI pair named by its image
		if s, ok := strings.CutSuffix(path, ext); ok {
			return s
		}
	}
	return path
}

// outputIsFile tells the one-case form (-o names a label file: NIfTI,
// NRRD, MetaImage, TIFF) from the folder form (-o an existing folder, a
// name ending in a separator, or a name without an extension). A name
// with another extension (labels.png) is refused, as before folders were
// accepted, rather than made a folder.
func outputIsFile(output string, inputs []string) (bool, error) {
	if volume.Writes(output) {
		return true, nil
	}
	if fi, err := os.Stat(output); (err == nil && fi.IsDir()) || strings.HasSuffix(output, string(filepath.Separator)) ||
		filepath.Ext(output) == "" {
		return false, nil
	}
	err := infer.CheckOutput(output, inputs) // names the problem
	return false, fmt.Errorf("--output: %w; or give a folder (ending in %c)", err, filepath.Separator)
}

// predictRun predicts the cases and writes their outputs. Outputs are
// checked before the checkpoints are loaded where they can be (one case:
// the file name; many: the folder), the inputs' headers before the first
// case is predicted, so mistakes fail at once rather than after minutes
// of inference.
func predictRun(ctx context.Context, opts *PredictOptions) error {
	if isStoreOutput(opts.Output) {
		return predictBlocksRun(ctx, opts)
	}
	single, err := outputIsFile(opts.Output, opts.Inputs)
	if err != nil {
		return err
	}
	if single && opts.NumParts > 1 {
		return fmt.Errorf("--num-parts splits a folder of cases: -o %s names one file", opts.Output)
	}
	var pp *postprocess.Plan
	if opts.Postprocessing != "" {
		if pp, err = postprocess.Load(opts.Postprocessing); err != nil {
			return fmt.Errorf("--postprocessing: %w", err)
		}
	}
	if single {
		if err := infer.CheckOutput(opts.Output, opts.Inputs); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
		for _, in := range opts.Inputs {
			if fi, err := os.Stat(in); err == nil && fi.IsDir() {
				return fmt.Errorf("--input %s is a folder but --output %s names one file: give an output folder", in, opts.Output)
			}
		}
	} else if err := checkOutputDir(opts.Output); err != nil {
		return fmt.Errorf("--output %s: %w", opts.Output, err)
	}
	ens, done, err := opts.openEnsemble()
	if err != nil {
		return err
	}
	defer done()

	var jobs []infer.Job
	if single {
		id := filepath.Base(labelStem(opts.Inputs[0]))
		jobs = []infer.Job{{Case: data.Case{ID: id, Images: opts.Inputs, Weight: 1}, Labels: opts.Output}}
	} else {
		cases, err := infer.FindCases(opts.Inputs, ens.Channels)
		if err != nil {
			return err
		}
		for i, c := range cases {
			if i%opts.NumParts == opts.PartID {
				jobs = append(jobs, infer.Job{Case: c.Case, Labels: filepath.Join(opts.Output, c.ID+c.Ext)})
			}
		}
		if opts.NumParts > 1 {
			fmt.Fprintf(opts.IO.Out, "part %d of %d: %d of the %d cases\n", opts.PartID, opts.NumParts, len(jobs), len(cases))
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if opts.SaveProbabilities {
			j.Probabilities = labelStem(j.Labels) + ".npz"
		}
		if err := infer.CheckCase(j.Case, ens.Channels); err != nil {
			return err
		}
		if !single {
			if err := infer.CheckOutput(j.Labels, j.Case.Images); err != nil {
				return fmt.Errorf("--output: %w", err)
			}
		}
	}
	out := opts.IO.Out
	if opts.Continue {
		kept := jobs[:0]
		for _, j := range jobs {
			if !exists(j.Labels) || (j.Probabilities != "" && !exists(j.Probabilities)) {
				kept = append(kept, j)
			}
		}
		if n := len(jobs) - len(kept); n > 0 {
			fmt.Fprintf(out, "--continue-prediction: %d of %d cases already predicted, skipped\n", n, len(jobs))
		}
		jobs = kept
	}
	for _, m := range ens.Members {
		fmt.Fprintf(out, "checkpoint %s\n", m.Dir)
	}
	tta := "on (8 passes)"
	if !opts.Model.Window.Mirror {
		tta = "off"
	}
	fmt.Fprintf(out, "%d cases, %d checkpoints, mirroring %s\n", len(jobs), len(ens.Members), tta)
	if len(jobs) == 0 {
		return nil
	}
	ro := infer.RunOptions{Window: opts.Model.Window, Log: out}
	if pp != nil {
		if err := checkPlanLabels(pp, ens); err != nil {
			return fmt.Errorf("--postprocessing %s: %w", opts.Postprocessing, err)
		}
		ro.Postprocess = pp.Apply
		fmt.Fprintf(out, "post-processing %s: %d steps\n", opts.Postprocessing, len(pp.Steps))
	}
	st, err := ens.Run(ctx, jobs, ro)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Wrapped, so main still tells an interruption (exit 130) by
			// context.Canceled.
			return fmt.Errorf("interrupted after %d of %d cases, each written whole; --continue-prediction predicts the rest: %w",
				st.Cases, len(jobs), err)
		}
		return err
	}
	if single {
		fmt.Fprintf(out, "wrote %s\n", opts.Output)
	} else {
		fmt.Fprintf(out, "predictions in %s\n", opts.Output)
	}
	return nil
}

// exists reports whether path names an existing file.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkPlanLabels refuses a post-processing plan naming a label the
// ensemble never writes (a plan made for another dataset): labels
// 0..classes−1 for softmax models, the values regions_class_order paints
// for nnU-Net regions, the bit-packed values 0..2^classes−1 for other
// multi-label models.
func checkPlanLabels(pp *postprocess.Plan, ens *infer.Ensemble) error {
	for _, l := range pp.PredictedLabels() {
		switch {
		case l < 0 || l > 255:
			return fmt.Errorf("label %d, want 1..255", l)
		case ens.RegionsClassOrder != nil:
			if !slices.Contains(ens.RegionsClassOrder, l) {
				return fmt.Errorf("label %d, but the models paint regions as labels %v (regions_class_order; a plan made for another dataset?)", l, ens.RegionsClassOrder)
			}
		case ens.MultiLabel:
			if l >= 1<<min(ens.Classes, 8) {
				return fmt.Errorf("label %d, but the models write bit-packed labels 0..%d (a plan made for another dataset?)", l, 1<<min(ens.Classes, 8)-1)
			}
		case l >= max(ens.Classes, 2):
			return fmt.Errorf("label %d, but the models predict labels 0..%d (a plan made for another dataset?)", l, max(ens.Classes, 2)-1)
		}
	}
	return nil
}
