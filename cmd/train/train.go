package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/gpumon"
	"github.com/voxtrain/voxtrain/nn"
	"github.com/voxtrain/voxtrain/trainer"
)

// TrainOptions are the root command's: a run config with the flags the
// user set written over it.
type TrainOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)
	// Monitor samples a CUDA device's GPU (see Factory.Monitor); Version
	// is stored in the checkpoints.
	Monitor func(spec string) *gpumon.Monitor
	Version string

	// ConfigPath is --config; Config is that file with the flags merged
	// in, validated.
	ConfigPath string
	Config     *config.Config
	// Resume is "" (fresh), "auto" or a checkpoint path.
	Resume string
	// InitWeightsFlag says that --init-weights set Config.Train.InitWeights
	// (see trainer.Options.InitWeightsFlag).
	InitWeightsFlag bool
	// StopAfterSteps ends the run after that many steps, saving last (a
	// hidden flag, for tests and time-boxed jobs).
	StopAfterSteps int
	// ResumeCommand is printed when the run is interrupted.
	ResumeCommand string

	// beforeStep is trainer.Options.BeforeStep (tests).
	beforeStep func(step int64, model *nn.UNet)
}

// trainFlags are the training flags that override the config file.
type trainFlags struct {
	config    string
	fold      int
	runID     int
	outputDir string
	epochs    int
	batchSize int
	workers   string
	device    string
	seed      uint64
	resume    string
	threads   int
	stopAfter int
	// initWeights and initMismatch are --init-weights and --init-mismatch.
	initWeights  string
	initMismatch string
	// finalVal and npz are --final-validation and --npz.
	finalVal string
	npz      bool
}

func (tf *trainFlags) register(fl *pflag.FlagSet) {
	fl.StringVarP(&tf.config, "config", "c", "", "run config (YAML)")
	fl.IntVar(&tf.fold, "fold", 0, "cross-validation fold (-1: train on every case)")
	fl.IntVar(&tf.runID, "run-id", 0, "run number within experiment and fold")
	fl.StringVarP(&tf.outputDir, "output-dir", "o", "", "directory of runs (default: the config's output_dir, else ./runs)")
	fl.IntVar(&tf.epochs, "epochs", 0, "number of epochs")
	fl.IntVar(&tf.batchSize, "batch-size", 0, "batch size")
	fl.StringVar(&tf.workers, "workers", "", "data worker goroutines, or auto")
	fl.StringVar(&tf.device, "device", "", deviceHelp)
	fl.Uint64Var(&tf.seed, "seed", 0, "random seed")
	fl.StringVar(&tf.resume, "resume", "", "resume from a checkpoint path, or auto (the run's latest)")
	fl.StringVar(&tf.initWeights, "init-weights", "", "fine-tune: start a new run from these weights (a checkpoint, its model.safetensors, or a PyTorch state_dict as .safetensors or torch.save's .pt/.pth); key train.init_weights")
	fl.StringVar(&tf.initMismatch, "init-mismatch", "", "init weights that do not fit the model: error (default) or skip (keep their fresh initialisation); key train.init_mismatch")
	fl.IntVar(&tf.threads, "threads", 0, "CPU threads (0: all cores)")
	fl.StringVar(&tf.finalVal, "final-validation", "", "after the last epoch, validate the last (nnU-Net's final validation) or best checkpoint on the fold's held-out cases into RUN/validation/, or none; key validation.final")
	fl.BoolVar(&tf.npz, "npz", false, "the final validation also writes CASE.npz probabilities (nnU-Net's --npz; a final validation of the last checkpoint unless one is configured); key validation.final_probabilities")
	fl.IntVar(&tf.stopAfter, "stop-after-steps", 0, "stop (saving last, as on SIGTERM) after this many steps")
	fl.MarkHidden("stop-after-steps")
}

