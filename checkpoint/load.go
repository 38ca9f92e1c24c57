package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
	"github.com/voxtrain/voxtrain/checkpoint/torchpt"
	"github.com/voxtrain/voxtrain/nn"
)

// damagedError marks a checkpoint whose files are missing, truncated or
// corrupt, as opposed to one that is intact but does not fit the model;
// LoadLatest falls back past the former only.
type damagedError struct{ err error }

func (e *damagedError) Error() string { return e.err.Error() }
func (e *damagedError) Unwrap() error { return e.err }

func damaged(err error) error { return &damagedError{err} }

// Load loads the checkpoint at path into model and optimizer. path may be a
// checkpoint directory, a last/best pointer, the model.safetensors inside a
// checkpoint directory, or a bare .safetensors weights file (then only
// model is loaded and optimizer must be nil).
//
// model and optimizer give the expected names and shapes; each tensor's
// Data is filled in place (allocated when nil). Their names and shapes must
// match the files exactly, otherwise a *MismatchError lists every
// difference and nothing is filled. A nil optimizer skips the optimiser
// state (e.g. to evaluate or fine-tune from a checkpoint); a non-nil one,
// even empty, must match. Nothing is filled unless everything checks out.
func Load(path string, model, optimizer []nn.HostTensor) (*Loaded, error) {
	dir, bare, err := locate(path)
	if err != nil {
		return nil, err
	}
	if bare != "" {
		return loadWeights(bare, model, optimizer)
	}
	return loadDir(dir, model, optimizer)
}

// Dir returns the checkpoint directory path names, as Load resolves it:
// path itself, the directory a last/best link or pointer file (file
// systems without links) names, the checkpoint a model.safetensors path
// is in; for a bare weights file, the folder it is in.
func Dir(path string) (string, error) {
	dir, bare, err := locate(path)
	if err != nil {
		return "", err
	}
	if bare != "" {
		return filepath.Dir(bare), nil
	}
	return dir, nil
}

// locate resolves a path Load takes to a checkpoint directory (dir) or a
// bare weights file (bare).
func locate(path string) (dir, bare string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("load checkpoint: %w", err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // report the checkpoint's own name, not "last"
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, manifestFile)); errors.Is(err, os.ErrNotExist) {
			if es, _ := scan(path); len(es) > 0 {
				return "", "", fmt.Errorf("load checkpoint: %s is a directory of checkpoints, not one checkpoint: give one of its ckpt-* directories, its last or best pointer, or load the latest (auto)", path)
			}
			if es, _ := scan(filepath.Join(path, "checkpoints")); len(es) > 0 {
				return "", "", fmt.Errorf("load checkpoint: %s is a run directory, not a checkpoint: give %s or %s", path,
					filepath.Join(path, "checkpoints", "best"), filepath.Join(path, "checkpoints", "last"))
			}
		}
		return path, "", nil
	}
	parent := filepath.Dir(path)
	if isTorchFile(path) {
		return "", path, nil
	}
	if strings.HasSuffix(path, ".safetensors") {
		if filepath.Base(path) == modelFile {
			if _, err := os.Stat(filepath.Join(parent, manifestFile)); err == nil {
				return parent, "", nil
			}
		}
		return "", path, nil
	}
	// A pointer file (on filesystems without symbolic links).
	target := readPointer(parent, filepath.Base(path))
	if target == "" || target == "." {
		return "", "", fmt.Errorf("load checkpoint: %s is neither a checkpoint directory, a pointer to one, a .safetensors file nor a torch.save file (.pt, .pth)", path)
	}
	return filepath.Join(parent, target), "", nil
}

// LoadLatest loads the newest complete checkpoint in dir (a run's
// checkpoints directory) into model and optimizer, as Load does. A newer
// checkpoint that is damaged (missing or truncated files, CRC mismatch,
// unparsable) is skipped with its reason in Loaded.Skipped; one that is
// intact but does not match the expected tensors is an error. When dir
// holds no checkpoint the error wraps ErrNoCheckpoint.
func LoadLatest(dir string, model, optimizer []nn.HostTensor) (*Loaded, error) {
	es, err := scan(dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoCheckpoint, dir)
	}
	var skipped []string
	for _, e := range es {
		path := filepath.Join(dir, e.name)
		if e.err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: damaged: %v", path, e.err))
			continue
		}
		l, err := loadDir(path, model, optimizer)
		var d *damagedError
		if errors.As(err, &d) {
			skipped = append(skipped, fmt.Sprintf("%s: damaged: %v", path, err))
			continue
		}
		if err != nil {
			return nil, err
		}
		l.Skipped = skipped
		return l, nil
	}
	return nil, fmt.Errorf("no usable checkpoint in %s: %s", dir, strings.Join(skipped, "; "))
}

