package dnn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// CacheEnv names the environment variable that sets the cuDNN algorithm
// cache file ("off": no disk cache).
const CacheEnv = "VOXTRAIN_CUDNN_CACHE"

// DefaultCacheFile returns the cache file: $VOXTRAIN_CUDNN_CACHE, else
// voxtrain/cudnn-algorithms.json in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache); "" when off or there is no such
// directory.
func DefaultCacheFile() string {
	if v := os.Getenv(CacheEnv); v != "" {
		if v == "off" {
			return ""
		}
		return v
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "voxtrain", "cudnn-algorithms.json")
}

// cacheFormat names the file's format and version.
const cacheFormat = "voxtrain cuDNN algorithm choices, version 2"

// cacheFile is the JSON file: entries keyed by GPU, cuDNN version,
// options, pass and problem (Engine.diskKey).
type cacheFile struct {
	Format  string           `json:"format"`
	Entries map[string]entry `json:"entries"`
}

type entry struct {
	OK     bool     `json:"ok"`
	Algo   int32    `json:"algo"`
	Math   MathType `json:"math"`
	TimeMs float32  `json:"time_ms"`
	Why    string   `json:"why,omitempty"`
}

// readCache returns the file's entries; a missing file is empty, not an
// error.
func readCache(path string) (map[string]entry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]entry{}, nil
	}
	if err != nil {
		return map[string]entry{}, err
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		return map[string]entry{}, fmt.Errorf("not a cache file: %w", err)
	}
	if f.Format != cacheFormat {
		return map[string]entry{}, fmt.Errorf("format %q, want %q", f.Format, cacheFormat)
	}
	if f.Entries == nil {
		f.Entries = map[string]entry{}
	}
	return f.Entries, nil
}

// mergeCache adds entries to the file (replacing those with the same
// key), creating it and its directory if need be.
func mergeCache(path string, add map[string]entry) error {
	all, err := readCache(path)
	if err != nil {
		all = map[string]entry{} // damaged: replaced
	}
	for k, v := range add {
		all[k] = v
	}
	b, err := json.MarshalIndent(cacheFile{Format: cacheFormat, Entries: all}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}
