package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	run, err := NewRunDir(t.TempDir(), "unet3d", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Saver{Dir: run.Checkpoints, Policy: config.Checkpoint{BestMode: "max", KeepRecent: 2}}
	saved := mustSave(t, s, testCheckpoint(3, 300, 1, f64(0.75)))
	if !saved.Best || filepath.Base(saved.Dir) != "ckpt-e0003-s000000300" {
		t.Errorf("saved = %+v", saved)
	}
	wantModel, wantOpt := testModel(300, 1)
	for _, ref := range []string{
		saved.Dir,
		filepath.Join(run.Checkpoints, "last"),
		filepath.Join(run.Checkpoints, "best"),
		filepath.Join(saved.Dir, "model.safetensors"),
	} {
		model, opt := empty(wantModel), empty(wantOpt)
		l, err := Load(ref, model, opt)
		if err != nil {
			t.Fatalf("Load(%s): %v", ref, err)
		}
		if err := verify(l, model, opt); err != nil {
			t.Error(err)
		}
		if l.Dir != saved.Dir || l.Epoch != 3 || l.Metric == nil || *l.Metric != 0.75 || l.Version != "test" || l.SavedAt.IsZero() {
			t.Errorf("Load(%s) = %+v", ref, l)
		}
	}
	// Data given by the caller is filled in place.
	model, _ := testModel(0, 1)
	buf := model[0].Data
	l, err := LoadLatest(run.Checkpoints, model, nil)
	if err != nil {
		t.Fatal(err)
	}
	if &model[0].Data[0] != &buf[0] || model[0].Data[5] != fill(300, 0, 5) || len(l.Skipped) != 0 {
		t.Errorf("LoadLatest did not fill the given buffer in place (skipped %v)", l.Skipped)
	}
}