// options loads the config and writes the flags the user set over it
// (a flag given as 0 means 0: validation then says what is wrong).
func (tf *trainFlags) options(f *Factory, fl *pflag.FlagSet) (*TrainOptions, error) {
	if tf.config == "" {
		return nil, errors.New("--config is required (try: train --config configs/demo.yaml)")
	}
	cfg, err := config.Load(tf.config)
	if err != nil {
		return nil, err
	}
	set := fl.Changed
	if set("fold") {
		cfg.Data.Fold = tf.fold
	}
	if set("run-id") {
		cfg.RunID = tf.runID
	}
	if set("output-dir") {
		cfg.OutputDir = tf.outputDir
	}
	if set("epochs") {
		cfg.Train.Epochs = tf.epochs
	}
	if set("batch-size") {
		cfg.Train.BatchSize = tf.batchSize
	}
	if set("workers") {
		if cfg.Data.Workers, err = config.ParseWorkers(tf.workers); err != nil {
			return nil, fmt.Errorf("--workers: %w", err)
		}
	}
	if set("device") {
		cfg.Device = tf.device
	}
	if set("seed") {
		cfg.Seed = tf.seed
	}
	if set("threads") {
		cfg.Threads = tf.threads
	}
	initFlag := set("init-weights") && tf.initWeights != ""
	if set("init-weights") {
		cfg.Train.InitWeights = tf.initWeights
		if initFlag {
			// Recorded in the run's config.yaml: absolute, so it names the
			// file from anywhere.
			if cfg.Train.InitWeights, err = filepath.Abs(tf.initWeights); err != nil {
				return nil, fmt.Errorf("--init-weights: %w", err)
			}
		}
	}
	if set("init-mismatch") {
		cfg.Train.InitMismatch = tf.initMismatch
	}
	if set("final-validation") {
		cfg.Validation.Final = tf.finalVal
	}
	if set("npz") {
		cfg.Validation.FinalProbabilities = tf.npz
		if tf.npz && cfg.Validation.Final == config.FinalNone && !set("final-validation") {
			// nnU-Net's --npz saves the probabilities of the final
			// validation every training ends with.
			cfg.Validation.Final = config.FinalLast
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s with the flags given: %w", tf.config, nameFlags(err, fl, trainFlagKeys))
	}
	return &TrainOptions{IO: f.IO, OpenDevice: f.OpenDevice, Monitor: f.Monitor, Version: f.Version, ConfigPath: tf.config, Config: cfg,
		Resume: tf.resume, InitWeightsFlag: initFlag, StopAfterSteps: tf.stopAfter, ResumeCommand: resumeCommand(f.Args)}, nil
}

// trainFlagKeys are the config keys the training flags set, by flag.
var trainFlagKeys = map[string]string{
	"fold": "data.fold", "run-id": "run_id", "output-dir": "output_dir", "epochs": "train.epochs",
	"batch-size": "train.batch_size", "workers": "data.workers", "device": "device", "seed": "seed", "threads": "threads",
	"init-weights": "train.init_weights", "init-mismatch": "train.init_mismatch",
	"final-validation": "validation.final", "npz": "validation.final_probabilities",
}

// nameFlags puts the flag in front of each of a config's validation errors
// (Config.Validate's, "train.epochs: 0, want ≥ 1") whose key a flag the
// user gave set (keys: key by flag name): "--epochs 0: train.epochs: 0,
// want ≥ 1". An error about a key the file set is left as it is.
func nameFlags(err error, fl *pflag.FlagSet, keys map[string]string) error {
	errs := config.Problems(err)
	for i, e := range errs {
		msg := e.Error()
		for name, key := range keys {
			f := fl.Lookup(name)
			if f != nil && f.Changed && (strings.HasPrefix(msg, key+":") || strings.HasPrefix(msg, key+"[")) {
				errs[i] = fmt.Errorf("--%s %s: %w", name, f.Value, e)
				break
			}
		}
	}
	return errors.Join(errs...)
}

// NewCmdTrain builds the root command, which trains; runF (nil: trainRun)
// receives the options.
func NewCmdTrain(f *Factory, runF func(context.Context, *TrainOptions) error) *cobra.Command {
	var tf trainFlags
	cmd := &cobra.Command{
		Use:   "train --config C [flags] | train COMMAND",
		Short: "Train 3D U-Nets on medical and scientific volumes, with a data pipeline that never lets the GPU wait",
		Long: `train is voxtrain's single binary: it reads volumes (NIfTI, NRRD, MetaImage,
TIFF stacks and slice folders, Zarr v2/v3, OME-Zarr and N5, local or over
HTTP(S), chunked ones patch by patch), prepares and augments patches with
persistent goroutine workers, and trains 3D U-Nets on the CPU or on CUDA
GPUs, on one device or data-parallel over several processes.

Exit status, for schedulers and requeue wrappers:
  0    finished: the run completed its epochs (any command: success)
  1    failed
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (128 + the signal):
       training finished its step, saved last and printed the resume
       command (--resume auto continues exactly). A second signal exits
       at once with 128 + that signal; the latest checkpoint is intact.
  75   stopped by --stop-after-steps after saving last (resume to continue)`,
		Example: `  # The bundled demo: train, validate, plot
  train demo

  # Train; flags override the YAML; Ctrl-C saves and prints the resume command
  train --config configs/nnunet_3d_fullres.yaml --fold 2 --run-id 1 --device cuda
  train --config configs/nnunet_3d_fullres.yaml --fold 2 --run-id 1 --resume auto

  # Fine-tune: a new run (epoch 0, fresh optimiser) from a checkpoint's or a
  # PyTorch state_dict's weights; skip keeps a new head's fresh initialisation
  train --config configs/demo.yaml --run-id 2 --init-weights runs/demo/fold_0/run_0/checkpoints/best
  train --config configs/demo.yaml --run-id 3 --init-weights python/testdata/torch_init.safetensors --init-mismatch skip

  # Describe NIfTI files like nib-ls / fslhd, or as JSON
  train info testdata/demo/imagesTr/hippocampus_001.nii.gz
  train info --json testdata/demo/labelsTr/hippocampus_001.nii.gz

  # Shell completion
  source <(train completion bash)`,
		Version:       f.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownCommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tf.config == "" {
				return cmd.Help()
			}
			opts, err := tf.options(f, cmd.Flags())
			if err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			_, err = trainRun(cmd.Context(), opts)
			return err
		},
	}
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	tf.register(cmd.Flags())
	return cmd
}

