package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockEnv names the run directory for the child process of
// TestLockHeldByAnotherProcess.
const lockEnv = "VOXTRAIN_CHECKPOINT_LOCK_CHILD_DIR"

// TestLockChild is the child of TestLockHeldByAnotherProcess: it takes the
// run directory's lock, says so and waits to be killed.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockEnv)
	if dir == "" {
		t.Skip("helper process for TestLockHeldByAnotherProcess")
	}
	r := RunDir{Path: dir, LockFile: filepath.Join(dir, LockName)}
	l, err := r.Lock()
	if err != nil || l.Warning != "" {
		fmt.Fprintln(os.Stderr, "child:", err, l)
		os.Exit(3)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute) // never outlive a broken parent
	os.Exit(4)
}

func lockedRunDir(t *testing.T) RunDir {
	t.Helper()
	r, err := RunDirAt(filepath.Join(t.TempDir(), "out"), "e", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantLocked checks that err is a *LockedError naming pid on this host.
func wantLocked(t *testing.T, err error, pid int) {
	t.Helper()
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second lock: %v, want a *LockedError", err)
	}
	host, _ := os.Hostname()
	if le.Holder.PID != pid || le.Holder.Host != host || le.Holder.Started.IsZero() {
		t.Errorf("holder %+v, want pid %d on %s", le.Holder, pid, host)
	}
	for _, want := range []string{"pid " + strconv.Itoa(pid), "host " + host} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestLockRefusesSecondHolder: while one lock on a run directory is held
// a second is refused, naming the holder; once released, it can be taken
// again. The run's other files and directories are not created.
func TestLockRefusesSecondHolder(t *testing.T) {
	r := lockedRunDir(t)
	a, err := r.Lock()
	if err != nil || a.Warning != "" {
		t.Fatalf("first lock: %v %+v", err, a)
	}
	ents, err := os.ReadDir(r.Path)
	if err != nil || len(ents) != 1 || ents[0].Name() != LockName {
		t.Errorf("Lock created more than the lock file: %v %v", ents, err)
	}
	b, err := r.Lock()
	if b != nil {
		t.Fatal("second lock taken while the first is held")
	}
	wantLocked(t, err, os.Getpid())
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil {
		t.Errorf("second release: %v", err)
	}
	if b, _ := os.ReadFile(r.LockFile); len(b) != 0 {
		t.Errorf("released lock file still names its holder: %q", b)
	}
	c, err := r.Lock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	c.Release()
}

// TestLockHeldByAnotherProcess: a lock held by another process is refused
// with that process's PID; when the process is killed (SIGKILL, no chance
// to clean up) the file it leaves, still naming it, blocks nobody.
func TestLockHeldByAnotherProcess(t *testing.T) {
	r := lockedRunDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockEnv+"="+r.Path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = r.Lock()
	wantLocked(t, err, cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if b, _ := os.ReadFile(r.LockFile); !strings.Contains(string(b), strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("the killed child's lock file does not name it: %q", b)
	}
	l, err := r.Lock()
	if err != nil {
		t.Fatalf("a killed holder's lock file blocks a new lock: %v", err)
	}
	defer l.Release()
	if b, _ := os.ReadFile(r.LockFile); !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, os.Getpid())) {
		t.Errorf("lock file after the new lock: %q", b)
	}
}
