package nifti

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/voxtrain/voxtrain/internal/inflate"
)

// source is an open NIfTI stream positioned at the start of the voxel data.
type source struct {
	hdr     *Header
	name    string // the file the voxels are read from, for errors
	r       io.Reader
	pos     int64     // bytes consumed from the (decompressed) data stream
	gz      io.Reader // the decompressing stream, nil for an uncompressed file
	limit   int64     // the most bytes the (decompressed) stream can hold
	closers []io.Closer
}

// gzState is a gzip decoder, pooled: it holds half a MiB of input window,
// output window and tables, which a worker decoding a case per sample
// should not allocate per file. internal/inflate rather than
// klauspost/compress decodes: twice as fast on MRI data (docs/bench/inflate.md),
// where inflating was two thirds of the .nii.gz pipeline's CPU.
type gzState struct {
	zr inflate.Reader
}

var gzPool = sync.Pool{New: func() any { return new(gzState) }}

// Close returns the state to the pool; the source it served is closed.
func (g *gzState) Close() error {
	gzPool.Put(g)
	return nil
}

// newSource wraps a file's bytes (size of them on disk) in a buffered
// stream, decompressing when it starts with the gzip magic. Its limit is
// the file size, or for gzip the smaller of the cap and what deflate can
// expand the file to.
func (r *Reader) newSource(rd io.Reader, size int64, name string) (*source, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	src := &source{name: name, r: br, limit: size}
	if sniffGzip(br) {
		g := gzPool.Get().(*gzState)
		if err := g.zr.ResetReader(br); err != nil {
			g.Close()
			return nil, &FormatError{File: name, Field: "gzip", Offset: 0, Msg: err.Error()}
		}
		src.gz, src.r = &g.zr, &g.zr
		src.closers = append(src.closers, g)
		src.limit = min(r.gzipCap(), size*maxDeflateRatio+4096)
	}
	return src, nil
}

func (s *source) close() {
	for _, c := range s.closers {
		c.Close()
	}
	s.closers = nil
}

// skipTo discards stream bytes up to offset off.
func (s *source) skipTo(off int64) error {
	if off < s.pos {
		// Extensions ran past vox_offset; the header is inconsistent.
		return fieldErr(s.name, s.hdr.Version, fVoxOff, "%d lies inside the header extensions (which end at byte %d)", off, s.pos)
	}
	n, err := io.CopyN(io.Discard, s.r, off-s.pos)
	s.pos += n
	if err != nil {
		return s.readErr("vox_offset", err, off)
	}
	return nil
}

// readErr turns an I/O error while reading the named part into a
// FormatError that says where the stream ended or broke.
func (s *source) readErr(what string, err error, want int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{File: s.name, Field: what, Offset: s.pos,
			Msg: fmt.Sprintf("truncated: stream ends at byte %d, needed through byte %d", s.pos, want)}
	}
	if s.gz != nil {
		return &FormatError{File: s.name, Field: "gzip", Offset: s.pos,
			Msg: fmt.Sprintf("corrupt compressed data while reading %s: %v", what, err)}
	}
	return fmt.Errorf("nifti: read %s: %s: %w", s.name, what, err)
}

// finish verifies the gzip trailer (CRC and length) when the voxel data ends
// the stream, reading at most a little trailing data to get there.
func (s *source) finish() error {
	if s.gz == nil {
		return nil
	}
	var tail [4096]byte
	for read := 0; read < 1<<20; {
		n, err := s.gz.Read(tail[:])
		read += n
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &FormatError{File: s.name, Field: "gzip", Offset: s.pos + int64(read), Msg: fmt.Sprintf("corrupt compressed data after the voxels: %v", err)}
		}
	}
	return nil // long trailing data: not worth inflating to check the CRC
}

// raw reads the voxel bytes, swapped to little-endian.
func (s *source) raw() ([]byte, error) {
	buf := make([]byte, s.hdr.DataSize())
	return buf, s.rawInto(buf)
}

// rawInto reads len(buf) voxel bytes, swapped to little-endian; when that
// is all of them it also verifies the gzip trailer.
func (s *source) rawInto(buf []byte) error {
	h := s.hdr
	n, err := io.ReadFull(s.r, buf)
	s.pos += int64(n)
	if err != nil {
		return s.readErr("data", err, s.pos-int64(n)+int64(len(buf)))
	}
	if int64(len(buf)) == h.DataSize() {
		if err := s.finish(); err != nil {
			return err
		}
	}
	if h.ByteOrder == binary.BigEndian {
		swapInPlace(buf, dtTable[h.Datatype].comp)
	}
	return nil
}
