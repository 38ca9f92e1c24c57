package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/nn"
)

func TestMismatchErrors(t *testing.T) {
	s := &Saver{Dir: t.TempDir(), Policy: config.Checkpoint{KeepRecent: 2}}
	saved := mustSave(t, s, testCheckpoint(1, 1, 1, nil))
	model, opt := testModel(7, 1)
	model = append(model[:1], model[2:]...)                                        // drop encoder.0.conv.bias: unexpected
	model = append(model, nn.HostTensor{Name: "extra.weight", Shape: nn.Shape{3}}) // missing
	model[0].Shape = []int{4, 2, 3, 3, 3}                                          // mis-shaped
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
	var many []nn.HostTensor
	for i := range 12 {
		many = append(many, nn.HostTensor{Name: "x" + string(rune('a'+i)), Shape: nn.Shape{1}})
	}
	if _, err := Load(saved.Dir, many, nil); err == nil || !strings.Contains(err.Error(), "12 missing from the file (xa, xb, xc, xd, xe, xf, xg, xh, and 4 more)") {
		t.Errorf("many: %v", err)
	}
}

func TestLoadLatestFallsBackPastDamage(t *testing.T) {
	dir := t.TempDir()
	s := &Saver{Dir: dir, Policy: config.Checkpoint{KeepRecent: 10}}
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
	l := mustLoadLatest(t, dir, 1)
	if len(l.Skipped) != 4 {
		t.Fatalf("skipped %v", l.Skipped)
	}
	for i, want := range []string{"truncated?", "CRC-32C", "manifest.json", "state.json"} {
		if !strings.Contains(l.Skipped[i], want) || !strings.Contains(l.Skipped[i], dirs[4-i]) {
			t.Errorf("skipped[%d] = %q, want it to name %s and %q", i, l.Skipped[i], dirs[4-i], want)
		}
	}
	// Weights-only loads do not read the optimiser, so step 4 is usable for them.
	model, opt := testModel(0, 1)
	l, err := LoadLatest(dir, model, nil)
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
	if _, err := Load(path, got, []nn.HostTensor{}); !errors.Is(err, ErrBareWeights) || !strings.Contains(err.Error(), path) {
		t.Errorf("bare weights with optimizer: %v", err)
	}
	corrupt(t, path, "truncate")
	if _, err := Load(path, got, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated bare weights: %v", err)
	}

	// Pointer files, as written where symbolic links are not available.
	s := &Saver{Dir: filepath.Join(dir, "ck"), Policy: config.Checkpoint{KeepRecent: 2}}
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

// TestLoadMatching: the tensors whose name and shape match are filled
// from a checkpoint, its pointer, its model.safetensors or a bare file
// alike; the rest keep their Data and are listed (missing, mismatched
// with both shapes, unused), with the file read and its SHA-256. A run
// directory is refused naming its checkpoints.
func TestLoadMatching(t *testing.T) {
	s := &Saver{Dir: filepath.Join(t.TempDir(), "run", "checkpoints"), Policy: config.Checkpoint{KeepRecent: 2}}
	saved := mustSave(t, s, testCheckpoint(3, 30, 1, nil))
	src, _ := testModel(30, 1)
	file := filepath.Join(saved.Dir, "model.safetensors")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	bare := filepath.Join(t.TempDir(), "bare.safetensors")
	if err := os.WriteFile(bare, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, file, dir string }{
		{saved.Dir, file, saved.Dir},
		{filepath.Join(s.Dir, "last"), file, saved.Dir},
		{file, file, saved.Dir},
		{bare, bare, bare},
	} {
		want, _ := testModel(0, 1)
		want[3].Shape, want[3].Data = nn.Shape{3, 8, 1, 1, 1}, make([]float32, 24) // a head of 3 classes
		want[4].Shape, want[4].Data = nn.Shape{3}, []float32{7, 7, 7}
		want = append(want[:1], want[2:]...)                                                                // no encoder.0.conv.bias: unused
		want = append(want, nn.HostTensor{Name: "extra.weight", Shape: nn.Shape{2}, Data: []float32{5, 5}}) // missing
		m, err := LoadMatching(c.path, want)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if m.File != c.file || m.Dir != c.dir || m.SHA256 != hex.EncodeToString(sum[:]) || m.Diff.File != c.file || m.Exact() {
			t.Errorf("%s: file %q dir %q sha %q exact %v", c.path, m.File, m.Dir, m.SHA256, m.Exact())
		}
		if c.dir == saved.Dir && (m.Step != 30 || m.Epoch != 3) {
			t.Errorf("%s: step %d epoch %d", c.path, m.Step, m.Epoch)
		}
		if !slices.Equal(m.Filled, []string{"encoder.0.conv.weight", "encoder.0.norm.weight"}) ||
			!slices.Equal(m.Diff.Missing, []string{"extra.weight"}) || !slices.Equal(m.Diff.Unexpected, []string{"encoder.0.conv.bias"}) ||
			!slices.Equal(m.Diff.Mismatched, []string{"decoder.seg.weight: shape [2 8 1 1 1] in the file, [3 8 1 1 1] expected",
				"decoder.seg.bias: shape [2] in the file, [3] expected"}) {
			t.Errorf("%s: filled %q, diff %+v", c.path, m.Filled, m.Diff)
		}
		if !slices.Equal(want[0].Data, src[0].Data) || !slices.Equal(want[1].Data, src[2].Data) {
			t.Errorf("%s: matching tensors not filled from the file", c.path)
		}
		if !slices.Equal(want[3].Data, []float32{7, 7, 7}) || !slices.Equal(want[4].Data, []float32{5, 5}) || slices.ContainsFunc(want[2].Data, func(v float32) bool { return v != 0 }) {
			t.Errorf("%s: the tensors not loaded changed", c.path)
		}
	}
	exact, _ := testModel(0, 1)
	if m, err := LoadMatching(bare, exact); err != nil || !m.Exact() || len(m.Filled) != len(exact) || !slices.Equal(exact[3].Data, src[3].Data) {
		t.Errorf("exact: %+v, %v", m, err)
	}
	runDir := filepath.Dir(s.Dir)
	if _, err := LoadMatching(runDir, exact); err == nil || !strings.Contains(err.Error(), "is a run directory") || !strings.Contains(err.Error(), filepath.Join(s.Dir, "best")) {
		t.Errorf("run directory: %v", err)
	}
	notST := filepath.Join(t.TempDir(), "model.safetensors")
	os.WriteFile(notST, []byte("PK\x03\x04 a zip, as torch.save writes"), 0o644)
	if _, err := LoadMatching(notST, exact); err == nil || !strings.Contains(err.Error(), notST) || !strings.Contains(err.Error(), "not a safetensors file") {
		t.Errorf("not safetensors: %v", err)
	}
}
