package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data/databench"
)

// BenchDataOptions are `train bench-data`'s.
type BenchDataOptions struct {
	IO *IOStreams
	// ConfigPath is --config; Config the loaded file, with --patch and
	// --batch written over train.patch_size and train.batch_size.
	ConfigPath string
	Config     *config.Config
	// Bench holds the sweep: worker counts, consumer step, digest,
	// source, epochs, iterations, repeats.
	Bench databench.Options
	// InflateBound also measures the inflate-bound limit (always with
	// --source gz).
	InflateBound bool
	// CPUProfile writes a CPU profile of the runs there ("": none).
	CPUProfile string
}

// NewCmdBenchData builds `train bench-data`; runF (nil: benchDataRun)
// receives the options.
func NewCmdBenchData(f *Factory, runF func(context.Context, *BenchDataOptions) error) *cobra.Command {
	opts := &BenchDataOptions{IO: f.IO}
	var (
		workers string
		patch   []int
		batch   int
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "bench-data --config C",
		Short: "Benchmark the data pipeline alone (no model): samples/s, first batch, epoch gap, stages",
		Long: `bench-data runs the training data pipeline of a config with no model and
reports, per worker count: samples/s, time to first batch (from opening the
dataset), the epoch-boundary gap next to the median interval between
batches (their difference is the per-epoch restart cost), the fraction of
wall time the consumer waited for data, the mean time per sample in each
stage (summed over workers) and the peak resident set.

--consumer-ms T simulates a training step of T ms per batch (a sleep, as a
GPU's step costs the host no CPU). --digest prints the SHA-256 of every
batch byte of each run, so determinism can be checked from outside: the
digests of any worker counts and of every source must agree. --source
picks where voxels come from: gz (decode the NIfTI files for every
sample), cache (decode once, keep in memory) or store (the prepared
chunked store; brought up to date first, as training does).

The config's data:, augment: and train: sections (patch_size, batch_size,
iterations_per_epoch) and seed describe the pipeline; --patch and --batch
override the train section.`,
		Example: `  train bench-data --config configs/demo.yaml --workers 0,1,2,4
  train bench-data --config configs/demo.yaml --source store --consumer-ms 150 --digest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := &opts.Bench
			if workers != "" {
				for _, w := range strings.Split(workers, ",") {
					n, err := config.ParseWorkers(w)
					if err != nil {
						return fmt.Errorf("--workers: %q: want a comma-separated list of counts or auto", w)
					}
					if n.Auto {
						n.N = -1
					}
					b.Workers = append(b.Workers, n.N)
				}
			}
			switch b.Source {
			case "", "gz", "cache", "store":
			default:
				return fmt.Errorf("--source: %q, want gz, cache or store", b.Source)
			}
			if b.Epochs < 1 || b.Repeats < 1 || b.Iterations < 0 || b.ConsumerMs < 0 {
				return fmt.Errorf("--epochs %d, --repeats %d, --iterations %d, --consumer-ms %g: want epochs and repeats ≥ 1, the others ≥ 0",
					b.Epochs, b.Repeats, b.Iterations, b.ConsumerMs)
			}
			cfg, err := config.Load(opts.ConfigPath)
			if err != nil {
				return err
			}
			if len(patch) > 0 {
				if len(patch) != 3 {
					return fmt.Errorf("--patch: %v, want D,H,W", patch)
				}
				cfg.Train.PatchSize = [3]int{patch[0], patch[1], patch[2]}
			}
			if cmd.Flags().Changed("batch") {
				cfg.Train.BatchSize = batch
			}
			if err := cfg.Validate(); err != nil {
				keys := map[string]string{"batch": "train.batch_size", "patch": "train.patch_size"}
				return fmt.Errorf("%s with the flags given: %w", opts.ConfigPath, nameFlags(err, cmd.Flags(), keys))
			}
			opts.Config = cfg
			lvl := slog.LevelWarn
			if verbose {
				lvl = slog.LevelInfo
			}
			b.Logger = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: lvl}))
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return benchDataRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.ConfigPath, "config", "c", "", "config file (YAML with data:, augment: and train: sections)")
	fl.StringVar(&workers, "workers", "", "worker counts to sweep, e.g. 0,1,2,4 or auto (default: the config's)")
	fl.Float64Var(&opts.Bench.ConsumerMs, "consumer-ms", 0, "simulated training step per batch, in ms (sleep)")
	fl.BoolVar(&opts.Bench.Digest, "digest", false, "print the SHA-256 of every batch byte of each run")
	fl.StringVar(&opts.Bench.Source, "source", "", "voxel source: gz, cache or store (default: the config's data.source)")
	fl.IntVar(&opts.Bench.Epochs, "epochs", 2, "epochs per run")
	fl.IntVar(&opts.Bench.Iterations, "iterations", 0, "batches per epoch (default: train.iterations_per_epoch; 0 there is one pass)")
	fl.IntVar(&opts.Bench.Repeats, "repeats", 1, "run the sweep this many times and report medians")
	fl.IntSliceVar(&patch, "patch", nil, "patch size D,H,W (overrides train.patch_size)")
	fl.IntVar(&batch, "batch", 0, "batch size (overrides train.batch_size)")
	fl.BoolVar(&opts.InflateBound, "inflate-bound", false, "also measure the inflate-bound limit (always with --source gz)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "log the pipeline's info messages")
	fl.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	cmd.MarkFlagRequired("config")
	return cmd
}

// benchDataRun runs the sweep and prints the table (and digests).
func benchDataRun(ctx context.Context, opts *BenchDataOptions) error {
	cfg, b, out := opts.Config, opts.Bench, opts.IO.Out
	fmt.Fprintf(out, "machine: %s, %d logical CPUs, GOMAXPROCS %d\n", databench.CPUModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "config: %s, patch %v, batch %d, epochs %d, repeats %d\n", opts.ConfigPath, cfg.Train.PatchSize, cfg.Train.BatchSize, b.Epochs, b.Repeats)
	if opts.InflateBound || b.Source == "gz" {
		msCase, limit, err := databench.InflateBound(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "inflate-bound limit: %.2f samples/s (%d cores × 1000 / %.1f ms to inflate one case's image and label)\n",
			limit, runtime.NumCPU(), msCase)
	}
	if opts.CPUProfile != "" {
		pf, err := os.Create(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rs, err := databench.Run(ctx, cfg, b)
	if err != nil {
		return err
	}
	ss := databench.Summarize(rs)
	fmt.Fprintln(out)
	databench.WriteTable(out, ss, b.ConsumerMs)
	if b.Digest {
		fmt.Fprintln(out)
		databench.WriteDigests(out, ss)
	}
	return nil
}