// trainRun trains on the device the config names and prints where the run
// is and its best Dice, then runs the final validation validation.final
// asks for (finalValidation). An interrupted run returns its result with
// the *trainer.Interrupted error, and is not validated.
func trainRun(ctx context.Context, opts *TrainOptions) (*trainer.Result, error) {
	cfg := opts.Config
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
	}
	env, err := dist.FromEnviron()
	if err != nil {
		return nil, fmt.Errorf("data-parallel job: %w", err)
	}
	device := deviceForRank(cfg.Device, env, os.Getenv("CUDA_VISIBLE_DEVICES"))
	dev, err := opts.OpenDevice(device, cfg.Threads)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	mon := opts.Monitor(device)
	defer mon.Close()
	res, err := trainer.Run(ctx, cfg, trainer.Options{Device: dev.Dev, Alloc: dev.Alloc, Resume: opts.Resume,
		InitWeightsFlag: opts.InitWeightsFlag, Out: opts.IO.Out, Version: opts.Version, ResumeCommand: opts.ResumeCommand,
		StopAfterSteps: opts.StopAfterSteps, Monitor: mon, BeforeStep: opts.beforeStep})
	var in *trainer.Interrupted
	if err != nil && !errors.As(err, &in) {
		return nil, err
	}
	best := "none yet"
	if res.BestDice == res.BestDice {
		best = fmt.Sprintf("%.4f", res.BestDice)
	}
	fmt.Fprintf(opts.IO.Out, "run %s: %d epochs, %d steps, best validation Dice %s\n", res.RunDir, res.Epochs, res.Steps, best)
	if len(res.Plots) > 0 {
		fmt.Fprintf(opts.IO.Out, "plots: %s\n", filepath.Dir(res.Plots[0]))
	}
	if err != nil {
		return res, err // an *trainer.Interrupted gives the exit status
	}
	return res, finalValidation(ctx, opts, dev, res.RunDir, env.Rank)
}

// deviceForRank is the device a rank of a data-parallel job opens: as
// torchrun's users expect, a CUDA device without an index is the GPU of
// the rank's local rank (cuda → cuda:LOCAL_RANK, options kept); an index
// given, or the CPU, stays as it is; so does the device when visible
// (CUDA_VISIBLE_DEVICES) shows the rank fewer GPUs than its local rank
// (SLURM's --gpus-per-task gives each task its own, as GPU 0).
func deviceForRank(device string, env dist.Env, visible string) string {
	if env.LocalWorldSize <= 1 {
		return device
	}
	if visible = strings.TrimSpace(visible); visible != "" && len(strings.Split(visible, ",")) <= env.LocalRank {
		return device
	}
	name, opts, _ := strings.Cut(strings.TrimSpace(device), ",")
	if n := strings.ToLower(name); n != "cuda" && n != "gpu" {
		return device
	}
	out := fmt.Sprintf("%s:%d", name, env.LocalRank)
	if opts != "" {
		out += "," + opts
	}
	return out
}

// resumeCommand is the command line that continues this run: args (the
// program first) without --resume, with --resume auto, and without
// --init-weights (a fine-tuning's weights begin a run; its resume
// continues from the checkpoint and refuses them), each word quoted for a
// POSIX shell so that pasting it into sh runs exactly these args.
func resumeCommand(args []string) string {
	if len(args) == 0 {
		return ""
	}
	var out []string
	skip := false
	for _, a := range args[1:] {
		if skip {
			skip = false
			continue
		}
		if a == "--resume" || a == "--init-weights" {
			skip = true
			continue
		}
		if strings.HasPrefix(a, "--resume=") || strings.HasPrefix(a, "--init-weights=") {
			continue
		}
		out = append(out, shellQuote(a))
	}
	exe := shellQuote(args[0])
	if exe == args[0] && strings.Contains(exe, "=") {
		exe = "'" + exe + "'" // as the first word, NAME=x would be an assignment
	}
	if strings.Contains(args[0], "go-build") {
		exe = "go run ./cmd/train" // started with go run: the binary is temporary
	}
	return exe + " " + strings.Join(append(out, "--resume", "auto"), " ")
}

// shellQuote returns s as one word for a POSIX shell: unchanged when every
// byte is one no shell treats specially, else in single quotes, inside
// which nothing is special but the quote itself, written by closing the
// quotes, escaping it and reopening them:
//
//	it's  →  'it'\''s'
//
// Double quotes would not do: $, ` and \ stay live inside them.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		if !isShellSafe(s[i]) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isShellSafe reports whether b means itself in an argument word for sh:
// no expansion, globbing, quoting, word splitting or comment (~ is left
// out, which expands at a word's start and, in bash, after an =).
func isShellSafe(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("-_./:,+=@%", b) >= 0
}
