package checkpoint

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/nn"
)

// Saver writes checkpoints into a run's checkpoints directory and applies
// the retention policy, the config's checkpoint: section (start from
// config.Default().Checkpoint). Set Dir and Policy; the zero value of the
// rest is ready. A Saver keeps no state between saves beyond what is on disk (the
// best metric is read back from the best checkpoint), so a resumed run
// continues with the same best and the same numbering. Save may be called
// from several goroutines; calls are serialised. Do not copy a Saver after
// first use.
type Saver struct {
	Dir    string // the run's checkpoints directory, e.g. RunDir.Checkpoints
	Policy config.Checkpoint

	mu sync.Mutex
}

// entry is a checkpoint directory found on disk.
type entry struct {
	name string
	step int64 // from the name, so even a damaged one can be ordered
	m    *manifest
	err  error // why the manifest could not be read
}

// newer orders entries newest first: by step, then by save sequence.
func newer(a, b entry) int {
	if c := cmp.Compare(b.step, a.step); c != 0 {
		return c
	}
	var sa, sb int64
	if a.m != nil {
		sa = a.m.Seq
	}
	if b.m != nil {
		sb = b.m.Seq
	}
	if c := cmp.Compare(sb, sa); c != 0 {
		return c
	}
	return strings.Compare(b.name, a.name)
}

// dirName is a checkpoint's directory name; the step in it orders saves.
func dirName(epoch int, step int64) string {
	return fmt.Sprintf("ckpt-e%04d-s%09d", epoch, step)
}

// stepOf parses the step out of a checkpoint directory name.
func stepOf(name string) (int64, bool) {
	if !strings.HasPrefix(name, "ckpt-e") {
		return 0, false
	}
	_, rest, ok := strings.Cut(name, "-s")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "-")
	step, err := strconv.ParseInt(digits, 10, 64)
	return step, err == nil && step >= 0
}

// scan lists the checkpoint directories in dir, newest first. A missing
// dir has none.
func scan(dir string) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, de := range des {
		step, ok := stepOf(de.Name())
		if !ok || !de.IsDir() {
			continue
		}
		e := entry{name: de.Name(), step: step}
		e.m, e.err = readManifest(filepath.Join(dir, de.Name()))
		es = append(es, e)
	}
	slices.SortFunc(es, newer)
	return es, nil
}