// TestWeightsArePyTorchStateDict: model.safetensors holds exactly the
// weights, with their names, shapes and float32 values, and "format": "pt".
func TestWeightsArePyTorchStateDict(t *testing.T) {
	s := &Saver{Dir: t.TempDir(), Policy: config.Checkpoint{KeepRecent: 2}}
	saved := mustSave(t, s, testCheckpoint(1, 10, 1, nil))
	f, err := safetensors.Open(filepath.Join(saved.Dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	model, _ := testModel(10, 1)
	if got := f.Tensors(); len(got) != len(model) {
		t.Fatalf("%d tensors in model.safetensors, want %d", len(got), len(model))
	}
	for _, w := range model {
		info, ok := f.Lookup(w.Name)
		if !ok || info.DType != safetensors.F32 || !slices.Equal(info.Shape, w.Shape) {
			t.Errorf("%s: %+v", w.Name, info)
			continue
		}
		got := make([]float32, len(w.Data))
		f.ReadFloat32(w.Name, got)
		if !slices.Equal(got, w.Data) {
			t.Errorf("%s: values differ", w.Name)
		}
	}
	if md := f.Metadata(); md["format"] != "pt" || md["voxtrain.step"] != "10" || md["voxtrain.version"] != "test" {
		t.Errorf("metadata %v", md)
	}
}

// TestOutputDirDoesNotExist: nothing of the run directory exists yet.
func TestOutputDirDoesNotExist(t *testing.T) {
	out := filepath.Join(t.TempDir(), "does", "not", "exist")
	run, err := NewRunDir(out, "exp", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if run.Path != filepath.Join(out, "exp", "fold_0", "run_2") {
		t.Errorf("run dir %s", run.Path)
	}
	for _, d := range []string{run.Checkpoints, run.Logs, run.Plots} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	// A Saver on a directory nobody created works too.
	s := &Saver{Dir: filepath.Join(t.TempDir(), "a", "b", "checkpoints"), Policy: config.Checkpoint{KeepRecent: 2}}
	mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	if _, err := LoadLatest(s.Dir, nil, nil); err == nil {
		t.Error("LoadLatest with no expected tensors should report the file's tensors as unexpected")
	}
}

// TestCheckpointDirRemovedMidRun: checkpoints/ (or the whole run
// directory) deleted between saves does not fail the next save.
func TestCheckpointDirRemovedMidRun(t *testing.T) {
	run, err := NewRunDir(t.TempDir(), "exp", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Saver{Dir: run.Checkpoints, Policy: config.Checkpoint{BestMode: "min", KeepRecent: 2}}
	mustSave(t, s, testCheckpoint(1, 10, 1, f64(0.5)))
	if err := os.RemoveAll(run.Checkpoints); err != nil {
		t.Fatal(err)
	}
	saved := mustSave(t, s, testCheckpoint(2, 20, 1, f64(0.9)))
	// The old best is gone with the directory: the new save becomes best
	// even though its metric is worse than the deleted one's.
	if !saved.Best {
		t.Error("after checkpoints/ was removed the next save with a metric should become best")
	}
	if err := os.RemoveAll(run.Path); err != nil {
		t.Fatal(err)
	}
	mustSave(t, s, testCheckpoint(3, 30, 1, nil))
	mustLoadLatest(t, run.Checkpoints, 30)
	if err := run.MkdirAll(); err != nil {
		t.Fatal(err)
	}
}

func TestSameStepSavedTwice(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{KeepRecent: 2}}
	first := mustSave(t, s, testCheckpoint(2, 20, 1, nil))
	c := testCheckpoint(2, 20, 1, nil)
	c.Config = "seed: 20\n" // same content, second save
	second := mustSave(t, s, c)
	if first.Dir == second.Dir {
		t.Fatal("second save overwrote the first")
	}
	l, err := LoadLatest(dir, nil, nil)
	if err == nil {
		t.Fatal("want a mismatch with no expected tensors")
	}
	model, _ := testModel(0, 1)
	if l, err = LoadLatest(dir, model, nil); err != nil || l.Dir != second.Dir {
		t.Errorf("latest = %v, %v; want %s", l, err, second.Dir)
	}
	if readPointer(dir, "last") != filepath.Base(second.Dir) {
		t.Error("last does not point at the second save")
	}
}

func TestStaleTemporariesRemoved(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".tmp-ckpt-e0001-s000000001-abc", ".trash-ckpt-e0000-s000000000-def"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "model.safetensors"), []byte("partial"), 0o644)
	}
	s := &Saver{Dir: dir, Policy: config.Checkpoint{KeepRecent: 2}}
	mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	if got := testutil.DirNames(t, dir); !slices.Equal(got, []string{"ckpt-e0001-s000000001", "last"}) {
		t.Errorf("left %v", got)
	}
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{KeepRecent: 2}}
	mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	bad := testCheckpoint(2, 2, 1, nil)
	bad.Model[1].Data = bad.Model[1].Data[:3]
	_, err := s.Save(bad)
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), `"encoder.0.conv.bias"`) {
		t.Errorf("bad tensor: %v", err)
	}
	bad = testCheckpoint(2, 2, 1, nil)
	bad.State = func() {}
	if _, err := s.Save(bad); err == nil || !strings.Contains(err.Error(), "state") {
		t.Errorf("bad state: %v", err)
	}
	// Nothing of the failed saves is left, and last still names the first.
	if got := testutil.DirNames(t, dir); !slices.Equal(got, []string{"ckpt-e0001-s000000001", "last"}) {
		t.Errorf("left %v", got)
	}
	for _, p := range []config.Checkpoint{{BestMode: "higher"}, {EveryEpochs: -1}, {Keep: -1}, {KeepRecent: -2}} {
		if _, err := (&Saver{Dir: dir, Policy: p}).Save(testCheckpoint(3, 3, 1, nil)); err == nil || !strings.Contains(err.Error(), "checkpoint policy") {
			t.Errorf("policy %+v: %v", p, err)
		}
	}
	if _, err := (&Saver{}).Save(testCheckpoint(3, 3, 1, nil)); err == nil {
		t.Error("empty Dir: no error")
	}
	if _, err := s.Save(&Checkpoint{Step: -1}); err == nil {
		t.Error("negative step: no error")
	}
	// An unwritable location fails with the path in the error.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := (&Saver{Dir: filepath.Join(file, "ck"), Policy: config.Checkpoint{KeepRecent: 2}}).Save(testCheckpoint(1, 1, 1, nil)); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("dir under a file: %v", err)
	}
}
