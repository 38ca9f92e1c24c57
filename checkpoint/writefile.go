package checkpoint

import (
	"os"
	"path/filepath"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
)

// WriteFileAtomic writes data to path so that a reader (or a crash) sees
// either the old file or the complete new one, never a mix, creating the
// directory first if missing.
//
// Deprecated: use atomicfile.WriteFile (after os.MkdirAll where the
// directory may be missing). This wrapper stays only until the trainer and
// data packages are switched; checkpoint itself does not use it.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, perm)
}
