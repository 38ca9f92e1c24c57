package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/nn"
)

func newBenchStepCmd() *cobra.Command {
	var (
		cfgPath string
		batch   int
		patch   string
		device  string
		threads int
		steps   int
		warmup  int
		seed    uint64
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "bench-step [--config C]",
		Short: "Time U-Net training steps (forward, loss, backward, optimiser) on synthetic input",
		Long: `bench-step builds the U-Net of the model: section of --config (other
top-level keys are ignored; without --config, the reference network of
bench/torch_unet_step.py: features 16-32-64-128, 1,401,986 parameters) and
times training steps on a synthetic batch: a random normal image with one
cubic "lesion" per sample as class 1, loss CE + batch soft Dice of the
foreground, SGD lr 0.01 with Nesterov momentum 0.99 — the work
torch_unet_step.py does. It reports the median, min and max ms per step,
the forward+loss share, GFLOP/s counted analytically (convolutions only,
2 x multiply-adds, a step = 3 x forward), the peak of device tensor memory
and the process's peak resident set.`,
		Example: `  train bench-step --threads 2
  train bench-step --batch 1 --patch 96,96,96 --threads 2
  train bench-step --config configs/hippocampus.yaml --patch 40,56,40 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg nn.UNetConfig
			if cfgPath != "" {
				c, err := nn.LoadModelConfig(cfgPath)
				if err != nil {
					return err
				}
				cfg = c
			}
			p, err := parseBenchPatch(patch)
			if err != nil {
				return err
			}
			if threads < 0 {
				return fmt.Errorf("--threads: %d, want >= 0 (0 = all cores)", threads)
			}
			if threads > 0 {
				// Like torch.set_num_threads: the whole process uses this many cores.
				runtime.GOMAXPROCS(threads)
			}
			dev, closeDev, err := openComputeDevice(device, threads)
			if err != nil {
				return err
			}
			defer closeDev()
			o := nn.BenchOptions{Batch: batch, Patch: p, Steps: steps, Warmup: warmup, Seed: seed}
			errw := cmd.ErrOrStderr()
			if verbose {
				o.Progress = func(s int, w bool, d time.Duration, loss float64) {
					tag := ""
					if w {
						tag = " (warm-up)"
					}
					fmt.Fprintf(errw, "  step %d%s: %.0f ms, loss %.4f\n", s, tag, benchMs(d), loss)
				}
			}
			r, err := nn.BenchStep(dev, cfg, o)
			if err != nil {
				return err
			}
			return printBenchStep(cmd.OutOrStdout(), r, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "run YAML whose model: section describes the U-Net (default: the reference U-Net)")
	f.IntVar(&batch, "batch", 2, "samples per step")
	f.StringVar(&patch, "patch", "64,64,64", "patch size D,H,W (or one number for a cube)")
	f.StringVar(&device, "device", "cpu", "cpu, cuda, cuda:N, cuda:N,tf32 or cuda:N,bf16")
	f.IntVar(&threads, "threads", 0, "CPU threads (also GOMAXPROCS); 0 = all cores")
	f.IntVar(&steps, "steps", 12, "timed steps")
	f.IntVar(&warmup, "warmup", 3, "untimed warm-up steps")
	f.Uint64Var(&seed, "seed", 0, "seed of the weights and the synthetic batch")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "print every step to stderr")
	return cmd
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

// benchPeakRSS returns the process's peak resident set in bytes from
// /proc/self/status (0 where unavailable).
func benchPeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

func printBenchStep(w io.Writer, r nn.BenchResult, asJSON bool) error {
	rss := benchPeakRSS()
	if asJSON {
		out := map[string]any{
			"device": r.Device, "params": r.Params, "batch": r.Batch, "patch": r.Patch,
			"steps": len(r.StepTimes), "fwd_gflop": float64(r.FwdFLOP) / 1e9,
			"median_ms": benchMs(r.Median), "min_ms": benchMs(r.Min), "max_ms": benchMs(r.Max), "median_fwd_ms": benchMs(r.MedianFwd),
			"gflops": r.GFLOPS, "fwd_gflops": float64(r.FwdFLOP) / 1e9 / r.MedianFwd.Seconds(),
			"peak_device_mib": float64(r.PeakDevice) / (1 << 20), "peak_rss_mib": float64(rss) / (1 << 20),
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
	return nil
}