func readManifest(dir string) (*manifest, error) {
	path := filepath.Join(dir, manifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if m.Format != manifestFormat {
		return nil, fmt.Errorf("read %s: format %q, want %q", path, m.Format, manifestFormat)
	}
	return &m, nil
}

// Save writes c as a new checkpoint, points last (and best, when its metric
// improves on the best so far) at it, and prunes per the policy. The
// checkpoints directory is created first if it does not exist. When Save
// returns an error, no pointer has moved to a partial checkpoint and
// earlier checkpoints are untouched.
func (s *Saver) Save(c *Checkpoint) (Saved, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		return Saved{}, errors.New("checkpoint: Saver.Dir is empty")
	}
	if c == nil {
		return Saved{}, errors.New("checkpoint: Save of a nil Checkpoint")
	}
	if err := s.Policy.Validate(); err != nil {
		return Saved{}, fmt.Errorf("checkpoint policy: %w", err)
	}
	if c.Epoch < 0 || c.Step < 0 {
		return Saved{}, fmt.Errorf("checkpoint: negative epoch %d or step %d", c.Epoch, c.Step)
	}
	// Re-created on every save: a deleted checkpoints/ must not fail a run.
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return Saved{}, fmt.Errorf("create checkpoint directory: %w", err)
	}
	var saved Saved
	saved.Warnings = removeStale(s.Dir)

	existing, err := scan(s.Dir)
	if err != nil {
		return Saved{}, fmt.Errorf("list checkpoints: %w", err)
	}
	m := &manifest{
		Format:   manifestFormat,
		Epoch:    c.Epoch,
		Step:     c.Step,
		Seq:      1,
		MidEpoch: c.MidEpoch,
		Metric:   finite(c.Metric),
		Snapshot: s.Policy.EveryEpochs > 0 && !c.MidEpoch && c.Epoch > 0 && c.Epoch%s.Policy.EveryEpochs == 0,
		Version:  c.Version,
		SavedAt:  time.Now().UTC(),
		Files:    map[string]fileSum{},
	}
	taken := map[string]bool{}
	for _, e := range existing {
		taken[e.name] = true
		if e.m != nil && e.m.Seq >= m.Seq {
			m.Seq = e.m.Seq + 1
		}
	}
	name := dirName(c.Epoch, c.Step)
	if taken[name] { // the same step saved again (e.g. right after a resume)
		name = fmt.Sprintf("%s-%d", name, m.Seq)
	}
	final := filepath.Join(s.Dir, name)

	// Not os.MkdirTemp: its 0700 would make checkpoints unreadable to the
	// user's group on a shared cluster; the random name is as unique.
	tmp := atomicfile.TempName(final)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return Saved{}, fmt.Errorf("create checkpoint directory: %w", err)
	}
	if err := writeFiles(tmp, c, m); err != nil {
		os.RemoveAll(tmp)
		return Saved{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return Saved{}, fmt.Errorf("commit checkpoint: %w", err)
	}
	if err := atomicfile.SyncDir(s.Dir); err != nil {
		return Saved{}, err
	}
	saved.Dir, saved.Snapshot = final, m.Snapshot

	if err := setPointer(s.Dir, "last", name); err != nil {
		return saved, err
	}
	if s.Policy.BestMode != "" && m.Metric != nil {
		cur := currentBest(s.Dir)
		if cur == nil || s.Policy.Better(*m.Metric, *cur) {
			if err := setPointer(s.Dir, "best", name); err != nil {
				return saved, err
			}
			saved.Best = true
		}
	}
	pruned, warnings := s.prune()
	saved.Pruned = pruned
	saved.Warnings = append(saved.Warnings, warnings...)
	return saved, nil
}

// writeFiles writes a checkpoint's files into dir, manifest last, fsyncing
// each and then dir.
func writeFiles(dir string, c *Checkpoint, m *manifest) error {
	meta := map[string]string{
		"format":         "pt",
		"voxtrain.epoch": strconv.Itoa(c.Epoch),
		"voxtrain.step":  strconv.FormatInt(c.Step, 10),
	}
	if c.Version != "" {
		meta["voxtrain.version"] = c.Version
	}
	state, err := json.Marshal(c.State)
	if err != nil {
		return fmt.Errorf("checkpoint state: %w", err)
	}
	files := []struct {
		name string
		fill func(io.Writer) error
	}{
		{modelFile, tensorsWriter(c.Model, meta)},
		{optimizerFile, tensorsWriter(c.Optimizer, map[string]string{"format": "pt"})},
		{stateFile, bytesWriter(state)},
	}
	if c.Config != "" {
		files = append(files, struct {
			name string
			fill func(io.Writer) error
		}{configFile, bytesWriter([]byte(c.Config))})
	}
	for _, f := range files {
		sum, err := writeSynced(filepath.Join(dir, f.name), f.fill)
		if err != nil {
			return err
		}
		m.Files[f.name] = sum
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint manifest: %w", err)
	}
	if _, err := writeSynced(filepath.Join(dir, manifestFile), bytesWriter(append(mb, '\n'))); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

func bytesWriter(b []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(b); return err }
}

func tensorsWriter(ts []nn.HostTensor, meta map[string]string) func(io.Writer) error {
	return func(w io.Writer) error {
		st := make([]safetensors.Tensor, len(ts))
		for i, t := range ts {
			st[i] = safetensors.Float32(t.Name, t.Shape, t.Data)
		}
		_, err := safetensors.Write(w, st, meta)
		return err
	}
}

