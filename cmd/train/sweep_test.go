package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/evaluation"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// sbatchOptions are sbatch's long options (its man page, Slurm 24.05):
// an #SBATCH line must use one of them. The value is whether the option
// takes an argument.
var sbatchOptions = map[string]bool{
	"account": true, "acctg-freq": true, "array": true, "batch": true, "bb": true, "bbf": true, "begin": true,
	"chdir": true, "cluster-constraint": true, "clusters": true, "comment": true, "constraint": true, "container": true,
	"container-id": true, "contiguous": false, "core-spec": true, "cores-per-socket": true, "cpu-freq": true,
	"cpus-per-gpu": true, "cpus-per-task": true, "deadline": true, "delay-boot": true, "dependency": true,
	"distribution": true, "error": true, "exclude": true, "exclusive": false, "export": true, "export-file": true,
	"extra": true, "extra-node-info": true, "get-user-env": false, "gid": true, "gpu-bind": true, "gpu-freq": true,
	"gpus": true, "gpus-per-node": true, "gpus-per-socket": true, "gpus-per-task": true, "gres": true,
	"gres-flags": true, "hint": true, "hold": false, "ignore-pbs": false, "input": true, "job-name": true,
	"kill-on-invalid-dep": true, "licenses": true, "mail-type": true, "mail-user": true, "mcs-label": true,
	"mem": true, "mem-bind": true, "mem-per-cpu": true, "mem-per-gpu": true, "mincpus": true, "network": true,
	"nice": false, "no-kill": false, "no-requeue": false, "nodefile": true, "nodelist": true, "nodes": true,
	"ntasks": true, "ntasks-per-core": true, "ntasks-per-gpu": true, "ntasks-per-node": true,
	"ntasks-per-socket": true, "oom-kill-step": false, "open-mode": true, "output": true, "overcommit": false,
	"oversubscribe": false, "parsable": false, "partition": true, "power": true, "prefer": true, "priority": true,
	"profile": true, "propagate": false, "qos": true, "quiet": false, "reboot": false, "requeue": false,
	"reservation": true, "resv-ports": false, "segment": true, "signal": true, "sockets-per-node": true,
	"spread-job": false, "switches": true, "test-only": false, "thread-spec": true, "threads-per-core": true,
	"time": true, "time-min": true, "tmp": true, "tres-bind": true, "tres-per-task": true, "uid": true,
	"use-min-nodes": false, "verbose": false, "wait": false, "wait-all-nodes": true, "wckey": true,
}

// sbatchLine is an #SBATCH line as sbatch reads it: --key=value or
// --key value, one word each (sbatch splits at blanks).
var sbatchLine = regexp.MustCompile(`^#SBATCH --([a-z][a-z-]*)(?:[= ](\S+))?$`)

