package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/dist"
)

// distChild is a launched process's behaviour in the launch tests, after
// joining the job through the store:
//
//	sum:  all-reduce the ranks, print the sum, exit 0;
//	fail: rank 1 exits 3 once the others wait for SIGTERM (each marks
//	      that in VOXTRAIN_TEST_DIST_DIR: had rank 1 left while another
//	      was still in Init's barrier, that one would fail on its own);
//	wait: print "ready", wait for a signal.
//
// A process waiting for a signal prints "got SIGTERM" (or SIGINT) and
// exits 128 + the signal, or exits 9 after 30 seconds without one.
func distChild(mode string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	env, err := dist.FromEnviron()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	c, err := dist.Init(ctx, env, dist.Options{JoinTimeout: 30 * time.Second, Timeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	waitSignal := func() int {
		select {
		case s := <-sigs:
			fmt.Printf("got %s\n", signalName(s.(syscall.Signal)))
			return exitSignal + int(s.(syscall.Signal))
		case <-time.After(30 * time.Second):
			fmt.Println("no signal")
			return 9
		}
	}
	switch mode {
	case "sum":
		buf := []float32{float32(env.Rank), 1}
		if err := c.AllReduceSum(ctx, buf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("local rank %d of %d: sum of ranks %v over %v processes\n", env.LocalRank, env.LocalWorldSize, buf[0], buf[1])
		fmt.Fprint(os.Stderr, "an unfinished line")
		c.Close()
		return 0
	case "fail":
		dir := os.Getenv("VOXTRAIN_TEST_DIST_DIR")
		mark := func(r int) string { return filepath.Join(dir, fmt.Sprintf("waiting.%d", r)) }
		if env.Rank != 1 {
			if err := os.WriteFile(mark(env.Rank), nil, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			// Lines on stderr while launch reports rank 1's exit on
			// the same writer (its lines once raced with the children's).
			go func() {
				for {
					fmt.Fprintln(os.Stderr, "waiting")
					time.Sleep(time.Millisecond)
				}
			}()
			return waitSignal()
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			waiting := 0
			for r := range env.WorldSize {
				if _, err := os.Stat(mark(r)); err == nil {
					waiting++
				}
			}
			if waiting == env.WorldSize-1 {
				return 3
			}
		}
		fmt.Println("the others did not all reach waiting")
		return 4
	case "wait":
		fmt.Println("ready")
		return waitSignal()
	}
	return 1
}

func TestLaunchFlags(t *testing.T) {
	o, err := capture(t, NewCmdLaunch, "--nproc-per-node", "4", "--", "--config", "run.yaml", "--fold", "1")
	if err != nil {
		t.Fatal(err)
	}
	if o.NProcPerNode != 4 || o.NNodes != 1 || o.NodeRank != 0 || o.MasterAddr != "127.0.0.1" || o.MasterPort != 0 ||
		o.Grace != 30*time.Second || !slices.Equal(o.Args, []string{"--config", "run.yaml", "--fold", "1"}) {
		t.Errorf("defaults: %+v", o)
	}
	o, err = capture(t, NewCmdLaunch, "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "8", "--master-addr", "10.0.0.1",
		"--master-port", "29500", "--grace", "5s", "--", "--config", "r.yaml")
	if err != nil || o.NNodes != 2 || o.NodeRank != 1 || o.MasterAddr != "10.0.0.1" || o.MasterPort != 29500 || o.Grace != 5*time.Second {
		t.Errorf("multi-node: %+v, %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "--config", "r.yaml"}, "nproc-per-node"},
		{[]string{"--nproc-per-node", "0"}, "--nproc-per-node 0: at least 1"},
		{[]string{"--nproc-per-node", "2", "--config", "r.yaml"}, "unknown flag: --config"},
		{[]string{"--nproc-per-node", "2", "run.yaml", "--", "x"}, "the training's arguments go after --"},
		{[]string{"--nproc-per-node", "2", "--nnodes", "2", "--master-addr", "10.0.0.1"}, "--master-port is needed with --nnodes 2"},
		{[]string{"--nproc-per-node", "2", "--nnodes", "2", "--master-port", "1"}, "--master-addr 127.0.0.1: with --nnodes 2 it must be node 0's address"},
		{[]string{"--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2"}, "--node-rank 2: 0 to 1"},
		{[]string{"--nproc-per-node", "2", "--master-port", "70000"}, "--master-port 70000 is not a TCP port"},
	} {
		_, err := capture(t, NewCmdLaunch, c.args...)
		wantErr(t, err, c.want)
	}
}

// launchInProcess runs launchRun with this test binary as the children,
// each behaving as mode says.
func launchInProcess(t *testing.T, mode string, n int) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("VOXTRAIN_TEST_DIST_CHILD", mode)
	t.Setenv("VOXTRAIN_TEST_DIST_DIR", t.TempDir())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, out, errb := testFactory()
	err = launchRun(context.Background(), &LaunchOptions{IO: f.IO, NProcPerNode: n, NNodes: 1, MasterAddr: "127.0.0.1",
		Grace: 5 * time.Second, Executable: exe})
	return out.String(), errb.String(), err
}

// Three processes meet through the store, all-reduce their ranks and
// print the sum, each line prefixed with its rank.
func TestLaunchRunsARendezvousAndAllReduce(t *testing.T) {
	out, errs, err := launchInProcess(t, "sum", 3)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines)
	want := []string{
		"[rank 0] local rank 0 of 3: sum of ranks 3 over 3 processes",
		"[rank 1] local rank 1 of 3: sum of ranks 3 over 3 processes",
		"[rank 2] local rank 2 of 3: sum of ranks 3 over 3 processes",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	for r := range 3 {
		if !strings.Contains(errs, fmt.Sprintf("[rank %d] an unfinished line\n", r)) {
			t.Errorf("stderr lacks rank %d's last line:\n%s", r, errs)
		}
	}
}

// A process that exits 3: launch stops the others with SIGTERM and exits 3.
func TestLaunchStopsTheOthersWhenOneFails(t *testing.T) {
	start := time.Now()
	out, errs, err := launchInProcess(t, "fail", 3)
	var cf *childFailed
	if !errors.As(err, &cf) || cf.rank != 1 || exitCode(err, nil) != 3 {
		t.Fatalf("launch returned %v (exit status %d), want rank 1's status 3\n%s\n%s", err, exitCode(err, nil), out, errs)
	}
	for _, r := range []int{0, 2} {
		if !strings.Contains(out, fmt.Sprintf("[rank %d] got SIGTERM\n", r)) {
			t.Errorf("rank %d was not stopped with SIGTERM:\n%s\n%s", r, out, errs)
		}
	}
	if !strings.Contains(errs, "launch: rank 1 exited with status 3; stopping the others") {
		t.Errorf("stderr:\n%s", errs)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

// SIGTERM to launch (a real process) reaches every child; launch exits
// 143 once they have.
func TestLaunchPassesSIGTERMOn(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "launch", "--nproc-per-node", "2", "--", "child-args")
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !contains(launchEnv, name) {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "VOXTRAIN_TEST_MAIN=1", "VOXTRAIN_TEST_DIST_CHILD=wait")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	timeout := time.After(30 * time.Second)
	for ready := 0; ready < 2; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("launch ended before its children were ready: %q\n%s", got, errb.String())
			}
			got = append(got, l)
			if strings.HasSuffix(l, "] ready") {
				ready++
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("children not ready after 30s: %q\n%s", got, errb.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		got = append(got, l)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("launch exited %d after SIGTERM, want 143\n%s", code, errb.String())
	}
	for _, want := range []string{"[rank 0] got SIGTERM", "[rank 1] got SIGTERM"} {
		if !slices.Contains(got, want) {
			t.Errorf("stdout lacks %q: %q", want, got)
		}
	}
}

// TestChildGOMAXPROCS: N processes on a node share its cores unless the
// user set GOMAXPROCS; one process is left alone.
func TestChildGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		set     string
		cpus, n int
		want    string
	}{{"", 16, 4, "4"}, {"", 2, 3, "1"}, {"", 8, 1, ""}, {"6", 16, 4, ""}} {
		if got := childGOMAXPROCS(tc.set, tc.cpus, tc.n); got != tc.want {
			t.Errorf("GOMAXPROCS %q, %d cores, %d processes: %q, want %q", tc.set, tc.cpus, tc.n, got, tc.want)
		}
	}
}
