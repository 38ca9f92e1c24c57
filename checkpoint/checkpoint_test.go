package checkpoint

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	run, err := NewRun(t.TempDir(), "unet3d", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Saver{Dir: run.Checkpoints, Policy: Policy{BestMode: "max"}}
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
	s := &Saver{Dir: t.TempDir()}
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
	run, err := NewRun(out, "exp", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if run.Dir != filepath.Join(out, "exp", "fold_0", "run_2") {
		t.Errorf("run dir %s", run.Dir)
	}
	for _, d := range []string{run.Checkpoints, run.Logs, run.Plots} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	// A Saver on a directory nobody created works too.
	s := &Saver{Dir: filepath.Join(t.TempDir(), "a", "b", "checkpoints")}
	mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	if _, err := LoadLatest(s.Dir, nil, nil); err == nil {
		t.Error("LoadLatest with no expected tensors should report the file's tensors as unexpected")
	}
}

// TestCheckpointDirRemovedMidRun: checkpoints/ (or the whole run
// directory) deleted between saves does not fail the next save.
func TestCheckpointDirRemovedMidRun(t *testing.T) {
	run, err := NewRun(t.TempDir(), "exp", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Saver{Dir: run.Checkpoints, Policy: Policy{BestMode: "min"}}
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
	if err := os.RemoveAll(run.Dir); err != nil {
		t.Fatal(err)
	}
	mustSave(t, s, testCheckpoint(3, 30, 1, nil))
	model, opt := testModel(0, 1)
	l, err := LoadLatest(run.Checkpoints, model, opt)
	if err != nil {
		t.Fatal(err)
	}
	if l.Step != 30 {
		t.Errorf("latest step %d, want 30", l.Step)
	}
	if err := verify(l, model, opt); err != nil {
		t.Error(err)
	}
	if err := run.MkdirAll(); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func TestPruneKeepsLastBestAndSnapshots(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: Policy{BestMode: "max", EveryEpochs: 3, Keep: 2, KeepRecent: 1}}
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
	if got := names(t, dir); !slices.Equal(got, want) {
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
	s3 := &Saver{Dir: dir2, Policy: Policy{EveryEpochs: 2, KeepRecent: 1}}
	for epoch := 1; epoch <= 6; epoch++ {
		c := testCheckpoint(epoch, int64(epoch), 1, nil)
		c.MidEpoch = epoch == 4
		mustSave(t, s3, c)
	}
	want = []string{"ckpt-e0002-s000000002", "ckpt-e0006-s000000006", "last"}
	if got := names(t, dir2); !slices.Equal(got, want) {
		t.Errorf("keep-all: left %v, want %v", got, want)
	}
}

func TestDefaultPolicyKeepsTwoNewest(t *testing.T) {
	dir := t.TempDir()
	var s Saver
	s.Dir = dir
	for step := int64(1); step <= 4; step++ {
		mustSave(t, &s, testCheckpoint(int(step), step, 1, f64(float64(step))))
	}
	want := []string{"ckpt-e0003-s000000003", "ckpt-e0004-s000000004", "last"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
}

func TestBestMetricEdgeCases(t *testing.T) {
	s := &Saver{Dir: t.TempDir(), Policy: Policy{BestMode: "min"}}
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

func TestMismatchErrors(t *testing.T) {
	s := &Saver{Dir: t.TempDir()}
	saved := mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	model, opt := testModel(7, 1)
	model = append(model[:1], model[2:]...)                              // drop encoder.0.conv.bias: unexpected
	model = append(model, Tensor{Name: "extra.weight", Shape: []int{3}}) // missing
	model[0].Shape = []int{4, 2, 3, 3, 3}                                // mis-shaped
	model[0].Data = make([]float32, 216)
	before := slices.Clone(model[1].Data)
	_, err := Load(saved.Dir, model, opt)
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want *MismatchError", err)
	}
	file := filepath.Join(saved.Dir, "model.safetensors")
	if me.File != file || !slices.Equal(me.Missing, []string{"extra.weight"}) || !slices.Equal(me.Unexpected, []string{"encoder.0.conv.bias"}) || len(me.Mismatched) != 1 {
		t.Errorf("%+v", me)
	}
	msg := err.Error()
	for _, want := range []string{file, "1 missing from the file (extra.weight)", "1 unexpected in the file (encoder.0.conv.bias)", "encoder.0.conv.weight: shape [8 1 3 3 3] in the file, [4 2 3 3 3] expected"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !slices.Equal(model[1].Data, before) {
		t.Error("a failed load changed the model's data")
	}
	// LoadLatest does not fall back past a mismatch: an older checkpoint
	// would not fit either, and silently loading it would be wrong.
	if _, err := LoadLatest(s.Dir, model, opt); !errors.As(err, &me) {
		t.Errorf("LoadLatest: %v", err)
	}
	// Optimiser state is checked too; nil skips it.
	m2, o2 := testModel(1, 1)
	o2 = o2[:2]
	if _, err := Load(saved.Dir, m2, o2); !errors.As(err, &me) || !strings.Contains(err.Error(), "optimizer.safetensors") || len(me.Unexpected) != 3 {
		t.Errorf("optimizer mismatch: %v", err)
	}
	if _, err := Load(saved.Dir, m2, nil); err != nil {
		t.Errorf("nil optimizer: %v", err)
	}
	// Data of the wrong length is the caller's bug, reported as such.
	m2[0].Data = m2[0].Data[:3]
	if _, err := Load(saved.Dir, m2, nil); err == nil || !strings.Contains(err.Error(), "its Data has 3") {
		t.Errorf("short Data: %v", err)
	}
	// More than 8 names are summarised.
	var many []Tensor
	for i := range 12 {
		many = append(many, Tensor{Name: "x" + string(rune('a'+i)), Shape: []int{1}})
	}
	if _, err := Load(saved.Dir, many, nil); err == nil || !strings.Contains(err.Error(), "12 missing from the file (xa, xb, xc, xd, xe, xf, xg, xh, and 4 more)") {
		t.Errorf("many: %v", err)
	}
}

func corrupt(t *testing.T, path string, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncate":
		b = b[:len(b)/2]
	case "flip":
		b[len(b)-3] ^= 0x40
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadLatestFallsBackPastDamage(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: Policy{KeepRecent: 10}}
	var dirs []string
	for step := int64(1); step <= 5; step++ {
		dirs = append(dirs, mustSave(t, s, testCheckpoint(int(step), step, 1, nil)).Dir)
	}
	corrupt(t, filepath.Join(dirs[4], "model.safetensors"), "truncate")     // step 5: a bad disk
	corrupt(t, filepath.Join(dirs[3], "optimizer.safetensors"), "flip")     // step 4: silent bit flip
	corrupt(t, filepath.Join(dirs[2], "manifest.json"), "truncate")         // step 3: unreadable manifest
	if err := os.Remove(filepath.Join(dirs[1], "state.json")); err != nil { // step 2: a file lost
		t.Fatal(err)
	}
	model, opt := testModel(0, 1)
	l, err := LoadLatest(dir, model, opt)
	if err != nil {
		t.Fatal(err)
	}
	if l.Step != 1 {
		t.Fatalf("loaded step %d, want 1", l.Step)
	}
	if err := verify(l, model, opt); err != nil {
		t.Error(err)
	}
	if len(l.Skipped) != 4 {
		t.Fatalf("skipped %v", l.Skipped)
	}
	for i, want := range []string{"truncated?", "CRC-32C", "manifest.json", "state.json"} {
		if !strings.Contains(l.Skipped[i], want) || !strings.Contains(l.Skipped[i], dirs[4-i]) {
			t.Errorf("skipped[%d] = %q, want it to name %s and %q", i, l.Skipped[i], dirs[4-i], want)
		}
	}
	// Weights-only loads do not read the optimiser, so step 4 is usable for them.
	l, err = LoadLatest(dir, model, nil)
	if err != nil || l.Step != 4 {
		t.Errorf("weights only: step %v, %v", l, err)
	}
	// An explicit path does not fall back: it reports the damage.
	if _, err := Load(dirs[4], model, opt); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("Load of a truncated checkpoint: %v", err)
	}
	corrupt(t, filepath.Join(dirs[0], "model.safetensors"), "flip")
	if _, err := LoadLatest(dir, model, opt); err == nil || !strings.Contains(err.Error(), "no usable checkpoint") {
		t.Errorf("all damaged: %v", err)
	}
}

func TestLoadLatestNoCheckpoint(t *testing.T) {
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		if _, err := LoadLatest(dir, nil, nil); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("%s: %v", dir, err)
		}
	}
	// An interrupted save (only a .tmp-* directory) is not a checkpoint.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".tmp-ckpt-e0001-s000000001-x"), 0o755)
	if _, err := LoadLatest(dir, nil, nil); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("tmp only: %v", err)
	}
}

func TestSameStepSavedTwice(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir}
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
	s := &Saver{Dir: dir}
	mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	if got := names(t, dir); !slices.Equal(got, []string{"ckpt-e0001-s000000001", "last"}) {
		t.Errorf("left %v", got)
	}
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir}
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
	if got := names(t, dir); !slices.Equal(got, []string{"ckpt-e0001-s000000001", "last"}) {
		t.Errorf("left %v", got)
	}
	for _, p := range []Policy{{BestMode: "higher"}, {EveryEpochs: -1}, {Keep: -1}, {KeepRecent: -2}} {
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
	if _, err := (&Saver{Dir: filepath.Join(file, "ck")}).Save(testCheckpoint(1, 1, 1, nil)); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("dir under a file: %v", err)
	}
}

