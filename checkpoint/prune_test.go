package checkpoint

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

func TestPruneKeepsLastBestAndSnapshots(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{BestMode: "max", EveryEpochs: 3, Keep: 2, KeepRecent: 1}}
	metrics := []float64{0.1, 0.5, 0.4, 0.9, 0.3, 0.2, 0.8, 0.7, 0.6, 0.5, 0.4}
	var pruned []string
	for e, m := range metrics {
		epoch := e + 1
		saved := mustSave(t, s, testCheckpoint(epoch, int64(epoch*10), 1, f64(m)))
		if saved.Snapshot != (epoch%3 == 0) {
			t.Errorf("epoch %d: snapshot = %v", epoch, saved.Snapshot)
		}
		if saved.Best != (epoch == 1 || epoch == 2 || epoch == 4) {
			t.Errorf("epoch %d: best = %v", epoch, saved.Best)
		}
		pruned = append(pruned, saved.Pruned...)
	}
	// Left: last (e11), best (e4), the two newest snapshots (e6, e9).
	want := []string{"best", "ckpt-e0004-s000000040", "ckpt-e0006-s000000060", "ckpt-e0009-s000000090", "ckpt-e0011-s000000110", "last"}
	if got := testutil.DirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	if len(pruned) != 7 {
		t.Errorf("pruned %d: %v", len(pruned), pruned)
	}
	if got := readPointer(dir, "best"); got != "ckpt-e0004-s000000040" {
		t.Errorf("best -> %s", got)
	}
	// A resumed run (a new Saver) keeps the same best.
	s2 := &Saver{Dir: dir, Policy: s.Policy}
	if saved := mustSave(t, s2, testCheckpoint(12, 120, 1, f64(0.85))); saved.Best {
		t.Error("0.85 should not beat the best 0.9 after a resume")
	}
	if saved := mustSave(t, s2, testCheckpoint(13, 130, 1, f64(0.95))); !saved.Best {
		t.Error("0.95 should beat 0.9")
	}
	// Keep 0 keeps every snapshot; mid-epoch saves are never snapshots.
	dir2 := t.TempDir()
	s3 := &Saver{Dir: dir2, Policy: config.Checkpoint{EveryEpochs: 2, KeepRecent: 1}}
	for epoch := 1; epoch <= 6; epoch++ {
		c := testCheckpoint(epoch, int64(epoch), 1, nil)
		c.MidEpoch = epoch == 4
		mustSave(t, s3, c)
	}
	want = []string{"ckpt-e0002-s000000002", "ckpt-e0006-s000000006", "last"}
	if got := testutil.DirNames(t, dir2); !slices.Equal(got, want) {
		t.Errorf("keep-all: left %v, want %v", got, want)
	}
}

func TestDefaultPolicyKeepsTwoNewest(t *testing.T) {
	dir := t.TempDir()
	s := Saver{Dir: dir, Policy: config.Default().Checkpoint}
	for step := int64(1); step <= 4; step++ {
		mustSave(t, &s, testCheckpoint(int(step), step, 1, f64(float64(step))))
	}
	want := []string{"best", "ckpt-e0003-s000000003", "ckpt-e0004-s000000004", "last"}
	if got := testutil.DirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
}

func TestBestMetricEdgeCases(t *testing.T) {
	s := &Saver{Dir: t.TempDir(), Policy: config.Checkpoint{BestMode: "min", KeepRecent: 2}}
	if mustSave(t, s, testCheckpoint(1, 1, 1, nil)).Best {
		t.Error("no metric: not best")
	}
	if mustSave(t, s, testCheckpoint(2, 2, 1, f64(math.NaN()))).Best {
		t.Error("NaN metric: not best")
	}
	if !mustSave(t, s, testCheckpoint(3, 3, 1, f64(2))).Best {
		t.Error("first metric: best")
	}
	if !mustSave(t, s, testCheckpoint(4, 4, 1, f64(1))).Best {
		t.Error("lower metric in min mode: best")
	}
	if mustSave(t, s, testCheckpoint(5, 5, 1, f64(1))).Best {
		t.Error("equal metric: not best")
	}
	if mustSave(t, s, testCheckpoint(6, 6, 1, f64(math.Inf(-1)))).Best {
		t.Error("infinite metric: not best")
	}
	model, _ := testModel(0, 1)
	l, err := Load(filepath.Join(s.Dir, "best"), model, nil)
	if err != nil || l.Step != 4 {
		t.Errorf("best: %+v %v", l, err)
	}
}
