package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// TestPointersNeverMissingOrPartial reads last and best in a tight loop
// while two goroutines save through one Saver: once a save has returned,
// the pointers must always exist and name a committed checkpoint (a
// pointer replaced by remove-then-create would be seen missing here).
func TestPointersNeverMissingOrPartial(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{BestMode: "max", KeepRecent: 3}}
	mustSave(t, s, testCheckpoint(0, 0, 1, f64(0)))
	stop := make(chan struct{})
	problems := make(chan string, 1)
	readerDone := make(chan int)
	go func() {
		reads := 0
		defer func() { readerDone <- reads }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range []string{"last", "best"} {
				target := readPointer(dir, p)
				if target == "" {
					select {
					case problems <- p + " is missing":
					default:
					}
					continue
				}
				// A slow reader may hold a name that has since been
				// replaced and pruned; only a pointer that still names a
				// missing checkpoint is wrong.
				if _, err := os.Stat(filepath.Join(dir, target, manifestFile)); err != nil && readPointer(dir, p) == target {
					select {
					case problems <- fmt.Sprintf("%s -> %s: %v", p, target, err):
					default:
					}
				}
				reads++
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 20; i++ {
				step := int64(2*i + g)
				if _, err := s.Save(testCheckpoint(int(step), step, 1, f64(float64(step)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	reads := <-readerDone
	select {
	case p := <-problems:
		t.Fatal(p)
	default:
	}
	if reads < 100 {
		t.Logf("only %d pointer reads happened during the saves", reads)
	}
	if got := readPointer(dir, "last"); got != "ckpt-e0041-s000000041" && got != "ckpt-e0040-s000000040" {
		t.Errorf("last -> %s", got)
	}
	if got := readPointer(dir, "best"); got != "ckpt-e0041-s000000041" {
		t.Errorf("best -> %s", got)
	}
}

// TestDir: Dir resolves a checkpoint directory, a last link, a pointer
// file (file systems without links), the model.safetensors inside a
// checkpoint and a bare weights file's folder.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{KeepRecent: 2}}
	saved := mustSave(t, s, testCheckpoint(0, 1, 1, nil))
	ck := saved.Dir
	if err := os.WriteFile(filepath.Join(dir, "pointer"), []byte(filepath.Base(ck)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.WriteFile(bare, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{ck, ck},
		{filepath.Join(dir, "last"), ck},
		{filepath.Join(dir, "pointer"), ck},
		{filepath.Join(ck, modelFile), ck},
		{bare, filepath.Dir(bare)},
	} {
		if got, err := Dir(c.path); err != nil || got != c.want {
			t.Errorf("Dir(%s) = %s, %v; want %s", c.path, got, err, c.want)
		}
	}
	if _, err := Dir(filepath.Join(dir, "missing")); err == nil {
		t.Error("Dir of a missing path: no error")
	}
}
