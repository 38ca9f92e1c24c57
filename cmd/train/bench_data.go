package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/data/databench"
)

func newBenchDataCmd() *cobra.Command {
	var (
		cfgPath    string
		workers    string
		consumerMs float64
		digest     bool
		source     string
		epochs     int
		iters      int
		repeats    int
		patch      []int
		batch      int
		inflate    bool
		verbose    bool
		cpuprof    string
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
chunked store; run train prepare first, or it is built).

The config needs data: (dataset, ...), augment: and train: with
patch_size [D, H, W] and batch_size; --patch and --batch override them.`,
		Example: `  train bench-data --config bench.yaml --workers 0,1,2,4
  train bench-data --config bench.yaml --source store --consumer-ms 150 --digest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := databench.LoadFile(cfgPath)
			if err != nil {
				return err
			}
			if len(patch) > 0 {
				f.Train.PatchSize = patch
			}
			if batch > 0 {
				f.Train.BatchSize = batch
			}
			o := databench.Options{ConsumerMs: consumerMs, Digest: digest, Source: source,
				Epochs: epochs, Iterations: iters, Repeats: repeats}
			if workers != "" {
				for _, w := range strings.Split(workers, ",") {
					n, err := data.ParseWorkers(w)
					if err != nil {
						return fmt.Errorf("--workers: %q: want a comma-separated list of counts or auto", w)
					}
					if n.Auto {
						n.N = -1
					}
					o.Workers = append(o.Workers, n.N)
				}
			}
			lvl := slog.LevelWarn
			if verbose {
				lvl = slog.LevelInfo
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			out := cmd.OutOrStdout()
			p, _ := f.Patch()
			fmt.Fprintf(out, "machine: %s, %d logical CPUs, GOMAXPROCS %d\n", databench.CPUModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
			fmt.Fprintf(out, "config: %s, patch %v, batch %d, epochs %d, repeats %d\n", cfgPath, p, f.Train.BatchSize, max(epochs, 1), max(repeats, 1))
			if inflate || source == "gz" {
				msCase, limit, err := databench.InflateBound(f)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "inflate-bound limit: %.2f samples/s (%d cores × 1000 / %.1f ms to inflate one case's image and label)\n",
					limit, runtime.NumCPU(), msCase)
			}
			if cpuprof != "" {
				pf, err := os.Create(cpuprof)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			rs, err := databench.Run(cmd.Context(), f, o)
			if err != nil {
				return err
			}
			ss := databench.Summarize(rs)
			fmt.Fprintln(out)
			databench.WriteTable(out, ss, consumerMs)
			if digest {
				fmt.Fprintln(out)
				databench.WriteDigests(out, ss)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfgPath, "config", "", "config file (YAML with data:, augment: and train: sections)")
	fl.StringVar(&workers, "workers", "", "worker counts to sweep, e.g. 0,1,2,4 or auto (default: the config's)")
	fl.Float64Var(&consumerMs, "consumer-ms", 0, "simulated training step per batch, in ms (sleep)")
	fl.BoolVar(&digest, "digest", false, "print the SHA-256 of every batch byte of each run")
	fl.StringVar(&source, "source", "", "voxel source: gz, cache or store (default: the config's data.source)")
	fl.IntVar(&epochs, "epochs", 2, "epochs per run")
	fl.IntVar(&iters, "iterations", 0, "batches per epoch (default: data.iterations_per_epoch, or one pass)")
	fl.IntVar(&repeats, "repeats", 1, "run the sweep this many times and report medians")
	fl.IntSliceVar(&patch, "patch", nil, "patch size D,H,W (overrides train.patch_size)")
	fl.IntVar(&batch, "batch", 0, "batch size (overrides train.batch_size)")
	fl.BoolVar(&inflate, "inflate-bound", false, "also measure the inflate-bound limit (always with --source gz)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "log the pipeline's info messages")
	fl.StringVar(&cpuprof, "cpuprofile", "", "write a CPU profile of the runs to this file")
	cmd.MarkFlagRequired("config")
	return cmd
}
