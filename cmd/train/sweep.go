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
	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
)

// SweepOptions are `train sweep`'s: a grid of folds × run ids of one
// config, run here or written as a SLURM array job.
type SweepOptions struct {
	IO      *IOStreams
	Version string

	// ConfigPath is --config; Config is that file with the training flags
	// after -- merged in (the config each job resolves to, but for its
	// fold and run id), validated.
	ConfigPath string
	Config     *config.Config
	// Folds and RunIDs span the grid, in the order given by the ranges
	// (sorted); job k is (Folds[k / len(RunIDs)], RunIDs[k % len(RunIDs)]).
	Folds, RunIDs []int
	// TrainArgs are the training flags after --, passed to every job.
	TrainArgs []string

	// Slurm is the script to write ("" runs the grid here); Submit runs
	// sbatch on it.
	Slurm  string
	Submit bool
	SBatch SBatchOptions
	// Parallel is how many jobs run at once here (0: one per visible GPU
	// for a CUDA device, 1 on the CPU).
	Parallel int
	// SummaryOnly prints and writes the summary and runs nothing.
	SummaryOnly bool
	// Executable is the train binary the jobs run ("": this one).
	Executable string
}

// SBatchOptions are the #SBATCH settings taken from flags; empty ones are
// left out of the script (the cluster's defaults apply).
type SBatchOptions struct {
	ArrayLimit  int // the %N of --array: at most N tasks at once (0: no limit)
	Partition   string
	Time        string
	GPUsPerTask string
	Gres        string
	CPUsPerTask string
	Mem         string
	JobName     string
	Account     string
	QOS         string
}

// Experiment is the folder the sweep's runs share: <output>/<experiment>.
func (o *SweepOptions) Experiment() string {
	return filepath.Join(o.Config.OutputDir, o.Config.Experiment)
}

// Dir is the sweep's own folder in the experiment: job logs, exit
// statuses, the SLURM logs and a default script.
func (o *SweepOptions) Dir() string { return filepath.Join(o.Experiment(), "sweep") }

// sweepJob is one cell of the grid.
type sweepJob struct{ Fold, RunID int }

// Jobs lists the grid, fold-major: array task k is Jobs()[k].
func (o *SweepOptions) Jobs() []sweepJob {
	var jobs []sweepJob
	for _, f := range o.Folds {
		for _, r := range o.RunIDs {
			jobs = append(jobs, sweepJob{f, r})
		}
	}
	return jobs
}

// name is the job's file stem in the sweep folder: fold_0_run_3
// (fold_all for fold -1, as its run directory).
func (j sweepJob) name() string {
	if j.Fold == -1 {
		return fmt.Sprintf("fold_all_run_%d", j.RunID)
	}
	return fmt.Sprintf("fold_%d_run_%d", j.Fold, j.RunID)
}

// args are the job's training command line after the program.
func (o *SweepOptions) args(j sweepJob) []string {
	return append([]string{"--config", o.ConfigPath, "--fold", strconv.Itoa(j.Fold), "--run-id", strconv.Itoa(j.RunID),
		"--resume", "auto"}, o.TrainArgs...)
}

