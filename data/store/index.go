package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Index is index.json.
type Index struct {
	Version int `json:"version"`
	// Prep is the preprocessing configuration the cases were made with,
	// and PrepHash its SHA-256: a different configuration makes every case
	// stale.
	Prep     json.RawMessage `json:"preprocessing"`
	PrepHash string          `json:"preprocessing_sha256"`
	Chunk    int             `json:"chunk"`
	Codec    string          `json:"codec"`
	// Cases maps case ID to its entry.
	Cases map[string]*Entry `json:"cases"`
}

// Entry describes one case in the store.
type Entry struct {
	File     string       `json:"file"`
	Shape    [3]int       `json:"shape"`
	Channels int          `json:"channels"`
	HasLabel bool         `json:"has_label"`
	Sources  []SourceFile `json:"sources"`
	// RawBytes and StoredBytes are the voxel bytes before and after
	// compression.
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
}

// SourceFile identifies one source file by size, modification time and
// content hash.
type SourceFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
}

// HashPrep returns the fingerprint of a preprocessing configuration.
func HashPrep(prep []byte) string {
	h := sha256.Sum256(prep)
	return hex.EncodeToString(h[:])
}

// ReadIndex reads dir/index.json (os.ErrNotExist when there is none).
func ReadIndex(dir string) (*Index, error) {
	path := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read store index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if ix.Version != Version {
		return nil, fmt.Errorf("%s: store version %d, this build reads %d (run train prepare again)", path, ix.Version, Version)
	}
	if ix.Cases == nil {
		ix.Cases = map[string]*Entry{}
	}
	return &ix, nil
}

// Stat describes a source file now, hashing it only when size or mtime
// differ from known (nil: always hash).
func Stat(path string, known *SourceFile) (SourceFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return SourceFile{}, err
	}
	s := SourceFile{Path: path, Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	if known != nil && known.Path == path && known.Size == s.Size && known.ModTime == s.ModTime {
		s.SHA256 = known.SHA256
		return s, nil
	}
	s.SHA256, err = hashFile(path)
	return s, err
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Current reports whether entry e was made from exactly these files: the
// same paths, and for each the same size and mtime, or (after a touch or
// a copy) the same content hash. It returns the refreshed sources (new
// mtimes of unchanged content) and, when stale, why.
func Current(e *Entry, files []string) (ok bool, now []SourceFile, why string, err error) {
	if e == nil {
		return false, nil, "not in the store", nil
	}
	if len(e.Sources) != len(files) {
		return false, nil, "its file list changed", nil
	}
	now = make([]SourceFile, len(files))
	for i, f := range files {
		k := e.Sources[i]
		if k.Path != f {
			return false, nil, fmt.Sprintf("file %s replaced %s", f, k.Path), nil
		}
		s, err := Stat(f, &k)
		if err != nil {
			return false, nil, "", err
		}
		if s.SHA256 != k.SHA256 {
			return false, nil, fmt.Sprintf("%s changed (size %d→%d, content hash differs)", f, k.Size, s.Size), nil
		}
		now[i] = s
	}
	return true, now, "", nil
}