// readVerified reads a file of a checkpoint and checks it against the
// manifest's size and CRC-32C.
func readVerified(dir, name string, m *manifest) ([]byte, error) {
	path := filepath.Join(dir, name)
	want, ok := m.Files[name]
	if !ok {
		return nil, damaged(fmt.Errorf("%s: not listed in %s", path, manifestFile))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, damaged(err)
	}
	if int64(len(b)) != want.Size {
		return nil, damaged(fmt.Errorf("%s: %d bytes, the manifest says %d (truncated?)", path, len(b), want.Size))
	}
	if got := crcHex(crc32.Checksum(b, castagnoli)); got != want.CRC32C {
		return nil, damaged(fmt.Errorf("%s: CRC-32C %s does not match the manifest's %s (corrupt)", path, got, want.CRC32C))
	}
	return b, nil
}

// plan is a checked, not yet applied, load of one safetensors file.
type plan struct {
	r    *safetensors.Reader
	want []nn.HostTensor
}

// check parses a safetensors file held in b and matches it against want.
func check(path string, b []byte, want []nn.HostTensor) (plan, error) {
	r, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), path)
	if err != nil {
		return plan{}, damaged(err)
	}
	return plan{r, want}, match(r, path, want)
}

// match compares the file's tensors with the expected ones.
func match(r *safetensors.Reader, path string, want []nn.HostTensor) error {
	e, _, err := compare(r, path, want)
	if err != nil {
		return err
	}
	if len(e.Missing)+len(e.Unexpected)+len(e.Mismatched) > 0 {
		return e
	}
	return nil
}

// compare lists the differences between the file's tensors and the
// expected ones, and the names of the expected tensors that cannot be
// filled from the file (missing or mismatched). The error is the caller's
// bug (a name expected twice, Data of the wrong length).
func compare(r *safetensors.Reader, path string, want []nn.HostTensor) (*MismatchError, map[string]bool, error) {
	e := &MismatchError{File: path}
	bad := map[string]bool{}
	seen := make(map[string]bool, len(want))
	for _, t := range want {
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("load %s: tensor %q expected twice", path, t.Name)
		}
		seen[t.Name] = true
		if n := safetensors.NumElements(t.Shape); t.Data != nil && len(t.Data) != n {
			return nil, nil, fmt.Errorf("load %s: tensor %q: shape %v needs %d elements, its Data has %d", path, t.Name, t.Shape, n, len(t.Data))
		}
		info, ok := r.Lookup(t.Name)
		switch {
		case !ok:
			e.Missing = append(e.Missing, t.Name)
		case !slices.Equal(info.Shape, t.Shape):
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("%s: shape %v in the file, %v expected", t.Name, info.Shape, []int(t.Shape)))
		case info.DType != safetensors.F32 && info.DType != safetensors.F16 && info.DType != safetensors.BF16 && info.DType != safetensors.F64:
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("%s: dtype %s in the file, a float type expected", t.Name, info.DType))
		default:
			continue
		}
		bad[t.Name] = true
	}
	for _, info := range r.Tensors() {
		if !seen[info.Name] {
			e.Unexpected = append(e.Unexpected, info.Name)
		}
	}
	return e, bad, nil
}

// apply fills the expected tensors from a checked file.
func (p plan) apply() error {
	for i := range p.want {
		t := &p.want[i]
		if t.Data == nil {
			t.Data = make([]float32, safetensors.NumElements(t.Shape))
		}
		if err := p.r.ReadFloat32(t.Name, t.Data); err != nil {
			return err
		}
	}
	return nil
}

func loadDir(dir string, model, optimizer []nn.HostTensor) (*Loaded, error) {
	m, err := readManifest(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, damaged(fmt.Errorf("%s is not a complete checkpoint (no %s)", dir, manifestFile))
		}
		return nil, damaged(err)
	}
	// Verify and check everything before filling anything, so that a
	// failed load (and LoadLatest's fallback) never leaves the model half
	// overwritten.
	var plans []plan
	for _, part := range []struct {
		name string
		want []nn.HostTensor
	}{{modelFile, model}, {optimizerFile, optimizer}} {
		if part.want == nil && part.name == optimizerFile {
			continue
		}
		b, err := readVerified(dir, part.name, m)
		if err != nil {
			return nil, err
		}
		p, err := check(filepath.Join(dir, part.name), b, part.want)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	state, err := readVerified(dir, stateFile, m)
	if err != nil {
		return nil, err
	}
	if !json.Valid(state) {
		return nil, damaged(fmt.Errorf("%s: not valid JSON", filepath.Join(dir, stateFile)))
	}
	var config []byte
	if _, ok := m.Files[configFile]; ok {
		if config, err = readVerified(dir, configFile, m); err != nil {
			return nil, err
		}
	}
	for _, p := range plans {
		if err := p.apply(); err != nil {
			return nil, err
		}
	}
	return &Loaded{
		Dir:      dir,
		Epoch:    m.Epoch,
		Step:     m.Step,
		MidEpoch: m.MidEpoch,
		Metric:   m.Metric,
		Version:  m.Version,
		SavedAt:  m.SavedAt,
		State:    json.RawMessage(state),
		Config:   string(config),
	}, nil
}

