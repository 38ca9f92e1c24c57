package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// sweepSlot is where a local job runs: one GPU (CUDA_VISIBLE_DEVICES set
// to gpu for the job) or, when gpu is "", as the sweep itself does.
type sweepSlot struct{ gpu string }

// slots are the jobs that run at once: one per visible GPU for a CUDA
// device (CUDA_VISIBLE_DEVICES, else the GPUs nvidia-smi lists), one on
// the CPU; --parallel N sets the number (GPUs shared round robin).
func (o *SweepOptions) slots() ([]sweepSlot, error) {
	spec, err := parseDeviceSpec(o.Config.Device)
	if err != nil {
		return nil, err
	}
	var gpus []string
	if spec.kind == "cuda" {
		gpus, err = visibleGPUs()
		if err != nil {
			return nil, err
		}
		if spec.ordinal != 0 && len(gpus) > 0 {
			return nil, fmt.Errorf("--device %s: each job of a sweep sees one GPU (CUDA_VISIBLE_DEVICES), as cuda:0; give --device cuda (and CUDA_VISIBLE_DEVICES to choose the GPUs)", o.Config.Device)
		}
	}
	n := o.Parallel
	if n == 0 {
		n = max(len(gpus), 1)
	}
	out := make([]sweepSlot, n)
	for i := range out {
		if len(gpus) > 0 {
			out[i].gpu = gpus[i%len(gpus)]
		}
	}
	return out, nil
}

// visibleGPUs lists the GPUs a sweep may use: CUDA_VISIBLE_DEVICES's
// entries when it is set, else GPU 0.. of `nvidia-smi -L`; none (the jobs
// then see what the sweep sees) when neither says.
func visibleGPUs() ([]string, error) {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		var gpus []string
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				gpus = append(gpus, g)
			}
		}
		if len(gpus) == 0 {
			return nil, errors.New("CUDA_VISIBLE_DEVICES is empty: no GPU to run the sweep's jobs on")
		}
		return gpus, nil
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, smi, "-L").Output()
	if err != nil {
		return nil, nil
	}
	var gpus []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "GPU ") {
			gpus = append(gpus, strconv.Itoa(len(gpus)))
		}
	}
	return gpus, nil
}

// sweepLocal runs the jobs not finished yet as child processes of this
// binary, as many at once as there are slots, then prints and writes the
// summary. A signal (ctx cancelled) is passed to the running jobs, which
// save last; no new job starts. A job that fails does not stop the
// others; the sweep fails at the end.
func sweepLocal(ctx context.Context, o *SweepOptions) error {
	exe, err := o.executable()
	if err != nil {
		return err
	}
	slots, err := o.slots()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir(), 0o755); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	var todo []sweepJob
	for _, j := range o.Jobs() {
		st, err := o.status(j)
		if err != nil {
			return err
		}
		if st.Status == statusFinished {
			fmt.Fprintf(o.IO.Out, "fold %s run %d: finished (%d/%d epochs), skipped\n", foldName(j.Fold), j.RunID, st.EpochsDone, st.Epochs)
			continue
		}
		todo = append(todo, j)
	}
	slots = slots[:min(len(slots), len(todo))]
	if len(todo) > 0 {
		where := fmt.Sprintf("%d at a time", len(slots))
		if slots[0].gpu != "" {
			gpus := make([]string, len(slots))
			for i, s := range slots {
				gpus[i] = s.gpu
			}
			where += " on GPUs " + strings.Join(gpus, ",")
		}
		fmt.Fprintf(o.IO.Out, "sweep: %d jobs to run, %s; logs in %s\n", len(todo), where, o.Dir())
	}

	var (
		mu          sync.Mutex
		failed      []string
		interrupted int
	)
	report := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(o.IO.Out, format+"\n", a...)
	}
	jobs := make(chan sweepJob)
	var wg sync.WaitGroup
	for _, slot := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				code, err := o.runJob(ctx, exe, slot, j, report)
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("fold %s run %d: %v", foldName(j.Fold), j.RunID, err))
				case code == exitOK:
				case code == exitFailed || code < exitSignal && code != exitStopped:
					failed = append(failed, fmt.Sprintf("fold %s run %d (exit %d, log %s)", foldName(j.Fold), j.RunID, code, o.logPath(j)))
				default:
					interrupted++
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, j := range todo {
		select {
		case jobs <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()

	if _, err := writeSweepSummary(o); err != nil {
		return err
	}
	switch {
	case ctx.Err() != nil:
		return &sweepInterrupted{jobs: interrupted}
	case len(failed) > 0:
		return fmt.Errorf("sweep: %d of %d jobs failed: %s", len(failed), len(todo), strings.Join(failed, "; "))
	}
	return nil
}

// sweepInterrupted is the error of a sweep a signal stopped. It is a
// context.Canceled, so that main exits with 128 + the signal.
type sweepInterrupted struct{ jobs int }

func (e *sweepInterrupted) Error() string {
	return fmt.Sprintf("sweep interrupted: %d running jobs saved last; run the same command again to continue", e.jobs)
}

func (e *sweepInterrupted) Unwrap() error { return context.Canceled }

// runJob runs one job on its slot with its output appended to its log,
// passes a signal on when ctx is cancelled, records its exit status in
// the sweep folder and returns it (128 + the signal for a job a signal
// killed). err is for a job that could not start.
func (o *SweepOptions) runJob(ctx context.Context, exe string, slot sweepSlot, j sweepJob, report func(string, ...any)) (int, error) {
	if ctx.Err() != nil {
		return 0, nil
	}
	logPath := o.logPath(j)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("job log: %w", err)
	}
	defer log.Close()
	args := o.args(j)
	words := []string{shellQuote(exe)}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	env := os.Environ()
	on := ""
	if slot.gpu != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+slot.gpu)
		on = " on GPU " + slot.gpu
		words = append([]string{"CUDA_VISIBLE_DEVICES=" + shellQuote(slot.gpu)}, words...)
	}
	fmt.Fprintf(log, "==> %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(words, " "))
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = log, log, env
	detachChild(cmd)
	// Linux's parent-death signal follows the thread that started the
	// child: keep this goroutine on it until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", exe, err)
	}
	report("fold %s run %d: started%s (log %s)", foldName(j.Fold), j.RunID, on, logPath)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-ctx.Done():
		var sig interruptSignal
		s := syscall.SIGTERM
		if errors.As(context.Cause(ctx), &sig) {
			s = sig.sig
		}
		cmd.Process.Signal(s)
		<-done
	}
	code := exitStatus(cmd.ProcessState)
	if err := os.WriteFile(o.exitPath(j), []byte(strconv.Itoa(code)+"\n"), 0o644); err != nil {
		report("fold %s run %d: recording its exit status: %v", foldName(j.Fold), j.RunID, err)
	}
	switch {
	case code == exitOK:
		report("fold %s run %d: finished", foldName(j.Fold), j.RunID)
	case code == exitStopped || code > exitSignal:
		report("fold %s run %d: stopped after saving last (exit %d)", foldName(j.Fold), j.RunID, code)
	default:
		report("fold %s run %d: FAILED (exit %d), see %s", foldName(j.Fold), j.RunID, code, logPath)
	}
	return code, nil
}
