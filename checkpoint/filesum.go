package checkpoint

import (
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileSum is a file's size and CRC-32C as recorded in a manifest.
type fileSum struct {
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
}

func sumOf(h hash.Hash32, size int64) fileSum {
	return fileSum{Size: size, CRC32C: crcHex(h.Sum32())}
}

func crcHex(v uint32) string { return fmt.Sprintf("%08x", v) }

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeSynced creates path (which must not exist), fills it with fill,
// fsyncs and closes it, and returns its size and CRC-32C. On error the file
// is removed.
func writeSynced(path string, fill func(io.Writer) error) (fileSum, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fileSum{}, err
	}
	h := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fileSum{}, fmt.Errorf("write %s: %w", path, err)
	}
	return sumOf(h, cw.n), nil
}

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it survive a power loss. Filesystems that cannot sync a directory (EINVAL,
// e.g. some network and FUSE filesystems) are accepted: there is nothing
// more to do on them.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// tmpName returns prefix followed by a random suffix: unique without any
// shared counter.
func tmpName(prefix string) string { return prefix + rand.Text() }

// WriteFileAtomic writes data to path so that a reader (or a crash) sees
// either the old file or the complete new one, never a mix: it writes a
// temporary file in the same directory, fsyncs it, renames it over path and
// fsyncs the directory. The directory is created first if missing. Use it
// for the run's config.yaml and other small files that must not be torn.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, tmpName(".tmp-"+filepath.Base(path)+"-"))
	if _, err := writeSynced(tmp, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}
