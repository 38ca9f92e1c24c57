package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// requeueSignalLead is how many seconds before the time limit SLURM sends
// the batch shell SIGTERM (--signal=B:TERM@120): time for train to finish
// its step and save last, even a large model on a slow filesystem.
const requeueSignalLead = 120

// slurmTime matches sbatch's --time formats: minutes, minutes:seconds,
// hours:minutes:seconds, days-hours, days-hours:minutes and
// days-hours:minutes:seconds; or UNLIMITED.
var slurmTime = regexp.MustCompile(`^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+|UNLIMITED|unlimited|infinite)$`)

// lines are the #SBATCH options set, by name, in the script's order.
func (s *SBatchOptions) lines() [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{
		{"job-name", s.JobName}, {"account", s.Account}, {"partition", s.Partition}, {"qos", s.QOS}, {"time", s.Time},
		{"gpus-per-task", s.GPUsPerTask}, {"gres", s.Gres}, {"cpus-per-task", s.CPUsPerTask}, {"mem", s.Mem},
	} {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

// check refuses values sbatch would misread in an #SBATCH line (it splits
// the line at blanks) and a --time in no format of sbatch's.
func (s *SBatchOptions) check() error {
	for _, kv := range s.lines() {
		if strings.ContainsAny(kv[1], " \t\n\r\"'#\\") {
			return fmt.Errorf("--%s %q: blanks, quotes, # and \\ do not survive an #SBATCH line", kv[0], kv[1])
		}
	}
	if s.Time != "" && !slurmTime.MatchString(s.Time) {
		return fmt.Errorf("--time %s: want minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (sbatch's formats)", s.Time)
	}
	return nil
}

// slurmScript is the array job: #SBATCH lines, then a bash body that maps
// SLURM_ARRAY_TASK_ID to its (fold, run id), runs train in the background
// (so that the shell can pass SLURM's SIGTERM on), and requeues the task
// when train saved last and stopped (143, 130, 75).
func (o *SweepOptions) slurmScript(exe, cwd, logDir string) (string, error) {
	if strings.ContainsAny(logDir, " \t\n\r\"'#\\%") {
		return "", fmt.Errorf("SLURM log folder %s: blanks, quotes, #, \\ and %% do not survive the #SBATCH --output line; use an output_dir without them", logDir)
	}
	config, err := filepath.Abs(o.ConfigPath)
	if err != nil {
		return "", err
	}
	sweepDir, err := filepath.Abs(o.Dir())
	if err != nil {
		return "", err
	}
	hint := []string{shellQuote(exe), "sweep", "--config", shellQuote(config), "--folds", rangesText(o.Folds),
		"--run-ids", rangesText(o.RunIDs), "--summary"}
	if len(o.TrainArgs) > 0 {
		hint = append(hint, "--")
		for _, a := range o.TrainArgs {
			hint = append(hint, shellQuote(a))
		}
	}
	jobs := o.Jobs()
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("#!/bin/bash")
	w("# A SLURM array job written by `train sweep` (voxtrain %s): %d folds × %d run ids", o.Version, len(o.Folds), len(o.RunIDs))
	w("# of %s, one array task each, in %s.", comment(config), comment(sweepDir))
	w("# Each task runs train with --resume auto, so a requeued task continues its")
	w("# run. SLURM sends this shell SIGTERM %d s before the time limit", requeueSignalLead)
	w("# (--signal=B:TERM@%d); the shell passes it to train, which finishes its step,", requeueSignalLead)
	w("# saves last and exits 143; the task then requeues itself (exit 130 and 75,")
	w("# --stop-after-steps, too). A failure (exit 1) is not requeued.")
	w("# Logs: %s/<job name>_<array job id>_<task>.out", logDir)
	w("# Where the grid stands: %s", comment(strings.Join(hint, " ")))
	for _, kv := range o.SBatch.lines() {
		w("#SBATCH --%s=%s", kv[0], kv[1])
	}
	array := fmt.Sprintf("0-%d", len(jobs)-1)
	if o.SBatch.ArrayLimit > 0 {
		array += "%" + strconv.Itoa(o.SBatch.ArrayLimit)
	}
	w("#SBATCH --array=%s", array)
	w("#SBATCH --requeue")
	w("#SBATCH --signal=B:TERM@%d", requeueSignalLead)
	w("#SBATCH --open-mode=append")
	w("#SBATCH --output=%s/%%x_%%A_%%a.out", logDir)
	w("")
	w("set -u")
	w("folds=(%s)", intsText(o.Folds, " "))
	w("run_ids=(%s)", intsText(o.RunIDs, " "))
	w(`task=${SLURM_ARRAY_TASK_ID:?not a SLURM array task: submit this script with sbatch}`)
	w(`n_runs=${#run_ids[@]}`)
	w(`if ! [[ $task =~ ^[0-9]+$ ]] || (( task >= ${#folds[@]} * n_runs )); then`)
	w(`  echo "array task $task is outside this sweep's %s" >&2`, array)
	w(`  exit 1`)
	w(`fi`)
	w(`fold=${folds[task / n_runs]}`)
	w(`run_id=${run_ids[task %% n_runs]}`)
	w(`fold_name=$fold`)
	w(`if [[ $fold == -1 ]]; then fold_name=all; fi`)
	w(`# The binary: this one, or $VOXTRAIN_TRAIN (another path on the compute nodes).`)
	w(`train_default=%s`, shellQuote(exe))
	w(`train=${VOXTRAIN_TRAIN:-$train_default}`)
	w(`sweep_dir=%s`, shellQuote(sweepDir))
	w(`cd %s || exit 1`, shellQuote(cwd))
	w(`echo "array task $task: fold $fold, run id $run_id, on $(hostname), $(date)"`)
	args := []string{`"$train"`, "--config", shellQuote(config), "--fold", `"$fold"`, "--run-id", `"$run_id"`, "--resume", "auto"}
	for _, a := range o.TrainArgs {
		args = append(args, shellQuote(a))
	}
	w(`%s &`, strings.Join(args, " "))
	w(`child=$!`)
	w(`# SLURM signals this shell only (B:): pass SIGTERM on to train. wait returns`)
	w(`# early when a trapped signal arrives, so wait again until train has exited.`)
	w(`trap 'kill -TERM "$child" 2>/dev/null' TERM`)
	w(`wait "$child"`)
	w(`rc=$?`)
	w(`while kill -0 "$child" 2>/dev/null; do`)
	w(`  wait "$child"`)
	w(`  rc=$?`)
	w(`done`)
	w(`echo "$rc" >"$sweep_dir/fold_${fold_name}_run_${run_id}.exit" 2>/dev/null || true`)
	w(`case $rc in`)
	w(`0)`)
	w(`  echo "fold $fold, run id $run_id: finished"`)
	w(`  exit 0 ;;`)
	w(`75 | 130 | 143)`)
	w(`  # train saved last. A task being cancelled (scancel) is not requeued.`)
	w(`  if scontrol show job "$SLURM_JOB_ID" 2>/dev/null | grep -q 'JobState=CANCELLED'; then`)
	w(`    echo "fold $fold, run id $run_id: stopped (exit $rc), job cancelled: not requeued"`)
	w(`    exit "$rc"`)
	w(`  fi`)
	w(`  # SLURM_JOB_ID is this array task's own id; the same task is also`)
	w(`  # ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.`)
	w(`  echo "fold $fold, run id $run_id: stopped after saving last (exit $rc): requeueing $SLURM_JOB_ID"`)
	w(`  if scontrol requeue "$SLURM_JOB_ID"; then exit 0; fi`)
	w(`  echo "scontrol requeue $SLURM_JOB_ID failed: submit again to continue (--resume auto)" >&2`)
	w(`  exit "$rc" ;;`)
	w(`*)`)
	w(`  echo "fold $fold, run id $run_id: train failed (exit $rc): not requeued; see above" >&2`)
	w(`  exit "$rc" ;;`)
	w(`esac`)
	return b.String(), nil
}

// comment makes s safe in a comment line: a line break would end the
// comment and run the rest.
func comment(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}

// intsText joins ns with sep.
func intsText(ns []int, sep string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, sep)
}

// rangesText writes sorted numbers back as ranges: 0-4,7.
func rangesText(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for ns[i] >= 0 && j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		} else {
			parts = append(parts, strconv.Itoa(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// sweepSlurm writes the array job script (creating the sweep's folder and
// its slurm/ log folder, which sbatch does not create) and submits it
// with --submit.
func sweepSlurm(ctx context.Context, o *SweepOptions) error {
	exe, err := o.executable()
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	logDir, err := filepath.Abs(filepath.Join(o.Dir(), "slurm"))
	if err != nil {
		return err
	}
	script, err := o.slurmScript(exe, cwd, logDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := atomicfile.WriteFileUmask(o.Slurm, []byte(script), 0o777); err != nil {
		return fmt.Errorf("--slurm %s: %w", o.Slurm, err)
	}
	n := len(o.Folds) * len(o.RunIDs)
	fmt.Fprintf(o.IO.Out, "wrote %s: a SLURM array job of %d tasks (folds %s × run ids %s), logs in %s\n",
		o.Slurm, n, rangesText(o.Folds), rangesText(o.RunIDs), logDir)
	if !o.Submit {
		fmt.Fprintf(o.IO.Out, "submit it with: sbatch %s\n", shellQuote(o.Slurm))
		return nil
	}
	sbatch, err := exec.LookPath("sbatch")
	if err != nil {
		return fmt.Errorf("--submit: sbatch is not on PATH (%w); submit %s where SLURM is installed", errors.Unwrap(err), o.Slurm)
	}
	cmd := exec.CommandContext(ctx, sbatch, o.Slurm)
	cmd.Stdout, cmd.Stderr = o.IO.Out, o.IO.ErrOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sbatch %s: %w", o.Slurm, err)
	}
	return nil
}
