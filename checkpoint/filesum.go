package checkpoint

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
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