// removeStale deletes what interrupted saves and prunes left behind. Only
// one process saves into a checkpoints directory, and Save holds the lock
// of this one, so every .tmp-* (atomicfile.TempPrefix) and .trash-* entry
// is abandoned.
func removeStale(dir string) []string {
	des, err := os.ReadDir(dir)
	if err != nil {
		return []string{fmt.Sprintf("list %s: %v", dir, err)}
	}
	var warnings []string
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, atomicfile.TempPrefix) || strings.HasPrefix(n, trashPrefix) {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				warnings = append(warnings, fmt.Sprintf("remove stale %s: %v", filepath.Join(dir, n), err))
			}
		}
	}
	return warnings
}

// setPointer atomically makes dir/name point at the checkpoint directory
// target (a name in dir): a relative symbolic link renamed over the old
// one, or, where the filesystem has no symbolic links, a small file holding
// the name, written the same way.
func setPointer(dir, name, target string) error {
	path := filepath.Join(dir, name)
	tmp := atomicfile.TempName(path)
	if err := os.Symlink(target, tmp); err == nil {
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("update %s: %w", path, err)
		}
		return atomicfile.SyncDir(dir)
	}
	if err := atomicfile.WriteFile(path, []byte(target+"\n"), 0o644); err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	return nil
}

// readPointer returns the checkpoint directory name dir/name points at, or
// "" when there is no such pointer.
func readPointer(dir, name string) string {
	path := filepath.Join(dir, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return ""
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		t, err := os.Readlink(path)
		if err != nil {
			return ""
		}
		return filepath.Base(t)
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return filepath.Base(strings.TrimSpace(string(b)))
}

// currentBest is the metric of the checkpoint best points at, nil when
// there is none (or it is gone, e.g. checkpoints/ was deleted mid-run).
func currentBest(dir string) *float64 {
	t := readPointer(dir, "best")
	if t == "" {
		return nil
	}
	m, err := readManifest(filepath.Join(dir, t))
	if err != nil {
		return nil
	}
	return m.Metric
}

// trashPrefix starts the name a pruned checkpoint is renamed to before its
// files are deleted.
const trashPrefix = ".trash-"

// prune removes checkpoints the policy does not keep. A victim is first
// renamed to .trash-* so that it vanishes from the set of checkpoints in
// one atomic step; its files are deleted after.
func (s *Saver) prune() (pruned, warnings []string) {
	es, err := scan(s.Dir)
	if err != nil {
		return nil, []string{fmt.Sprintf("prune: list checkpoints: %v", err)}
	}
	keep := map[string]bool{readPointer(s.Dir, "last"): true, readPointer(s.Dir, "best"): true}
	recent, snaps := 0, 0
	for _, e := range es {
		if e.m == nil {
			keep[e.name] = true // damaged or foreign: not ours to judge
			continue
		}
		if recent < s.Policy.KeepRecent {
			keep[e.name] = true
			recent++
		}
		if e.m.Snapshot && s.Policy.EveryEpochs > 0 && (s.Policy.Keep == 0 || snaps < s.Policy.Keep) {
			keep[e.name] = true
			snaps++
		}
	}
	for _, e := range es {
		if keep[e.name] {
			continue
		}
		path := filepath.Join(s.Dir, e.name)
		trash := filepath.Join(s.Dir, trashPrefix+e.name+"-"+rand.Text())
		if err := os.Rename(path, trash); err != nil {
			warnings = append(warnings, fmt.Sprintf("prune %s: %v", path, err))
			continue
		}
		if err := atomicfile.SyncDir(s.Dir); err != nil {
			warnings = append(warnings, fmt.Sprintf("prune %s: %v", path, err))
		}
		if err := os.RemoveAll(trash); err != nil {
			warnings = append(warnings, fmt.Sprintf("prune %s: %v", path, err))
		}
		pruned = append(pruned, path)
	}
	return pruned, warnings
}