// loadWeights loads a bare safetensors weights file (no manifest: e.g. one
// exported from PyTorch).
func loadWeights(path string, model, optimizer []nn.HostTensor) (*Loaded, error) {
	if optimizer != nil {
		return nil, fmt.Errorf("load %s: %w (pass a nil optimizer, or a checkpoint directory)", path, ErrBareWeights)
	}
	b, _, err := readBare(path)
	if err != nil {
		return nil, err
	}
	p, err := check(path, b, model)
	if err != nil {
		return nil, err
	}
	if err := p.apply(); err != nil {
		return nil, err
	}
	return &Loaded{Dir: path}, nil
}

// Matched is what LoadMatching found.
type Matched struct {
	// Loaded describes the source: for a checkpoint its directory, epoch,
	// step, config, ... (no State: it is not read); for a bare weights
	// file Dir is the file.
	Loaded
	// File is the weights file read: a checkpoint's model.safetensors or
	// the bare file; SHA256 is its checksum (hex), for the record.
	File, SHA256 string
	// Filled names the expected tensors loaded from the file, in the
	// caller's order.
	Filled []string
	// Diff lists the rest, as Load's error would: expected tensors the
	// file lacks (Missing) or holds with another shape or a non-float
	// dtype (Mismatched, "name: shape [...] in the file, [...] expected"),
	// and the file's tensors nobody expects (Unexpected). Its File is File.
	Diff MismatchError
}

// Exact reports whether the file matched the expected tensors exactly
// (all filled, nothing left over).
func (m *Matched) Exact() bool {
	return len(m.Diff.Missing)+len(m.Diff.Mismatched)+len(m.Diff.Unexpected) == 0
}

// LoadMatching loads the weights at path (a checkpoint directory, a
// last/best pointer, a model.safetensors inside a checkpoint or a bare
// .safetensors file, as Load) into those tensors of model whose name and
// shape match the file's, and reports the others in Matched.Diff instead
// of failing: the caller decides (fine-tuning keeps the fresh
// initialisation of a head whose class count changed). The others' Data
// is left as it was. A checkpoint's model.safetensors is verified against
// its manifest as Load verifies it; errors are about the files (missing,
// damaged, not safetensors) and name them.
func LoadMatching(path string, model []nn.HostTensor) (*Matched, error) {
	dir, bare, err := locate(path)
	if err != nil {
		return nil, err
	}
	m := &Matched{}
	var b []byte
	if bare != "" {
		m.Dir, m.File = bare, bare
		if b, m.SHA256, err = readBare(bare); err != nil {
			return nil, err
		}
	} else {
		mf, err := readManifest(dir)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s is not a complete checkpoint (no %s)", dir, manifestFile)
			}
			return nil, err
		}
		m.Loaded = Loaded{Dir: dir, Epoch: mf.Epoch, Step: mf.Step, MidEpoch: mf.MidEpoch, Metric: mf.Metric, Version: mf.Version, SavedAt: mf.SavedAt}
		m.File = filepath.Join(dir, modelFile)
		if b, err = readVerified(dir, modelFile, mf); err != nil {
			return nil, err
		}
		if _, ok := mf.Files[configFile]; ok {
			if config, err := readVerified(dir, configFile, mf); err == nil {
				m.Config = string(config)
			}
		}
	}
	if m.SHA256 == "" {
		sum := sha256.Sum256(b)
		m.SHA256 = hex.EncodeToString(sum[:])
	}
	r, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), m.File)
	if err != nil {
		return nil, err
	}
	diff, bad, err := compare(r, m.File, model)
	if err != nil {
		return nil, err
	}
	m.Diff = *diff
	for i := range model {
		t := &model[i]
		if bad[t.Name] {
			continue
		}
		if t.Data == nil {
			t.Data = make([]float32, safetensors.NumElements(t.Shape))
		}
		if err := r.ReadFloat32(t.Name, t.Data); err != nil {
			return nil, err
		}
		m.Filled = append(m.Filled, t.Name)
	}
	return m, nil
}

// isTorch reports whether a weights file named path, beginning with
// head, is read as a torch.save file: named .pt, .pth or .bin, or a zip
// not named .safetensors (a .safetensors name is read as one, and
// refused as one when it is not).
func isTorch(path string, head []byte) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pt", ".pth", ".bin":
		return true
	case ".safetensors":
		return false
	}
	return bytes.HasPrefix(head, torchpt.Magic)
}

// isTorchFile is isTorch of the file at path.
func isTorchFile(path string) bool {
	head := make([]byte, len(torchpt.Magic))
	if f, err := os.Open(path); err == nil {
		n, _ := io.ReadFull(f, head)
		head = head[:n]
		f.Close()
	}
	return isTorch(path, head)
}

// readBare reads a bare weights file as safetensors bytes: a safetensors
// file as it is, a torch.save file (isTorch) converted (torchpt, whose
// errors say what such a file is when it is not one); sum is the SHA-256
// of the file's own bytes (hex).
func readBare(path string) (b []byte, sum string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("load checkpoint: %w", err)
	}
	h := sha256.Sum256(raw)
	sum = hex.EncodeToString(h[:])
	if !isTorch(path, raw) {
		return raw, sum, nil
	}
	if b, err = torchpt.ToSafetensors(bytes.NewReader(raw), int64(len(raw)), path); err != nil {
		return nil, "", fmt.Errorf("load checkpoint: %w", err)
	}
	return b, sum, nil
}
