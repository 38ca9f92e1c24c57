package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// crashEnv names the checkpoint directory for the child process of
// TestSIGKILLDuringSave.
const crashEnv = "VOXTRAIN_CHECKPOINT_CRASH_CHILD_DIR"

// crashScale sizes the child's tensors: about 4 MB per checkpoint (model +
// optimiser), 1 MB under the race detector.
func crashScale() int {
	if testutil.Race {
		return 50
	}
	return 200
}

var crashPolicy = config.Checkpoint{BestMode: "max", EveryEpochs: 3, Keep: 2, KeepRecent: 2}

func crashMetric(step int64) float64 { return math.Sin(float64(step) * 0.7) }

// TestCrashChild is the child of TestSIGKILLDuringSave: like a training
// run resuming after preemption, it loads the latest checkpoint and then
// saves one checkpoint after another until it is killed, printing
// "begin N" before and "end N" after each save.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestSIGKILLDuringSave")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	scale := crashScale()
	model, opt := testModel(0, scale)
	var step int64
	l, err := LoadLatest(dir, model, opt)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
	case err != nil:
		fail(err)
	default:
		if err := verify(l, model, opt); err != nil {
			fail(err)
		}
		step = l.Step
	}
	s := &Saver{Dir: dir, Policy: crashPolicy}
	fmt.Println("ready")
	deadline := time.Now().Add(time.Minute) // never outlive a broken parent
	for time.Now().Before(deadline) {
		step++
		c := testCheckpoint(int(step), step, scale, f64(crashMetric(step)))
		fmt.Println("begin", step)
		if _, err := s.Save(c); err != nil {
			fail(err)
		}
		fmt.Println("end", step)
	}
	os.Exit(4)
}

// TestSIGKILLDuringSave kills a process that saves checkpoints in a loop
// with SIGKILL at random moments, at least 50 times while a save is in
// progress, and after every kill checks that the latest checkpoint loads
// and is internally consistent, that it is the last or the one before the
// interrupted save, that every checkpoint directory under a final name is
// complete, and that last and best point at complete checkpoints.
func TestSIGKILLDuringSave(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	dir := filepath.Join(t.TempDir(), "run", "checkpoints")
	rng := rand.New(rand.NewPCG(7, 11))
	scale := crashScale()
	model, opt := testModel(0, scale)
	const wantMidSave = 50
	var kills, midSave int
	var latest int64
	phases := map[string]int{}
	saveReturned := false // some Save call has returned: last must exist
	start := time.Now()
	for midSave < wantMidSave {
		if time.Since(start) > 50*time.Second {
			t.Fatalf("only %d of %d kills landed during a save in 50 s (%d kills)", midSave, wantMidSave, kills)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Follow the child's progress: the last "begin"/"end" line seen.
		var last string
		var sawEnd bool
		ready := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(ready)
					continue
				}
				last = sc.Text() // read by the test only after done is closed
				sawEnd = sawEnd || strings.HasPrefix(last, "end ")
			}
		}()
		select {
		case <-ready:
		case <-done:
			cmd.Wait()
			t.Fatalf("child exited before it was ready: %s", stderr.String())
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("child not ready after 30 s")
		}
		// A random moment within the first few saves.
		time.Sleep(time.Duration(rng.Int64N(int64(60 * time.Millisecond))))
		if err := cmd.Process.Kill(); err != nil {
			<-done
			t.Fatalf("kill: %v (child exited early: %v; stderr: %s)", err, cmd.Wait(), stderr.String())
		}
		// Everything the child printed before it died is in the pipe:
		// once it is drained, the last line tells where the kill landed.
		<-done
		at := last
		saveReturned = saveReturned || sawEnd
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL (%v): %s", err, stderr.String())
		}
		kills++

		// The moment of the kill: during save N ("begin N") or between saves.
		var begun, ended int64 = -1, latest
		if f := strings.Fields(at); len(f) == 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "begin" {
				begun, ended = n, n-1
				midSave++
			} else {
				ended = n
			}
		}

		// What the kill interrupted, judged by what it left behind.
		for _, n := range testutil.DirNames(t, dir) {
			switch {
			case strings.HasPrefix(n, ".tmp-ckpt"):
				phases["writing files"]++
			case strings.HasPrefix(n, ".tmp-last"), strings.HasPrefix(n, ".tmp-best"):
				phases["moving a pointer"]++
			case strings.HasPrefix(n, ".trash-"):
				phases["pruning"]++
			}
		}

		l, err := LoadLatest(dir, model, opt)
		if errors.Is(err, ErrNoCheckpoint) && ended <= 0 {
			continue // killed before the first save completed
		}
		if err != nil {
			t.Fatalf("kill %d (%q): latest checkpoint does not load: %v", kills, at, err)
		}
		if err := verify(l, model, opt); err != nil {
			t.Fatalf("kill %d (%q): %v", kills, at, err)
		}
		if len(l.Skipped) > 0 {
			t.Fatalf("kill %d: damaged checkpoints: %v", kills, l.Skipped)
		}
		// Killed during save N, the latest is N-1 or, if the rename
		// happened before the kill, N. Between saves it is the last ended.
		if l.Step != ended && l.Step != begun {
			t.Fatalf("kill %d (%q): latest step %d, want %d or %d", kills, at, l.Step, ended, begun)
		}
		if l.Step == begun {
			phases["after the commit rename"]++
		}
		if l.Step < latest {
			t.Fatalf("kill %d: latest step went back from %d to %d", kills, latest, l.Step)
		}
		latest = l.Step
		checkAllComplete(t, dir, scale, kills, saveReturned)
	}
	t.Logf("%d kills, %d during a save, %d checkpoints saved, in %v; kills that left traces of each phase: %v", kills, midSave, latest, time.Since(start).Round(time.Millisecond), phases)

	// The next save cleans up whatever the kills left behind.
	s := &Saver{Dir: dir, Policy: crashPolicy}
	mustSave(t, s, testCheckpoint(int(latest+1), latest+1, scale, nil))
	for _, n := range testutil.DirNames(t, dir) {
		if strings.HasPrefix(n, ".") {
			t.Errorf("left behind after a clean save: %s", n)
		}
	}
}

// checkAllComplete loads every checkpoint directory and the pointers.
// last must exist once a save has returned (a kill between the first
// save's commit and its pointer update leaves a complete checkpoint and no
// last yet).
func checkAllComplete(t *testing.T, dir string, scale, kill int, wantLast bool) {
	t.Helper()
	es, err := scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, p := range []string{"last", "best"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			refs = append(refs, filepath.Join(dir, p))
		} else if p == "last" && wantLast {
			t.Fatalf("kill %d: no last pointer after a save returned: %v", kill, err)
		}
	}
	for _, e := range es {
		refs = append(refs, filepath.Join(dir, e.name))
	}
	for _, ref := range refs {
		model, opt := testModel(0, scale)
		l, err := Load(ref, model, opt)
		if err != nil {
			t.Fatalf("kill %d: %s: %v", kill, ref, err)
		}
		if err := verify(l, model, opt); err != nil {
			t.Fatalf("kill %d: %s: %v", kill, ref, err)
		}
	}
}