func TestLoadBareWeightsAndPointerFiles(t *testing.T) {
	dir := t.TempDir()
	model, _ := testModel(42, 1)
	st := make([]safetensors.Tensor, len(model))
	for i, m := range model {
		st[i] = safetensors.Float32(m.Name, m.Shape, m.Data)
	}
	path := filepath.Join(dir, "exported.safetensors")
	f, _ := os.Create(path)
	if _, err := safetensors.Write(f, st, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := empty(model)
	l, err := Load(path, got, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != nil || !slices.Equal(got[3].Data, model[3].Data) {
		t.Errorf("bare weights: %+v", l)
	}
	if _, err := Load(path, got, []Tensor{}); err == nil || !strings.Contains(err.Error(), "no optimiser state") {
		t.Errorf("bare weights with optimizer: %v", err)
	}
	corrupt(t, path, "truncate")
	if _, err := Load(path, got, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated bare weights: %v", err)
	}

	// Pointer files, as written where symbolic links are not available.
	s := &Saver{Dir: filepath.Join(dir, "ck")}
	saved := mustSave(t, s, testCheckpoint(1, 5, 1, nil))
	ptr := filepath.Join(s.Dir, "last-file")
	if err := atomicfile.WriteFile(ptr, []byte(filepath.Base(saved.Dir)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, o2 := testModel(0, 1)
	if l, err := Load(ptr, m2, o2); err != nil || l.Dir != saved.Dir {
		t.Errorf("pointer file: %v %v", l, err)
	}
	if _, err := Load(s.Dir, m2, o2); err == nil || !strings.Contains(err.Error(), "directory of checkpoints") {
		t.Errorf("checkpoints dir: %v", err)
	}
	os.WriteFile(ptr, []byte("nonexistent\n"), 0o644)
	if _, err := Load(ptr, m2, o2); err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Errorf("dangling pointer file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope"), m2, o2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
}

func TestRunPaths(t *testing.T) {
	r, err := RunPaths("out", "Task04", 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Run{
		Dir:         filepath.Join("out", "Task04", "fold_3", "run_7"),
		Checkpoints: filepath.Join("out", "Task04", "fold_3", "run_7", "checkpoints"),
		Logs:        filepath.Join("out", "Task04", "fold_3", "run_7", "logs"),
		Plots:       filepath.Join("out", "Task04", "fold_3", "run_7", "plots"),
		Config:      filepath.Join("out", "Task04", "fold_3", "run_7", "config.yaml"),
		TrainLog:    filepath.Join("out", "Task04", "fold_3", "run_7", "train.log"),
		Metrics:     filepath.Join("out", "Task04", "fold_3", "run_7", "metrics.jsonl"),
	}
	if r != want {
		t.Errorf("%+v", r)
	}
	for _, c := range []struct {
		out, exp  string
		fold, run int
	}{{"", "e", 0, 0}, {"o", "", 0, 0}, {"o", "..", 0, 0}, {"o", "a/b", 0, 0}, {"o", "e", -2, 0}, {"o", "e", 0, -1}} {
		if _, err := RunPaths(c.out, c.exp, c.fold, c.run); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if r, err := RunPaths("o", "e", -1, 0); err != nil || r.Dir != filepath.Join("o", "e", "fold_all", "run_0") {
		t.Errorf("fold -1 (every case): %+v %v", r, err)
	}
	if _, err := os.Stat("out"); !errors.Is(err, os.ErrNotExist) {
		t.Error("RunPaths touched the disk")
	}
}

// TestPointersNeverMissingOrPartial reads last and best in a tight loop
// while two goroutines save through one Saver: once a save has returned,
// the pointers must always exist and name a committed checkpoint (a
// pointer replaced by remove-then-create would be seen missing here).
func TestPointersNeverMissingOrPartial(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: Policy{BestMode: "max", KeepRecent: 3}}
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
