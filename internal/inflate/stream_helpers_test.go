package inflate

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing/iotest"
)

// Input sources for the ResetReader tests: each hands the compressed bytes
// over in a different way.
const (
	srcBytes   = iota // *bytes.Reader: everything at once
	srcOneByte        // iotest.OneByteReader
	srcHalf           // iotest.HalfReader
	srcChunks         // chunkReader: random sizes, some (0, nil), data with io.EOF
	numSrcKinds
)

var srcKindNames = [numSrcKinds]string{"bytes", "onebyte", "half", "chunks"}

// chunkReader returns data in seeded random pieces from 1 byte to 128 KiB
// (log-uniform), sometimes (0, nil), and sometimes the last piece together
// with io.EOF.
type chunkReader struct {
	data []byte
	r    *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 || c.r.IntN(8) == 0 {
		return 0, nil
	}
	n := min(len(p), len(c.data), 1+c.r.IntN(1<<c.r.IntN(18)))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	if len(c.data) == 0 && c.r.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func newSource(kind int, src []byte, seed uint64) io.Reader {
	switch kind {
	case srcOneByte:
		return iotest.OneByteReader(bytes.NewReader(src))
	case srcHalf:
		return iotest.HalfReader(bytes.NewReader(src))
	case srcChunks:
		return &chunkReader{data: src, r: rand.New(rand.NewPCG(seed, 7))}
	default:
		return bytes.NewReader(src)
	}
}

// streamReaders returns Readers with the smallest input window, an odd small
// one, and the default: small windows make even small test files cross many
// window refills.
func streamReaders() []*Reader {
	return []*Reader{{winSize: minWindow}, {winSize: 5000}, {}}
}

// readAllStream is readAll through ResetReader(r).
func readAllStream(z *Reader, r io.Reader, bufSize int) ([]byte, error) {
	if err := z.ResetReader(r); err != nil {
		return nil, err
	}
	return drain(z, bufSize)
}

// readAllKind decodes src through ResetReader from a source of the given kind.
func readAllKind(z *Reader, src []byte, kind, bufSize int, seed uint64) ([]byte, error) {
	return readAllStream(z, newSource(kind, src, seed), bufSize)
}

// errString is err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
