package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/checkpoint/torchpt"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/nnunet"
	"github.com/voxtrain/voxtrain/plan"
)

// ImportNNUNetOptions are `train import-nnunet`'s.
type ImportNNUNetOptions struct {
	IO *IOStreams
	// Model is nnU-Net's trained-model folder; Configuration overrides the
	// configuration its name gives.
	Model, Configuration string
	// Data is the raw dataset the model was trained on (data.dataset of
	// the written configs); Output the training outputs folder the
	// experiment goes in; Experiment its name ("": DATASET_CONFIGURATION,
	// as train plan names it, or DATASET_PLANS_CONFIGURATION for plans
	// other than nnUNetPlans).
	Data, Output, Experiment string
	// Folds to import (nil: every fold with a checkpoint_final.pth).
	Folds []int
	// Splits is nnU-Net's splits_final.json the model was trained with
	// ("": nnU-Net's default folds, which voxtrain generates alike).
	Splits string
	// Version is recorded in the checkpoints.
	Version string
}

// NewCmdImportNNUNet builds `train import-nnunet`; runF (nil:
// importNNUNetRun) receives the options.
func NewCmdImportNNUNet(f *Factory, runF func(context.Context, *ImportNNUNetOptions) error) *cobra.Command {
	opts := &ImportNNUNetOptions{IO: f.IO, Version: f.Version}
	var folds []string
	cmd := &cobra.Command{
		Use:   "import-nnunet MODEL_FOLDER --data DATASET -o OUTPUT_DIR",
		Short: "Turn a model nnU-Net v2 trained into a voxtrain training output folder (predict, validate, fine-tune with it)",
		Long: `import-nnunet reads a trained-model folder of nnU-Net v2
(nnUNet_results/DATASET/nnUNetTrainer__nnUNetPlans__3d_fullres: plans.json,
dataset.json, dataset_fingerprint.json, fold_<k>/checkpoint_final.pth) and
writes OUTPUT_DIR/EXPERIMENT/fold_<k>/run_0/ as training with voxtrain would:
the run's config.yaml (what train plan writes for that configuration, axes
in the files' order), checkpoints of the fold's network weights
(checkpoint_final.pth as last, checkpoint_best.pth as best: nnU-Net's
PlainConvUNet or ResidualEncoderUNet state_dict renamed to voxtrain's, every kernel's axes put
back from nnU-Net's transposed order) and the fold's validation folder (its
predictions, CASE.npz and summary.json, which find-best gathers). train
predict --model-dir OUTPUT_DIR/EXPERIMENT, validate, find-best and ensemble
then use it as any voxtrain model; --init-weights fine-tunes from a fold's
checkpoint.

The checkpoints carry no optimiser state (nnU-Net's is not mapped), so an
imported run is not resumed. 3d_fullres, 3d_lowres and 2d configurations
import (a 2d model's 2-D kernels become voxtrain's 2d network's, one voxel
deep across the slices; a 3d_lowres model predicts on its coarser grid),
and datasets of nnU-Net regions (multi-label targets, one sigmoid output
per region, regions_class_order), with nnU-Net's default plans or its
residual-encoder presets (nnUNetResEncUNet{M,L,XL}Plans: model.encoder
residual); the cascade's second stage (3d_cascade_fullres) is refused,
saying why. The .pth files
are read without Python (checkpoint/torchpt).`,
		Example: `  train import-nnunet /data/nnUNet_results/Dataset004_Hippocampus/nnUNetTrainer__nnUNetPlans__3d_fullres \
      --data /data/nnUNet_raw/Dataset004_Hippocampus -o /data/runs
  train predict --model-dir /data/runs/Dataset004_Hippocampus_3d_fullres -i /data/nnUNet_raw/Dataset004_Hippocampus/imagesTs -o /data/preds`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = args[0]
			switch {
			case opts.Output == "":
				return usageErr(cmd, errors.New("--output (-o) is required: the training outputs folder to write the experiment into"))
			case opts.Data == "" && os.Getenv("nnUNet_raw") == "":
				return usageErr(cmd, errors.New("--data is required (or nnU-Net's nnUNet_raw in the environment): the raw dataset the model was trained on (the configs' data.dataset)"))
			case strings.ContainsAny(opts.Experiment, `/\`):
				return fmt.Errorf("--experiment %q: a name, no slashes", opts.Experiment)
			}
			var err error
			if opts.Folds, err = parseFolds(folds); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return importNNUNetRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Data, "data", "", "the raw dataset the model was trained on, data.dataset of the configs (default: $nnUNet_raw/DATASET)")
	fl.StringVarP(&opts.Output, "output", "o", "", "training outputs folder to write the experiment into (e.g. runs)")
	fl.StringVar(&opts.Experiment, "experiment", "", "the experiment's name (default: DATASET_CONFIGURATION, as train plan names it; DATASET_PLANS_CONFIGURATION for plans other than nnUNetPlans, e.g. a ResEnc preset's)")
	fl.StringVar(&opts.Configuration, "configuration", "", "the plans' configuration the model trained (default: the folder name's, TRAINER__PLANS__CONFIGURATION)")
	fl.StringVar(&opts.Splits, "splits", "", "nnU-Net's splits_final.json the folds were trained with, copied into the experiment as its data.splits_file (default: $nnUNet_preprocessed/DATASET/splits_final.json when there is one, else nnU-Net's default folds)")
	fl.StringSliceVarP(&folds, "fold", "f", nil, "folds to import: 0 1 2, 0,1,2 or all (fold_all); default every fold with a checkpoint_final.pth")
	return cmd
}

func importNNUNetRun(opts *ImportNNUNetOptions) error {
	m, err := nnunet.ReadModel(opts.Model, opts.Configuration)
	if err != nil {
		return err
	}
	// nnU-Net's environment, when set, says where the raw dataset and the
	// splits it trained with are, as nnU-Net itself finds them.
	if opts.Data == "" {
		opts.Data = filepath.Join(os.Getenv("nnUNet_raw"), m.Plans.DatasetName)
	}
	if pre := os.Getenv("nnUNet_preprocessed"); opts.Splits == "" && pre != "" {
		if p := filepath.Join(pre, m.Plans.DatasetName, "splits_final.json"); exists(p) {
			opts.Splits = p
		}
	}
	folds := m.Folds
	if opts.Folds != nil {
		for _, k := range opts.Folds {
			if !slices.Contains(m.Folds, k) {
				return fmt.Errorf("--fold %s: no %s", foldName(k), m.Checkpoint(k))
			}
		}
		folds = opts.Folds
	}
	data, err := filepath.Abs(opts.Data)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(data); err != nil || !fi.IsDir() {
		return fmt.Errorf("--data %s: not a folder (want the raw dataset the model was trained on)", opts.Data)
	}
	// Models of other plans than nnU-Net's default (a ResEnc preset's
	// nnUNetResEncUNetMPlans) keep the plans' name, so that importing both
	// into one folder keeps them apart, as nnU-Net's folder names do.
	prefix := m.Plans.DatasetName
	if pn := m.Plans.PlansName; pn != "" && pn != "nnUNetPlans" {
		prefix += "_" + pn
	}
	text, err := plan.YAML(m.Plans, m.Configuration, m.Fingerprint, m.Dataset, plan.YAMLOptions{Dataset: data, Experiment: prefix})
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Model, err)
	}
	cfg, err := config.Parse([]byte(text), filepath.Join(opts.Model, "plans.json"), filepath.Dir(data))
	if err != nil {
		return fmt.Errorf("%s: the configuration written from plans.json: %w", opts.Model, err)
	}
	if opts.Experiment != "" {
		cfg.Experiment = opts.Experiment
	}
	cfg.OutputDir = opts.Output
	exp := filepath.Join(opts.Output, cfg.Experiment)
	for _, k := range folds {
		if run := foldRunDir(exp, k, 0); exists(run) {
			return fmt.Errorf("%s exists: import into another --output or --experiment (nothing is written over)", run)
		}
	}
	var splits []byte
	if opts.Splits != "" {
		if splits, cfg.Data.NumFolds, err = readNNUNetSplits(opts.Splits); err != nil {
			return err
		}
		if cfg.Data.SplitsFile, err = filepath.Abs(filepath.Join(exp, "splits_final.json")); err != nil {
			return err
		}
		if exists(cfg.Data.SplitsFile) {
			return fmt.Errorf("%s exists: import into another --output or --experiment (nothing is written over)", cfg.Data.SplitsFile)
		}
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: the configuration written from plans.json: %w", opts.Model, err)
	}
	for _, k := range folds {
		if k >= cfg.Data.NumFolds {
			return fmt.Errorf("fold %d: the runs have data.num_folds %d (give --splits with nnU-Net's splits_final.json)", k, cfg.Data.NumFolds)
		}
	}
	// The network voxtrain builds from the config names the tensors and
	// shapes every fold's weights must fill.
	dev := cpu.New(cpu.Options{Threads: 1})
	net, err := nn.NewUNet(dev, cfg.Model, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Model, err)
	}
	want, err := nn.ExportParams(dev, net.Params())
	net.Free()
	if err != nil {
		return err
	}
	out := opts.IO.Out
	if splits != nil {
		if err := os.MkdirAll(exp, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.Data.SplitsFile, splits, 0o644); err != nil {
			return err
		}
	}
	stages := len(cfg.Model.Features)
	for _, k := range folds {
		cfg.Data.Fold = k
		runText, err := cfg.YAML()
		if err != nil {
			return err
		}
		rd, err := checkpoint.NewRunDir(opts.Output, cfg.Experiment, k, 0)
		if err != nil {
			return err
		}
		if err := os.WriteFile(rd.Config, []byte(runText), 0o644); err != nil {
			return err
		}
		s := checkpoint.Saver{Dir: rd.Checkpoints, Policy: cfg.Checkpoint}
		// checkpoint_best.pth first, with the EMA pseudo Dice nnU-Net kept
		// it by (voxtrain's best pointer), then checkpoint_final.pth (last).
		pths := []string{m.Checkpoint(k)}
		if best := filepath.Join(filepath.Dir(pths[0]), "checkpoint_best.pth"); exists(best) {
			pths = []string{best, pths[0]}
		}
		for _, pth := range pths {
			model, numbers, err := importWeights(pth, want, stages, m, cfg.Model.DeepSupervision)
			if err != nil {
				return err
			}
			c := &checkpoint.Checkpoint{Model: model, Optimizer: []nn.HostTensor{}, Config: runText, Version: opts.Version,
				Epoch: int(numbers["current_epoch"]),
				State: map[string]string{"imported_from": pth, "nnunet_trainer": m.Trainer, "nnunet_plans": m.PlansName}}
			if ema, ok := numbers["_best_ema"]; ok && filepath.Base(pth) == "checkpoint_best.pth" {
				c.Metric = &ema
			}
			saved, err := s.Save(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "fold %s: %s → %s\n", foldName(k), pth, saved.Dir)
		}
		// nnU-Net's final validation of the fold (its predictions, CASE.npz
		// with --npz, summary.json in nnU-Net's schema, voxtrain's too)
		// comes along, so that find-best gathers the imported folds.
		val := filepath.Join(filepath.Dir(m.Checkpoint(k)), "validation")
		if ents, err := os.ReadDir(val); err == nil {
			dst := filepath.Join(rd.Path, "validation")
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			n := 0
			for _, e := range ents {
				if !e.Type().IsRegular() {
					continue
				}
				if err := linkOrCopy(filepath.Join(val, e.Name()), filepath.Join(dst, e.Name())); err != nil {
					return err
				}
				n++
			}
			fmt.Fprintf(out, "fold %s: nnU-Net's validation (%d files) → %s\n", foldName(k), n, dst)
		}
	}
	fmt.Fprintf(out, "imported %s (%s, %d folds) into %s\n", m.Configuration, m.Plans.DatasetName, len(folds), exp)
	fmt.Fprintf(out, "predict with it: train predict --model-dir %s -i INPUT_FOLDER -o OUTPUT_FOLDER\n", shellQuote(exp))
	return nil
}

// importWeights reads a checkpoint nnU-Net wrote and returns its network
// weights in voxtrain's order (want: the names and shapes of the network
// the plans describe), and the numbers beside them (current_epoch,
// _best_ema). A tensor missing, of another shape or left over is an
// error naming it.
func importWeights(pth string, want []nn.HostTensor, stages int, m *nnunet.Model, deepSup bool) ([]nn.HostTensor, map[string]float64, error) {
	raw, err := os.ReadFile(pth)
	if err != nil {
		return nil, nil, err
	}
	f, err := torchpt.ReadFile(bytes.NewReader(raw), int64(len(raw)), pth)
	if err != nil {
		return nil, nil, err
	}
	w, err := nnunet.Weights(f.Tensors, stages, m.Plans.TransposeBackward, deepSup)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", pth, err)
	}
	model := make([]nn.HostTensor, len(want))
	for i, p := range want {
		t, ok := w[p.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%s: no weights for voxtrain's %s %v (a network other than the plans' %s?)", pth, p.Name, p.Shape, m.Configuration)
		}
		if !slices.Equal(t.Shape, p.Shape) {
			return nil, nil, fmt.Errorf("%s: %s is %v in the file, %v in the network the plans describe", pth, p.Name, t.Shape, p.Shape)
		}
		model[i] = t
		delete(w, p.Name)
	}
	if len(w) > 0 {
		var extra []string
		for n := range w {
			extra = append(extra, n)
		}
		slices.Sort(extra)
		return nil, nil, fmt.Errorf("%s: weights the network the plans describe does not have: %s", pth, strings.Join(extra, ", "))
	}
	return model, f.Numbers, nil
}

// readNNUNetSplits reads nnU-Net's splits_final.json (a list of
// {"train": [...], "val": [...]}) and returns its bytes and fold count.
func readNNUNetSplits(path string) ([]byte, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("--splits: %w", err)
	}
	var folds []struct {
		Train []string `json:"train"`
		Val   []string `json:"val"`
	}
	if err := json.Unmarshal(b, &folds); err != nil {
		return nil, 0, fmt.Errorf("--splits %s: not nnU-Net's splits_final.json: %w", path, err)
	}
	if len(folds) < 1 {
		return nil, 0, fmt.Errorf("--splits %s: no fold", path)
	}
	for k, f := range folds {
		if len(f.Val) == 0 {
			return nil, 0, fmt.Errorf("--splits %s: fold %d has no validation case", path, k)
		}
	}
	return b, len(folds), nil
}