// NewCmdSweep builds `train sweep`; runF (nil: sweepRun) receives the
// options.
func NewCmdSweep(f *Factory, runF func(context.Context, *SweepOptions) error) *cobra.Command {
	opts := &SweepOptions{IO: f.IO, Version: f.Version}
	var folds, runIDs string
	var writeSlurm bool
	cmd := &cobra.Command{
		Use:   "sweep --config C [--folds 0-4] [--run-ids 0-2] [--slurm job.sh [--submit] | --parallel N | --summary] [-- TRAIN FLAGS]",
		Short: "Train a grid of folds × run ids, here (one job per GPU) or as a SLURM array job",
		Long: `sweep trains every (fold, run id) of a grid with one config, each job the
command ` + "`train --config C --fold F --run-id R --resume auto`" + ` plus the training
flags after --. Every job resumes (--resume auto), so running the sweep again,
or requeueing a task, continues it; jobs already finished are skipped.

Here (no --slurm): the jobs run as child processes, one per GPU of
CUDA_VISIBLE_DEVICES (or every GPU nvidia-smi lists) for a CUDA --device, each
seeing only its GPU, or one at a time on the CPU; --parallel N sets the
number. Each job's output goes to <output>/<experiment>/sweep/fold_F_run_R.log.
Ctrl-C (or SIGTERM) stops the sweep: every job finishes its step and saves
last; a second Ctrl-C kills them (the saved checkpoints are intact). A failed
job does not stop the others; the sweep exits 1 at the end if any failed.

--slurm FILE (or --write-slurm: <output>/<experiment>/sweep/sweep.sbatch)
writes a SLURM array job, one task per (fold, run id), that requeues itself:
SLURM sends SIGTERM 120 s before the time limit, train saves last and exits
143, and the task requeues and resumes. --submit also runs sbatch on it.

A summary table follows (alone with --summary): each job's status (finished,
interrupted, failed, not started), epochs done, best validation Dice, and
each fold's mean over its run ids; also written as sweep_summary.json and
sweep_summary.tsv in <output>/<experiment>.`,
		Example: `  # Five folds × three runs on this machine's GPUs, 300 epochs each
  train sweep --config configs/nnunet_3d_fullres.yaml --folds 0-4 --run-ids 0-2 -- --epochs 300 --device cuda

  # The same grid as a SLURM array job (15 tasks, at most 4 at once), submitted
  train sweep --config configs/nnunet_3d_fullres.yaml --folds 0-4 --run-ids 0-2 \
      --slurm sweep.sh --partition gpu --time 1-00:00:00 --gpus-per-task 1 --cpus-per-task 8 \
      --array-limit 4 --submit -- --device cuda

  # Where it stands
  train sweep --config configs/nnunet_3d_fullres.yaml --folds 0-4 --run-ids 0-2 --summary`,
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 && len(args) > 0 || dash > 0 {
				return usageErr(cmd, fmt.Errorf("unexpected argument %q: training flags go after -- (train sweep --config C -- --epochs 300)", args[0]))
			}
			if dash == 0 {
				opts.TrainArgs = args
			}
			if opts.ConfigPath == "" {
				return usageErr(cmd, errors.New("--config is required"))
			}
			fl := cmd.Flags()
			if writeSlurm && opts.Slurm != "" {
				return usageErr(cmd, errors.New("--write-slurm and --slurm both name the script: give one"))
			}
			if opts.SummaryOnly {
				for _, name := range []string{"slurm", "write-slurm", "submit", "parallel"} {
					if fl.Changed(name) {
						return usageErr(cmd, fmt.Errorf("--summary runs nothing: drop --%s", name))
					}
				}
			}
			if opts.Submit && opts.Slurm == "" && !writeSlurm {
				return usageErr(cmd, errors.New("--submit submits the script --slurm FILE (or --write-slurm) writes: give one"))
			}
			if fl.Changed("parallel") && (opts.Slurm != "" || writeSlurm) {
				return usageErr(cmd, errors.New("--parallel is for a sweep run here; a SLURM array's concurrency is --array-limit"))
			}
			if fl.Changed("parallel") && opts.Parallel < 1 {
				return fmt.Errorf("--parallel %d: want ≥ 1", opts.Parallel)
			}
			if opts.SBatch.ArrayLimit < 0 {
				return fmt.Errorf("--array-limit %d: want ≥ 1 (0: no limit)", opts.SBatch.ArrayLimit)
			}
			if err := opts.resolve(f, fl, folds, runIDs); err != nil {
				return err
			}
			if writeSlurm {
				opts.Slurm = filepath.Join(opts.Dir(), "sweep.sbatch")
			}
			if opts.Slurm != "" {
				if err := opts.SBatch.check(); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return sweepRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.ConfigPath, "config", "c", "", "run config (YAML)")
	fl.StringVar(&folds, "folds", "", "folds: 0-4, 0,2,4, 0-2,7, -1 (every case); default every fold of data.num_folds")
	fl.StringVar(&runIDs, "run-ids", "0", "run ids, as --folds: 0-11")
	fl.StringVar(&opts.Slurm, "slurm", "", "write this SLURM array job script instead of running here")
	fl.BoolVar(&writeSlurm, "write-slurm", false, "write the SLURM script as <output>/<experiment>/sweep/sweep.sbatch")
	fl.BoolVar(&opts.Submit, "submit", false, "submit the SLURM script with sbatch")
	fl.IntVar(&opts.Parallel, "parallel", 0, "jobs at once here (default: one per visible GPU; 1 on the CPU)")
	fl.BoolVar(&opts.SummaryOnly, "summary", false, "print and write the summary of the grid only")
	s := &opts.SBatch
	fl.IntVar(&s.ArrayLimit, "array-limit", 0, "SLURM: at most N array tasks at once (--array=0-59%N)")
	fl.StringVar(&s.Partition, "partition", "", "SLURM --partition")
	fl.StringVar(&s.Time, "time", "", "SLURM --time, each task's limit (e.g. 1-00:00:00, 12:00:00, 90)")
	fl.StringVar(&s.GPUsPerTask, "gpus-per-task", "", "SLURM --gpus-per-task (e.g. 1, a100:1)")
	fl.StringVar(&s.Gres, "gres", "", "SLURM --gres (e.g. gpu:1)")
	fl.StringVar(&s.CPUsPerTask, "cpus-per-task", "", "SLURM --cpus-per-task")
	fl.StringVar(&s.Mem, "mem", "", "SLURM --mem (e.g. 64G)")
	fl.StringVar(&s.JobName, "job-name", "", "SLURM --job-name")
	fl.StringVar(&s.Account, "account", "", "SLURM --account")
	fl.StringVar(&s.QOS, "qos", "", "SLURM --qos")
	return cmd
}

// sweepReserved are the training flags a sweep sets itself, with why, and
// which therefore may not follow --.
var sweepReserved = map[string]string{
	"config":       "give --config to sweep itself, before --",
	"fold":         "the sweep sets each job's fold: use --folds",
	"run-id":       "the sweep sets each job's run id: use --run-ids",
	"resume":       "every job runs with --resume auto, so that a rerun or a requeued task continues",
	"init-weights": "a requeued job resumes, which --init-weights refuses once the run has checkpoints: set train.init_weights in the config",
}

// resolve loads the config with the training flags after -- merged in
// (refusing those the sweep sets), and parses and checks the ranges.
func (o *SweepOptions) resolve(f *Factory, sweepFlags *pflag.FlagSet, folds, runIDs string) error {
	var tf trainFlags
	fl := pflag.NewFlagSet("train flags after --", pflag.ContinueOnError)
	fl.SetOutput(errDiscard{})
	tf.register(fl)
	if err := fl.Parse(o.TrainArgs); err != nil {
		return fmt.Errorf("training flags after --: %w", err)
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("training flags after --: unexpected argument %q", fl.Arg(0))
	}
	var refused error
	fl.Visit(func(fl *pflag.Flag) {
		if why, ok := sweepReserved[fl.Name]; ok && refused == nil {
			refused = fmt.Errorf("--%s after --: %s", fl.Name, why)
		}
	})
	if refused != nil {
		return refused
	}
	tf.config = o.ConfigPath
	topts, err := tf.options(f, fl)
	if err != nil {
		return err
	}
	o.Config = topts.Config
	cfg := o.Config
	if _, err := checkpoint.RunDirAt(cfg.OutputDir, cfg.Experiment, 0, 0); err != nil {
		return fmt.Errorf("%s: %w", o.ConfigPath, err)
	}
	if !sweepFlags.Changed("folds") {
		folds = fmt.Sprintf("0-%d", cfg.Data.NumFolds-1)
	}
	if o.Folds, err = parseRanges("--folds", folds, true); err != nil {
		return err
	}
	for _, k := range o.Folds {
		if k >= cfg.Data.NumFolds {
			return fmt.Errorf("--folds %s: fold %d, want -1 (every case) or 0..%d (data.num_folds is %d in %s)",
				folds, k, cfg.Data.NumFolds-1, cfg.Data.NumFolds, o.ConfigPath)
		}
	}
	if o.RunIDs, err = parseRanges("--run-ids", runIDs, false); err != nil {
		return err
	}
	return nil
}

// errDiscard swallows pflag's own printing; its errors come back as
// values.
type errDiscard struct{}

func (errDiscard) Write(p []byte) (int, error) { return len(p), nil }

// parseRanges parses a list of numbers and ranges, "0-4", "0,2,4",
// "0-2,7", into sorted numbers, each at most once; allowAll admits -1
// (a fold of every case). Errors name the flag.
func parseRanges(flag, s string, allowAll bool) ([]int, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s %s: %s", flag, s, fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(s) == "" {
		return nil, bad("empty; want numbers and ranges such as 0-4, 0,2,4 or 0-2,7")
	}
	seen := map[int]bool{}
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		lo, hi := item, item
		if allowAll && item == "-1" {
			lo, hi = "-1", "-1"
		} else if a, b, ok := strings.Cut(item, "-"); ok {
			lo, hi = a, b
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		switch {
		case err1 != nil || err2 != nil || (a < 0 || b < 0) && !(allowAll && a == -1 && b == -1):
			return nil, bad("%q is not a number ≥ 0 or a range A-B", item)
		case b < a:
			return nil, bad("range %q ends before it starts", item)
		case b-a >= 100000:
			return nil, bad("range %q is too large", item)
		}
		for v := a; v <= b; v++ {
			if seen[v] {
				return nil, bad("%d given twice", v)
			}
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// sweepRun writes the SLURM script, or prints the summary, or runs the
// grid here.
func sweepRun(ctx context.Context, opts *SweepOptions) error {
	switch {
	case opts.SummaryOnly:
		_, err := writeSweepSummary(opts)
		return err
	case opts.Slurm != "":
		return sweepSlurm(ctx, opts)
	}
	return sweepLocal(ctx, opts)
}

// executable is the train binary the jobs run.
func (o *SweepOptions) executable() (string, error) {
	if o.Executable != "" {
		return filepath.Abs(o.Executable)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sweep: the path of this train binary: %w", err)
	}
	return exe, nil
}
