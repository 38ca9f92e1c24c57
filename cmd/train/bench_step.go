package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/procstat"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/nn"
)

// BenchStepOptions are `train bench-step`'s.
type BenchStepOptions struct {
	IO         *IOStreams
	OpenDevice func(spec string, threads int) (*ComputeDevice, error)

	// Model is the U-Net: the model: section of --config, or the
	// reference network.
	Model config.Model
	// Bench holds the batch, patch, steps, warm-up and seed.
	Bench   nn.BenchOptions
	Device  string
	Threads int
	JSON    bool
	Verbose bool
}

// NewCmdBenchStep builds `train bench-step`; runF (nil: benchStepRun)
// receives the options.
func NewCmdBenchStep(f *Factory, runF func(context.Context, *BenchStepOptions) error) *cobra.Command {
	opts := &BenchStepOptions{IO: f.IO, OpenDevice: f.OpenDevice}
	var cfgPath, patch string
	cmd := &cobra.Command{
		Use:   "bench-step [--config C]",
		Short: "Time U-Net training steps (forward, loss, backward, optimiser) on synthetic input",
		Long: `bench-step builds the U-Net of the model: section of --config (without
--config, the reference network of bench/torch_unet_step.py: features
16-32-64-128, 1,401,986 parameters) and times training steps on a synthetic
batch: a random normal image with one cubic "lesion" per sample as class 1,
loss CE + batch soft Dice of the foreground, SGD lr 0.01 with Nesterov
momentum 0.99 — the work torch_unet_step.py does. It reports the median,
min and max ms per step, the forward+loss share, GFLOP/s counted
analytically (convolutions only, 2 x multiply-adds, a step = 3 x forward),
the peak of device tensor memory and the process's peak resident set.`,
		Example: `  train bench-step --threads 2
  train bench-step --batch 1 --patch 96,96,96 --threads 2
  train bench-step --config configs/nnunet_3d_fullres.yaml --patch 40,56,40 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Model = config.Default().Model
			if cfgPath != "" {
				c, err := config.Load(cfgPath)
				if err != nil {
					return err
				}
				opts.Model = c.Model
			}
			p, err := parseBenchPatch(patch)
			if err != nil {
				return err
			}
			opts.Bench.Patch = p
			if _, err := parseDeviceSpec(opts.Device); err != nil {
				return err
			}
			b := opts.Bench
			switch {
			case opts.Threads < 0:
				return fmt.Errorf("--threads: %d, want >= 0 (0 = all cores)", opts.Threads)
			case b.Batch < 1 || b.Steps < 1 || b.Warmup < 0:
				return fmt.Errorf("--batch %d, --steps %d, --warmup %d: want batch and steps >= 1, warmup >= 0", b.Batch, b.Steps, b.Warmup)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return benchStepRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&cfgPath, "config", "c", "", "run config whose model: section describes the U-Net (default: the reference U-Net)")
	fl.IntVar(&opts.Bench.Batch, "batch", 2, "samples per step")
	fl.StringVar(&patch, "patch", "64,64,64", "patch size D,H,W (or one number for a cube)")
	fl.StringVar(&opts.Device, "device", "cpu", deviceHelp)
	fl.IntVar(&opts.Threads, "threads", 0, "CPU threads (also GOMAXPROCS); 0 = all cores")
	fl.IntVar(&opts.Bench.Steps, "steps", 12, "timed steps")
	fl.IntVar(&opts.Bench.Warmup, "warmup", 3, "untimed warm-up steps")
	fl.Uint64Var(&opts.Bench.Seed, "seed", 0, "seed of the weights and the synthetic batch")
	fl.BoolVar(&opts.JSON, "json", false, "print the result as JSON")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "print every step to stderr")
	return cmd
}

// benchStepRun times the steps and prints the result.
func benchStepRun(opts *BenchStepOptions) error {
	if opts.Threads > 0 {
		// Like torch.set_num_threads: the whole process uses this many cores.
		runtime.GOMAXPROCS(opts.Threads)
	}
	dev, err := opts.OpenDevice(opts.Device, opts.Threads)
	if err != nil {
		return err
	}
	defer dev.Close()
	o := opts.Bench
	if opts.Verbose {
		errw := opts.IO.ErrOut
		o.Progress = func(s int, w bool, d time.Duration, loss float64) {
			tag := ""
			if w {
				tag = " (warm-up)"
			}
			fmt.Fprintf(errw, "  step %d%s: %.0f ms, loss %.4f\n", s, tag, benchMs(d), loss)
		}
	}
	r, err := nn.BenchStep(dev.Dev, opts.Model, o)
	if err != nil {
		return err
	}
	return printBenchStep(opts.IO.Out, r, opts.JSON)
}

// parseBenchPatch parses "D,H,W" or "S".
func parseBenchPatch(s string) ([3]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) == 1 {
		parts = []string{parts[0], parts[0], parts[0]}
	}
	var p [3]int
	if len(parts) != 3 {
		return p, fmt.Errorf("--patch: %q, want D,H,W", s)
	}
	for i, v := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return p, fmt.Errorf("--patch: %q, want three positive integers D,H,W", s)
		}
		p[i] = n
	}
	return p, nil
}

func benchMs(d time.Duration) float64 { return float64(d) / 1e6 }

func printBenchStep(w io.Writer, r nn.BenchResult, asJSON bool) error {
	rss := procstat.PeakRSS()
	if asJSON {
		out := map[string]any{
			"device": r.Device, "params": r.Params, "batch": r.Batch, "patch": r.Patch,
			"steps": len(r.StepTimes), "fwd_gflop": float64(r.FwdFLOP) / 1e9,
			"median_ms": benchMs(r.Median), "min_ms": benchMs(r.Min), "max_ms": benchMs(r.Max), "median_fwd_ms": benchMs(r.MedianFwd),
			"gflops": r.GFLOPS, "fwd_gflops": float64(r.FwdFLOP) / 1e9 / r.MedianFwd.Seconds(),
			"peak_device_mib": float64(r.PeakDevice) / (1 << 20), "peak_allocated_mib": float64(r.PeakAllocated) / (1 << 20), "peak_rss_mib": float64(rss) / (1 << 20),
			"loss_first": r.LossFirst, "loss_last": r.LossLast,
		}
		var times []float64
		for _, t := range r.StepTimes {
			times = append(times, benchMs(t))
		}
		out["step_ms"] = times
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	p := r.Patch
	fmt.Fprintf(w, "U-Net training step on %s: %d parameters, batch %d x %dx%dx%d\n", r.Device, r.Params, r.Batch, p[0], p[1], p[2])
	fmt.Fprintf(w, "  median %.0f ms/step (min %.0f, max %.0f over %d steps), forward+loss %.0f ms\n",
		benchMs(r.Median), benchMs(r.Min), benchMs(r.Max), len(r.StepTimes), benchMs(r.MedianFwd))
	fmt.Fprintf(w, "  %.1f GFLOP forward, %.1f GFLOP/step (3 x forward): %.1f GFLOP/s (forward alone %.1f GFLOP/s)\n",
		float64(r.FwdFLOP)/1e9, 3*float64(r.FwdFLOP)/1e9, r.GFLOPS, float64(r.FwdFLOP)/1e9/r.MedianFwd.Seconds())
	fmt.Fprintf(w, "  %.2f samples/s; peak device memory %.0f MiB, peak RSS %.0f MiB; loss %.4f -> %.4f\n",
		float64(r.Batch)/r.Median.Seconds(), float64(r.PeakDevice)/(1<<20), float64(rss)/(1<<20), r.LossFirst, r.LossLast)
	if r.PeakAllocated > 0 {
		fmt.Fprintf(w, "  peak device memory with buffers and workspaces %.0f MiB\n", float64(r.PeakAllocated)/(1<<20))
	}
	return nil
}
