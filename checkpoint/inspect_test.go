package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// TestLatestAndBest: Latest reads the newest save's manifest (a mid-epoch
// one included), skipping one whose manifest does not read; Best reads
// the best pointer's; an empty or missing directory has neither.
func TestLatestAndBest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest of a missing dir: %v, want ErrNoCheckpoint", err)
	}
	if _, err := Best(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Best of a missing dir: %v, want ErrNoCheckpoint", err)
	}
	s := &Saver{Dir: dir, Policy: config.Checkpoint{BestMode: "max", KeepRecent: 5}}
	mustSave(t, s, testCheckpoint(1, 10, 1, f64(0.5)))
	mustSave(t, s, testCheckpoint(2, 20, 1, f64(0.7)))
	mid := testCheckpoint(2, 25, 1, nil)
	mid.MidEpoch = true
	mustSave(t, s, mid)
	l, err := Latest(dir)
	if err != nil || l.Epoch != 2 || l.Step != 25 || !l.MidEpoch || l.Metric != nil || l.Version != "test" {
		t.Fatalf("Latest: %+v, %v", l, err)
	}
	b, err := Best(dir)
	if err != nil || b.Epoch != 2 || b.Step != 20 || b.Metric == nil || *b.Metric != 0.7 {
		t.Fatalf("Best: %+v, %v", b, err)
	}
	// A newest save whose manifest is damaged is passed over.
	if err := os.WriteFile(filepath.Join(l.Dir, manifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Latest(dir); err != nil || l.Step != 20 {
		t.Errorf("Latest past a damaged manifest: %+v, %v", l, err)
	}
}
