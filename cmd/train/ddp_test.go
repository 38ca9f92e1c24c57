package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/checkpoint"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/dist"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nn"
)

// ddpConfig writes a tiny training of four demo cases (no validation)
// with many steps, for runs that a signal or a kill ends.
func ddpConfig(t *testing.T) (cfg, runs string) {
	t.Helper()
	demo := testutil.DemoDir(t)
	dir := t.TempDir()
	var cases strings.Builder
	for _, id := range []string{"hippocampus_001", "hippocampus_006", "hippocampus_011", "hippocampus_019"} {
		cases.WriteString("    - {image: " + filepath.Join(demo, "imagesTr", id+".nii.gz") +
			", label: " + filepath.Join(demo, "labelsTr", id+".nii.gz") + "}\n")
	}
	cfg = filepath.Join(dir, "ddp.yaml")
	err := os.WriteFile(cfg, []byte("experiment: ddp\nseed: 5\ndata:\n  fold: -1\n  workers: 1\n  cases:\n"+cases.String()+
		"model:\n  num_classes: 3\n  features: [4, 8]\n"+
		"train:\n  epochs: 1\n  iterations_per_epoch: 100000\n  patch_size: [16, 16, 16]\n  batch_size: 1\n  log_every_seconds: 0.01\n"+
		"validation:\n  every: -1\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "runs")
}

// trainProc is a process of this test binary running train's main.
type trainProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer // stdout and stderr
	lines chan string  // stdout lines, closed at EOF
}

// startTrain starts `train args` with env added to this process's
// environment (torchrun's variables removed).
func startTrain(t *testing.T, env []string, args ...string) *trainProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &trainProc{cmd: exec.Command(exe, args...), lines: make(chan string, 1000)}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !contains(launchEnv, name) && !strings.HasPrefix(name, "VOXTRAIN_DIST_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(append(p.cmd.Env, "VOXTRAIN_TEST_MAIN=1"), env...)
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) })
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
	}()
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *trainProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits for a stdout line matching re.
func (p *trainProc) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the process ended before printing %v:\n%s", re, p.output())
			}
			if re.MatchString(l) {
				return
			}
		case <-deadline:
			t.Fatalf("no line matching %v after %v:\n%s", re, within, p.output())
		}
	}
}

// wait waits for the process to exit (at most within) and returns its
// exit status.
func (p *trainProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() {
		for range p.lines {
		}
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("still running after %v:\n%s", within, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

var stepsLine = regexp.MustCompile(`\[rank (\d)\] run .*: 0 epochs, (\d+) steps`)

// SIGTERM to `train launch` of a 2-rank training (SLURM's preemption):
// both ranks stop after the same step, rank 0 saves `last` once, and
// launch exits 143; the checkpoint loads and holds that step.
func TestLaunchTrainingSIGTERMSavesLastOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("trains in two processes")
	}
	cfg, runs := ddpConfig(t)
	p := startTrain(t, nil, "launch", "--nproc-per-node", "2", "--", "--config", cfg, "--output-dir", runs, "--threads", "1")
	p.waitFor(t, regexp.MustCompile(`^\[rank 0\] .*epoch 1/1 step [0-9]+/100000`), 60*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 60*time.Second); code != 143 {
		t.Errorf("launch exited %d after SIGTERM, want 143\n%s", code, p.output())
	}
	out := p.output()
	t.Logf("launch:\n%s", out)
	steps := map[string]string{}
	for _, m := range stepsLine.FindAllStringSubmatch(out, -1) {
		steps[m[1]] = m[2]
	}
	if len(steps) != 2 || steps["0"] != steps["1"] {
		t.Fatalf("ranks' final steps %v, want the same on both:\n%s", steps, out)
	}
	ckdir := filepath.Join(runs, "ddp", "fold_all", "run_0", "checkpoints")
	names := testutil.DirNames(t, ckdir)
	var ckpts []string
	for _, n := range names {
		if strings.HasPrefix(n, "ckpt-") {
			ckpts = append(ckpts, n)
		}
	}
	if len(ckpts) != 1 || strings.Count(out, "saved checkpoint") != 1 {
		t.Fatalf("checkpoints %v (%d saves logged), want one `last`:\n%s", names, strings.Count(out, "saved checkpoint"), out)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New(cpu.Options{Threads: 1})
	net, err := nn.NewUNet(dev, c.Model, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Free()
	want, err := nn.ExportParams(dev, net.Params())
	if err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.Load(filepath.Join(ckdir, "last"), want, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Step int64 }
	if err := json.Unmarshal(l.State, &st); err != nil || fmt.Sprint(st.Step) != steps["0"] {
		t.Errorf("last holds step %d (%v), the ranks stopped after %s", st.Step, err, steps["0"])
	}
}

// A rank killed mid-training (SIGKILL: no goodbye) makes the other end at
// once with an error naming it, exit status 1 — not a hang. The ranks are
// started directly, with torchrun's variables, as srun would: `train
// launch` would stop the survivor itself.
func TestKilledRankEndsTheOthersNamingIt(t *testing.T) {
	if testing.Short() {
		t.Skip("trains in two processes")
	}
	cfg, runs := ddpConfig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var ps []*trainProc
	for r := range 2 {
		env := []string{fmt.Sprintf("RANK=%d", r), fmt.Sprintf("LOCAL_RANK=%d", r), "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "VOXTRAIN_DIST_TIMEOUT=20s"}
		ps = append(ps, startTrain(t, env, "--config", cfg, "--output-dir", runs, "--threads", "1"))
	}
	ps[0].waitFor(t, regexp.MustCompile(`epoch 1/1 step [0-9]+/100000`), 60*time.Second)
	if err := ps[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code := ps[0].wait(t, 30*time.Second)
	out := ps[0].output()
	if code != 1 || !regexp.MustCompile(`rank 1 \(127\.0\.0\.1:\d+\)`).MatchString(out) {
		t.Errorf("rank 0 exited %d after rank 1 was killed, want 1 with an error naming rank 1:\n%s", code, out)
	}
	t.Logf("rank 0:\n%s", out)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("rank 0 took %v to notice", took)
	}
}

// A rank's CUDA device without an index is its local rank's GPU.
func TestDeviceForRank(t *testing.T) {
	two := dist.Env{Rank: 3, LocalRank: 1, WorldSize: 4, LocalWorldSize: 2}
	for _, c := range []struct {
		dev, visible string
		env          dist.Env
		want         string
	}{
		{"cuda", "", two, "cuda:1"},
		{"cuda,bf16,cudnn", "0,1", two, "cuda:1,bf16,cudnn"},
		{"gpu", "", two, "gpu:1"},
		{"cuda:0", "", two, "cuda:0"},
		{"cpu", "", two, "cpu"},
		{"cuda", "3", two, "cuda"}, // one GPU per task
		{"cuda", "", dist.Env{WorldSize: 1, LocalWorldSize: 1}, "cuda"},
	} {
		if got := deviceForRank(c.dev, c.env, c.visible); got != c.want {
			t.Errorf("deviceForRank(%q, local rank %d of %d) = %q, want %q", c.dev, c.env.LocalRank, c.env.LocalWorldSize, got, c.want)
		}
	}
}