// sweepConfig writes a config over the demo data into dir, with body in
// its data section.
func sweepConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "sweep.yaml")
	if err := os.WriteFile(p, []byte("experiment: swp\ndata:\n  dataset: "+testutil.DemoDir(t)+"\n"+body+
		"train:\n  patch_size: [16, 16, 16]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRanges(t *testing.T) {
	for _, c := range []struct {
		in   string
		all  bool
		want []int
		err  string
	}{
		{"0-4", false, []int{0, 1, 2, 3, 4}, ""},
		{"0,2,4", false, []int{0, 2, 4}, ""},
		{"7,0-2", false, []int{0, 1, 2, 7}, ""},
		{" 3 ", false, []int{3}, ""},
		{"-1", true, []int{-1}, ""},
		{"-1,0-1", true, []int{-1, 0, 1}, ""},
		{"-1", false, nil, `"-1" is not a number`},
		{"", false, nil, "empty"},
		{"4-2", false, nil, "ends before it starts"},
		{"0-2,2", false, nil, "2 given twice"},
		{"a", false, nil, `"a" is not a number`},
		{"1-", false, nil, `"1-" is not a number`},
		{"-2", true, nil, `"-2" is not a number`},
	} {
		got, err := parseRanges("--folds", c.in, c.all)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "--folds ") {
				t.Errorf("parseRanges(%q): %v, %v; want an error naming --folds and %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseRanges(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if err == nil && rangesText(got) != "" {
			back, _ := parseRanges("--folds", rangesText(got), c.all)
			if !slices.Equal(back, got) {
				t.Errorf("rangesText(%v) = %q reads back as %v", got, rangesText(got), back)
			}
		}
	}
}

func TestNewCmdSweep(t *testing.T) {
	dir := t.TempDir()
	cfg := sweepConfig(t, dir, "  num_folds: 3\n")
	o, err := capture(t, NewCmdSweep, "--config", cfg, "--run-ids", "0-1,5", "--", "--epochs", "7", "--device", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Folds, []int{0, 1, 2}) || !slices.Equal(o.RunIDs, []int{0, 1, 5}) || o.Config.Train.Epochs != 7 ||
		!slices.Equal(o.TrainArgs, []string{"--epochs", "7", "--device", "cpu"}) || o.Slurm != "" || len(o.Jobs()) != 9 {
		t.Errorf("sweep options: %+v", o)
	}
	if j := o.Jobs()[5]; j != (sweepJob{1, 5}) || !slices.Equal(o.args(j), []string{"--config", cfg, "--fold", "1", "--run-id", "5",
		"--resume", "auto", "--epochs", "7", "--device", "cpu"}) {
		t.Errorf("job 5: %+v, args %q", j, o.args(j))
	}
	o, err = capture(t, NewCmdSweep, "--config", cfg, "--folds", "-1", "--write-slurm", "--array-limit", "2")
	if err != nil || !slices.Equal(o.Folds, []int{-1}) || o.Slurm != filepath.Join("runs", "swp", "sweep", "sweep.sbatch") || o.SBatch.ArrayLimit != 2 {
		t.Errorf("--write-slurm: %+v, %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--config is required"},
		{[]string{"--config", cfg, "--folds", "0-3"}, "--folds 0-3: fold 3, want -1 (every case) or 0..2 (data.num_folds is 3"},
		{[]string{"--config", cfg, "--run-ids", "-1"}, "--run-ids -1"},
		{[]string{"--config", cfg, "--", "--fold", "1"}, "--fold after --: the sweep sets each job's fold: use --folds"},
		{[]string{"--config", cfg, "--", "--resume", "auto"}, "--resume after --"},
		{[]string{"--config", cfg, "--", "--init-weights", "w.safetensors"}, "--init-weights after --"},
		{[]string{"--config", cfg, "--", "--epochs", "0"}, "--epochs 0: train.epochs"},
		{[]string{"--config", cfg, "--", "--nope"}, "training flags after --: unknown flag: --nope"},
		{[]string{"--config", cfg, "stray"}, `unexpected argument "stray"`},
		{[]string{"--config", cfg, "--submit"}, "--submit submits the script"},
		{[]string{"--config", cfg, "--summary", "--slurm", "x.sh"}, "--summary runs nothing: drop --slurm"},
		{[]string{"--config", cfg, "--slurm", "x.sh", "--parallel", "2"}, "--parallel is for a sweep run here"},
		{[]string{"--config", cfg, "--parallel", "0"}, "--parallel 0"},
		{[]string{"--config", cfg, "--slurm", "x.sh", "--time", "2h"}, "--time 2h: want minutes"},
		{[]string{"--config", cfg, "--slurm", "x.sh", "--partition", "a b"}, `--partition "a b"`},
		{[]string{"--config", cfg, "--slurm", "x.sh", "--write-slurm"}, "--write-slurm and --slurm"},
	} {
		_, err := capture(t, NewCmdSweep, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sweep %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestSweepSlurmScript writes the array job of a 2 × 3 grid and holds it
// to what sbatch and bash accept: the syntax (bash -n), every #SBATCH line
// an sbatch option in a form sbatch reads, the array as large as the grid.
// Then it runs the script's body as SLURM would run each array task, with
// train and scontrol replaced by stubs that record their arguments: each
// (fold, run id) is trained exactly once with --resume auto and the flags
// after --, quoted through a nasty config path; exit 143, 130 and 75
// requeue the task, 0 and 1 do not (1 fails it), a cancelled job is not
// requeued; and SIGTERM to the batch shell reaches train.
func TestSweepSlurmScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := filepath.Join(t.TempDir(), `it's $HOME; (x)`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the script cds here: quoted
	cfg := sweepConfig(t, dir, "  num_folds: 4\n")
	script := filepath.Join(dir, "job.sh")
	// sbatch's --output may not hold blanks or quotes: the runs go elsewhere.
	runs := filepath.Join(t.TempDir(), "out$(id)&x")
	out, errb, err := runCmd(t, "sweep", "--config", cfg, "--folds", "1,3", "--run-ids", "0-1,4", "--slurm", script,
		"--partition", "gpu", "--time", "1-00:00:00", "--gpus-per-task", "1", "--cpus-per-task", "8", "--mem", "64G",
		"--job-name", "hippo", "--account", "lab", "--qos", "normal", "--gres", "gpu:1", "--array-limit", "2",
		"--", "--epochs", "300", "--output-dir", runs, "--threads", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	if !strings.Contains(out.String(), "a SLURM array job of 6 tasks") {
		t.Errorf("output: %s", out)
	}
	logDir := filepath.Join(runs, "swp", "sweep", "slurm")
	if fi, err := os.Stat(logDir); err != nil || !fi.IsDir() {
		t.Errorf("the log folder %s is not there (sbatch does not create it): %v", logDir, err)
	}
	body, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, msg)
	}

	// #SBATCH lines: sbatch reads those before the first command.
	opts := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "#SBATCH") {
			continue
		}
		m := sbatchLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("malformed: %q", line)
			continue
		}
		takesArg, known := sbatchOptions[m[1]]
		switch {
		case !known:
			t.Errorf("%q: sbatch has no option --%s", line, m[1])
		case takesArg != (m[2] != ""):
			t.Errorf("%q: --%s takes an argument: %v", line, m[1], takesArg)
		}
		if _, dup := opts[m[1]]; dup {
			t.Errorf("--%s given twice", m[1])
		}
		opts[m[1]] = m[2]
	}
	for k, v := range map[string]string{
		"array": "0-5%2", "signal": "B:TERM@120", "requeue": "", "partition": "gpu", "time": "1-00:00:00",
		"gpus-per-task": "1", "cpus-per-task": "8", "mem": "64G", "job-name": "hippo", "account": "lab", "qos": "normal",
		"gres": "gpu:1", "open-mode": "append", "output": logDir + "/%x_%A_%a.out",
	} {
		if got, ok := opts[k]; !ok || got != v {
			t.Errorf("#SBATCH --%s: %q (given: %v), want %q", k, got, ok, v)
		}
	}

	// The body, task by task, with stubs.
	stubs := t.TempDir()
	record := filepath.Join(stubs, "calls")
	writeStub := func(name, body string) {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// train records its arguments (NUL-terminated) and exits $STUB_RC;
	// with STUB_WAIT it says it started and waits for SIGTERM, exiting 143
	// (or 1 after 20 s: no process left behind when the test fails).
	writeStub("train", `pwd >"$STUB_RECORD.pwd"; printf 'train' >>"$STUB_RECORD"; printf '\0%s' "$@" >>"$STUB_RECORD"; printf '\n' >>"$STUB_RECORD"
if [ -n "$STUB_WAIT" ]; then
  trap 'exit 143' TERM
  : >"$STUB_WAIT"
  i=0; while [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
  exit 1
fi
exit "$STUB_RC"
`)
	writeStub("scontrol", `if [ "$1" = show ]; then echo "JobId=$3 JobState=${STUB_STATE:-RUNNING}"; exit 0; fi
printf 'scontrol %s\n' "$*" >>"$STUB_RECORD"
`)
	run := func(task, rc int, env ...string) (code int, calls []string) {
		t.Helper()
		os.Remove(record)
		cmd := exec.Command(bash, script)
		cmd.Dir = stubs // the script cds where the sweep was written
		cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "VOXTRAIN_TRAIN="+filepath.Join(stubs, "train"),
			"STUB_RECORD="+record, fmt.Sprintf("STUB_RC=%d", rc), fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", task),
			fmt.Sprintf("SLURM_JOB_ID=%d", 1000+task), "SLURM_ARRAY_JOB_ID=999")
		cmd.Env = append(cmd.Env, env...)
		var o bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &o
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(record)
		return cmd.ProcessState.ExitCode(), strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	seen := map[sweepJob]int{}
	for task := range 6 {
		code, calls := run(task, 0)
		if code != 0 || len(calls) != 1 {
			t.Fatalf("task %d: exit %d, calls %q", task, code, calls)
		}
		args := strings.Split(calls[0], "\x00")
		want := []string{"train", "--config", cfg, "--fold", "F", "--run-id", "R", "--resume", "auto", "--epochs", "300",
			"--output-dir", runs, "--threads", "4"}
		if len(args) != len(want) {
			t.Fatalf("task %d: train %q", task, args)
		}
		fold, err1 := strconv.Atoi(args[4])
		run, err2 := strconv.Atoi(args[6])
		want[4], want[6] = args[4], args[6]
		if err1 != nil || err2 != nil || !slices.Equal(args, want) {
			t.Errorf("task %d: train %q, want %q", task, args, want)
		}
		seen[sweepJob{fold, run}]++
		if pwd, err := os.ReadFile(record + ".pwd"); err != nil || strings.TrimSpace(string(pwd)) != dir {
			t.Errorf("task %d: train ran in %q (%v), want %q", task, pwd, err, dir)
		}
		exit, err := os.ReadFile(filepath.Join(runs, "swp", "sweep", sweepJob{fold, run}.name()+".exit"))
		if err != nil || string(exit) != "0\n" {
			t.Errorf("task %d: exit record %q, %v", task, exit, err)
		}
	}
	for _, f := range []int{1, 3} {
		for _, r := range []int{0, 1, 4} {
			if seen[sweepJob{f, r}] != 1 {
				t.Errorf("fold %d run %d trained %d times over the array", f, r, seen[sweepJob{f, r}])
			}
		}
	}
	if code, calls := run(6, 0); code == 0 || calls[0] != "" {
		t.Errorf("task 6 of a 6-task array: exit %d, calls %q", code, calls)
	}

	// Exit statuses: saved and stopped → requeue this task; else not.
	for _, c := range []struct {
		rc, want int
		requeue  bool
		env      []string
	}{
		{0, 0, false, nil}, {1, 1, false, nil}, {143, 0, true, nil}, {130, 0, true, nil}, {75, 0, true, nil},
		{137, 137, false, nil}, {143, 143, false, []string{"STUB_STATE=CANCELLED"}},
	} {
		code, calls := run(2, c.rc, c.env...)
		requeued := slices.Contains(calls, "scontrol requeue 1002")
		if code != c.want || requeued != c.requeue || len(calls) != 1+btoi(requeued) {
			t.Errorf("train exits %d %v: script exits %d, calls %q; want exit %d, requeue %v", c.rc, c.env, code, calls, c.want, c.requeue)
		}
	}

	// SIGTERM to the batch shell (SLURM's --signal=B:TERM) reaches train,
	// whose 143 requeues the task.
	started := filepath.Join(stubs, "started")
	cmd := exec.Command(bash, script)
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "VOXTRAIN_TRAIN="+filepath.Join(stubs, "train"),
		"STUB_RECORD="+record, "STUB_RC=0", "SLURM_ARRAY_TASK_ID=0", "SLURM_JOB_ID=77", "STUB_WAIT="+started)
	os.Remove(record)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the stub train did not start")
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	b, _ := os.ReadFile(record)
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(b), "scontrol requeue 77") {
		t.Errorf("SIGTERM to the batch shell: exit %d (%v), calls %q; want train's 143 and a requeue", code, cmd.ProcessState, b)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSweepSubmitWithoutSbatch: --submit names sbatch when it is not on
// PATH, after writing the script.
func TestSweepSubmitWithoutSbatch(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("PATH", dir)
	cfg := sweepConfig(t, dir, "")
	script := filepath.Join(dir, "job.sh")
	_, _, err := runCmd(t, "sweep", "--config", cfg, "--folds", "0", "--slurm", script, "--submit")
	wantErr(t, err, "--submit: sbatch is not on PATH")
	if _, err := os.Stat(script); err != nil {
		t.Errorf("the script was not written: %v", err)
	}
}

// TestSweepLocal runs a real grid of 2 folds × 1 run id here (the test
// binary is train: see TestMain), one epoch of two steps each with a
// validation: both finish, each with its log and exit record, the summary
// (printed, JSON, TSV) lists both finished with a best Dice and each
// fold's mean; run again, the sweep skips both.
func TestSweepLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two tiny runs in child processes")
	}
	t.Setenv("VOXTRAIN_TEST_MAIN", "1")
	demo := testutil.DemoDir(t)
	dir := t.TempDir()
	t.Chdir(dir)
	var cases strings.Builder
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019"} {
		cases.WriteString("    - {image: " + filepath.Join(demo, "imagesTr", id+".nii.gz") +
			", label: " + filepath.Join(demo, "labelsTr", id+".nii.gz") + "}\n")
	}
	cfg := filepath.Join(dir, "tiny.yaml")
	err := os.WriteFile(cfg, []byte("experiment: tiny\nseed: 5\ndata:\n  num_folds: 2\n  workers: 1\n  cases:\n"+cases.String()+
		"model:\n  num_classes: 3\n  features: [4, 8]\n"+
		"train:\n  epochs: 1\n  iterations_per_epoch: 2\n  patch_size: [16, 16, 16]\n  batch_size: 1\n"+
		"validation:\n  every: 1\n  final: last\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"sweep", "--config", cfg, "--folds", "0-1", "--run-ids", "0", "--", "--threads", "1", "--output-dir", "runs"}
	out, errb, err := runCmd(t, args...)
	exp := filepath.Join(dir, "runs", "tiny")
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(exp, "sweep", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, b)
		}
		t.Fatalf("sweep: %v\n%s\n%s", err, out, errb)
	}
	for _, f := range []string{"fold_0_run_0", "fold_1_run_0"} {
		if b, err := os.ReadFile(filepath.Join(exp, "sweep", f+".exit")); err != nil || string(b) != "0\n" {
			t.Errorf("%s.exit: %q, %v", f, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(exp, "sweep", f+".log")); err != nil || !strings.Contains(string(b), "--resume auto") {
			t.Errorf("%s.log: %v\n%s", f, err, b)
		}
	}
	var s sweepSummary
	b, err := os.ReadFile(filepath.Join(exp, "sweep_summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Runs) != 2 || s.Counts[statusFinished] != 2 || len(s.Folds) != 2 {
		t.Fatalf("summary: %s", b)
	}
	for i, r := range s.Runs {
		if r.Fold != i || r.RunID != 0 || r.Status != statusFinished || r.EpochsDone != 1 || r.Epochs != 1 || r.BestValDice == nil ||
			r.LastExit == nil || *r.LastExit != 0 || r.RunDir != filepath.Join("runs", "tiny", fmt.Sprintf("fold_%d", i), "run_0") {
			t.Errorf("run %d: %+v", i, r)
		}
		if f := s.Folds[i]; f.Fold != i || f.Runs != 1 || f.Finished != 1 || f.MeanBestValDice == nil || *f.MeanBestValDice != *r.BestValDice ||
			f.WithFinal != 1 || f.MeanFinalValDice == nil || r.FinalValDice == nil || *f.MeanFinalValDice != *r.FinalValDice {
			t.Errorf("fold %d: %+v", i, f)
		}
		// The final validation's score is its summary.json's.
		fs, err := evaluation.Read(filepath.Join(dir, r.RunDir, "validation", "summary.json"))
		if err != nil || r.FinalValDice == nil || *r.FinalValDice != fs.ForegroundMean.Dice {
			t.Errorf("run %d: final val Dice %v, its validation/summary.json: %v", i, r.FinalValDice, err)
		}
	}
	tsv, _ := os.ReadFile(filepath.Join(exp, "sweep_summary.tsv"))
	if lines := strings.Split(strings.TrimSpace(string(tsv)), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "0\t0\tfinished\t1\t1\t0.") {
		t.Errorf("sweep_summary.tsv:\n%s", tsv)
	}
	if !strings.Contains(out.String(), "2 finished, 0 interrupted, 0 failed, 0 not started") {
		t.Errorf("printed summary:\n%s", out)
	}

	// Again: nothing to run.
	logBefore, _ := os.ReadFile(filepath.Join(exp, "sweep", "fold_0_run_0.log"))
	out, errb, err = runCmd(t, args...)
	if err != nil {
		t.Fatalf("second sweep: %v\n%s", err, errb)
	}
	logAfter, _ := os.ReadFile(filepath.Join(exp, "sweep", "fold_0_run_0.log"))
	if strings.Count(out.String(), "finished (1/1 epochs), skipped") != 2 || strings.Contains(out.String(), "started (log") || !bytes.Equal(logBefore, logAfter) {
		t.Errorf("second sweep ran again:\n%s", out)
	}
	// --summary alone agrees.
	out, _, err = runCmd(t, "sweep", "--config", cfg, "--folds", "0-1", "--summary", "--", "--output-dir", "runs")
	if err != nil || !strings.Contains(out.String(), "2 finished") {
		t.Errorf("--summary: %v\n%s", err, out)
	}
}

// TestSweepLocalSignal: a signal to a local sweep (its context cancelled
// by SIGTERM, as main's is) reaches both running jobs once: each saves
// last and exits 143, the sweep returns an interruption main exits 143
// with, and the summary has both interrupted with their epochs done.
func TestSweepLocalSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two runs in child processes")
	}
	t.Setenv("VOXTRAIN_TEST_MAIN", "1")
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := exitRunConfig(t, dir, "endless.yaml") // 100000 epochs of 2 steps
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	exp := filepath.Join(dir, "runs", "exit")
	go func() {
		// SIGTERM once both jobs have logged an epoch.
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			n := 0
			for _, r := range []string{"run_0", "run_1"} {
				if fi, err := os.Stat(filepath.Join(exp, "fold_0", r, "metrics.jsonl")); err == nil && fi.Size() > 0 {
					n++
				}
			}
			if n == 2 {
				break
			}
		}
		cancel(interruptSignal{syscall.SIGTERM})
	}()
	f, out, errb := testFactory()
	cmd := NewCmdRoot(f)
	cmd.SetArgs([]string{"sweep", "--config", cfg, "--folds", "0", "--run-ids", "0-1", "--parallel", "2", "--", "--threads", "1"})
	err := cmd.ExecuteContext(ctx)
	if code := exitCode(err, context.Cause(ctx)); code != 143 {
		t.Fatalf("sweep after SIGTERM: %v, exit %d, want 143\n%s\n%s", err, code, out, errb)
	}
	var s sweepSummary
	b, err := os.ReadFile(filepath.Join(exp, "sweep_summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Runs {
		if r.Status != statusInterrupted || r.EpochsDone < 1 || r.LastExit == nil || *r.LastExit != 143 {
			t.Errorf("run %d after SIGTERM: %+v", r.RunID, r)
		}
	}
	if len(s.Runs) != 2 || !strings.Contains(out.String(), "stopped after saving last (exit 143)") {
		t.Errorf("summary %s\noutput:\n%s", b, out)
	}
}
