package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/trainer"
)

// trainFlags are the root command's flags; set ones override the YAML.
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
}

func addTrainFlags(cmd *cobra.Command, f *trainFlags) {
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "run config (YAML)")
	fl.IntVar(&f.fold, "fold", 0, "cross-validation fold (-1: train on every case)")
	fl.IntVar(&f.runID, "run-id", 0, "run number within experiment and fold")
	fl.StringVar(&f.outputDir, "output-dir", "", "directory of runs (default: the config's output_dir, else ./runs)")
	fl.IntVar(&f.epochs, "epochs", 0, "number of epochs")
	fl.IntVar(&f.batchSize, "batch-size", 0, "batch size")
	fl.StringVar(&f.workers, "workers", "", "data worker goroutines, or auto")
	fl.StringVar(&f.device, "device", "", "cpu, cuda, cuda:N, cuda:N,tf32 or cuda:N,bf16")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed")
	fl.StringVar(&f.resume, "resume", "", "resume from a checkpoint path, or auto (the run's latest)")
	fl.IntVar(&f.threads, "threads", 0, "CPU threads (0: all cores)")
	fl.IntVar(&f.stopAfter, "stop-after-steps", 0, "stop (saving last, as on SIGTERM) after this many steps")
	fl.MarkHidden("stop-after-steps")
}

// loadRunConfig reads the config and applies the flags the user set.
func loadRunConfig(cmd *cobra.Command, f *trainFlags) (*trainer.Config, error) {
	if f.config == "" {
		return nil, errors.New("--config is required (try: train --config configs/demo.yaml)")
	}
	cfg, err := trainer.LoadConfig(f.config)
	if err != nil {
		return nil, err
	}
	ch := cmd.Flags().Changed
	if ch("fold") {
		cfg.Data.Fold = f.fold
	}
	if ch("run-id") {
		cfg.RunID = f.runID
	}
	if ch("output-dir") {
		cfg.OutputDir = f.outputDir
	}
	if ch("epochs") {
		cfg.Train.Epochs = f.epochs
	}
	if ch("batch-size") {
		cfg.Train.BatchSize = f.batchSize
	}
	if ch("workers") {
		w, err := data.ParseWorkers(f.workers)
		if err != nil {
			return nil, fmt.Errorf("--workers: %w", err)
		}
		cfg.Data.Workers = w
	}
	if ch("device") {
		cfg.Device = f.device
	}
	if ch("seed") {
		cfg.Seed = f.seed
		cfg.Data.Seed = f.seed
	}
	if ch("threads") {
		cfg.Threads = f.threads
	}
	if err := cfg.Resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.config, err)
	}
	return cfg, nil
}

// resumeCommand is the command line that continues this run.
func resumeCommand() string {
	var args []string
	skip := false
	for _, a := range os.Args[1:] {
		if skip {
			skip = false
			continue
		}
		if a == "--resume" {
			skip = true
			continue
		}
		if strings.HasPrefix(a, "--resume=") {
			continue
		}
		args = append(args, quoteArg(a))
	}
	exe := os.Args[0]
	if strings.Contains(exe, "go-build") {
		exe = "go run ./cmd/train" // started with go run
	}
	return exe + " " + strings.Join(append(args, "--resume", "auto"), " ")
}

func quoteArg(a string) string {
	if a == "" || strings.ContainsAny(a, " \t'\"$`\\") {
		return strconv.Quote(a)
	}
	return a
}

// signalContext is cancelled by the first SIGINT/SIGTERM (the run then
// finishes its step, saves last and exits 0); a second one exits at once.
func signalContext(errw *os.File) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for sig := range ch {
			n++
			if n == 1 {
				fmt.Fprintf(errw, "\n%v: finishing the current step and saving last (again to abandon at once)\n", sig)
				cancel()
				continue
			}
			fmt.Fprintf(errw, "\n%v again: abandoning the run; the last saved checkpoint is intact\n", sig)
			os.Exit(130)
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func runTraining(cmd *cobra.Command, f *trainFlags) (*trainer.Result, *trainer.Config, error) {
	cfg, err := loadRunConfig(cmd, f)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
	}
	dev, closeDev, err := openComputeDevice(cfg.Device, cfg.Threads)
	if err != nil {
		return nil, nil, err
	}
	defer closeDev()
	mon := startMonitor(cfg.Device, os.Stderr)
	defer mon.Close()
	ctx, stop := signalContext(os.Stderr)
	defer stop()
	res, err := trainer.Run(ctx, cfg, trainer.Options{Device: dev, Alloc: hostAllocator(dev), Resume: f.resume,
		Out: cmd.OutOrStdout(), Version: buildVersion(), ResumeCommand: resumeCommand(), StopAfterSteps: f.stopAfter,
		Monitor: mon})
	if err != nil {
		return nil, cfg, err
	}
	out := cmd.OutOrStdout()
	best := "none yet"
	if res.BestDice == res.BestDice {
		best = fmt.Sprintf("%.4f", res.BestDice)
	}
	fmt.Fprintf(out, "run %s: %d epochs, %d steps, best validation Dice %s\n", res.RunDir, res.Epochs, res.Steps, best)
	if len(res.Plots) > 0 {
		fmt.Fprintf(out, "plots: %s\n", filepath.Dir(res.Plots[0]))
	}
	return res, cfg, nil
}
