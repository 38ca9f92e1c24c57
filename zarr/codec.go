package zarr

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// A bytesCodec undoes one bytes-to-bytes step of a chunk's encoding (a
// v2 compressor, a v3 bytes-to-bytes codec, an N5 compression). size is
// what the step's output must be: exactly size bytes when exact (the last
// step, whose output is the chunk), at most size otherwise.
type bytesCodec interface {
	decode(src []byte, size int, exact bool) ([]byte, error)
	name() string
}

// streamCodec is a codec whose decoder is an io.Reader (zlib, gzip,
// bzip2, xz).
type streamCodec struct {
	id   string
	open func(io.Reader) (io.Reader, error)
}

func (c streamCodec) name() string { return c.id }

func (c streamCodec) decode(src []byte, size int, exact bool) ([]byte, error) {
	r, err := c.open(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.id, err)
	}
	return readBounded(c.id, r, size, exact)
}

// readBounded reads r to its end, which must come at size bytes (exact)
// or before: never more than size+1 bytes are held.
func readBounded(id string, r io.Reader, size int, exact bool) ([]byte, error) {
	if exact {
		dst := make([]byte, size)
		if _, err := io.ReadFull(r, dst); err != nil {
			return nil, fmt.Errorf("%s: decoded fewer than the chunk's %d bytes: %w", id, size, err)
		}
		var one [1]byte
		if n, err := r.Read(one[:]); n > 0 {
			return nil, fmt.Errorf("%s: decodes to more than the chunk's %d bytes", id, size)
		} else if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		return dst, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(size)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	if len(b) > size {
		return nil, fmt.Errorf("%s: decodes to more than %d bytes", id, size)
	}
	return b, nil
}

var (
	zlibCodec = streamCodec{"zlib", func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }}
	gzipCodec = streamCodec{"gzip", func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }}
	bz2Codec  = streamCodec{"bz2", func(r io.Reader) (io.Reader, error) { return bzip2.NewReader(r), nil }}
	xzCodec   = streamCodec{"xz", func(r io.Reader) (io.Reader, error) { return xz.NewReader(r) }}
)

// zlibExact decodes a zlib stream that must fill dst (a blosc split).
func zlibExact(src, dst []byte) error {
	b, err := zlibCodec.decode(src, len(dst), true)
	if err == nil {
		copy(dst, b)
	}
	return err
}

// zstdDecoder decodes whole frames; DecodeAll is safe for concurrent use.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<31))

type zstdCodec struct{}

func (zstdCodec) name() string { return "zstd" }

func (zstdCodec) decode(src []byte, size int, exact bool) ([]byte, error) {
	return zstdInto(src, make([]byte, 0, size+zstdSlack), size, exact)
}

// zstdInto decodes one zstd stream of at most size bytes (exactly size
// when exact) into dst's capacity (appending to dst[:0]; at least size,
// zstdSlack more for speed): a frame that says it holds more, or wants a
// window larger than it needs, is refused before decoding.
func zstdInto(src, dst []byte, size int, exact bool) ([]byte, error) {
	// The frame header says how much the frame holds and how large a
	// window it needs: refuse a frame that wants more than the chunk.
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("zstd: frame header: %w", err)
	}
	if h.HasFCS && (h.FrameContentSize > uint64(size) || exact && h.FrameContentSize != uint64(size) && !h.Skippable) {
		return nil, fmt.Errorf("zstd: frame holds %d bytes, the chunk %d", h.FrameContentSize, size)
	}
	if h.WindowSize > uint64(max(2*size, 8<<20)) {
		return nil, fmt.Errorf("zstd: window of %d bytes for a chunk of %d", h.WindowSize, size)
	}
	out, err := zstdDecoder.DecodeAll(src, dst[:0])
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if len(out) > size || exact && len(out) != size {
		return nil, fmt.Errorf("zstd: decoded %d bytes, the chunk holds %d", len(out), size)
	}
	return out, nil
}

// zstdSlack is the spare capacity past the decoded bytes that lets the
// zstd decoder take its fast path on every block: with less, it decodes
// the frame's last block (of up to 128 KiB) with bounded copies, about
// three times slower (klauspost/compress useSafeDecodeSync: it needs
// compressedBlockOverAlloc = 32 bytes beyond what the block produces).
const zstdSlack = 32

// zstdExact decodes a zstd stream that must fill dst (a blosc split).
// When dst's capacity reaches zstdSlack bytes past its length — scratch
// by blosc's decoding convention (decodeBlock) — it decodes in place;
// else into a pooled buffer (getBuf) with that slack, and copies: the
// fast path may write those bytes, which in dst belong to a neighbour,
// and the copy costs a tenth of what the slow path would.
func zstdExact(src, dst []byte) error {
	if cap(dst)-len(dst) >= zstdSlack {
		out, err := zstdInto(src, dst[:0], len(dst), true)
		if err != nil {
			return err
		}
		if len(out) > 0 && &out[0] != &dst[0] { // not expected: the decoder had room
			copy(dst, out)
		}
		return nil
	}
	buf := getBuf(len(dst) + zstdSlack) // a blosc array's splits share one size: one pool
	defer putBuf(buf)
	out, err := zstdInto(src, buf[:0], len(dst), true)
	if err != nil {
		return err
	}
	copy(dst, out)
	return nil
}

// lz4Codec is numcodecs' LZ4: the decoded size (4 bytes, little-endian),
// then one LZ4 block.
type lz4Codec struct{}

func (lz4Codec) name() string { return "lz4" }

func (lz4Codec) decode(src []byte, size int, exact bool) ([]byte, error) {
	if len(src) < 4 {
		return nil, errors.New("lz4: shorter than its 4-byte size")
	}
	n := int(binary.LittleEndian.Uint32(src))
	if n > size || exact && n != size {
		return nil, fmt.Errorf("lz4: holds %d bytes, the chunk %d", n, size)
	}
	dst := make([]byte, n)
	if err := lz4Block(src[4:], dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// snappyBlock decodes one Snappy block (blosc's snappy; s2 reads Snappy)
// that must fill dst: its declared length is checked before decoding.
func snappyBlock(src, dst []byte) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if n != len(dst) {
		return fmt.Errorf("snappy: holds %d bytes, want %d", n, len(dst))
	}
	if _, err := s2.Decode(dst, src); err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	return nil
}

// lz4Block decodes one LZ4 block that must fill dst.
func lz4Block(src, dst []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if n != len(dst) {
		return fmt.Errorf("lz4: decoded %d bytes, want %d", n, len(dst))
	}
	return nil
}

type bloscCodecT struct{}

func (bloscCodecT) name() string { return "blosc" }

func (bloscCodecT) decode(src []byte, size int, exact bool) ([]byte, error) {
	if !exact {
		// Blosc's header says its size: hold it to the bound.
		if len(src) >= bloscHeader {
			size = min(size, int(binary.LittleEndian.Uint32(src[4:])))
		}
	}
	return bloscDecompress(src, size)
}

// crc32cCodec is v3's crc32c: the bytes, then their CRC-32C (4 bytes,
// little-endian).
type crc32cCodec struct{}

func (crc32cCodec) name() string { return "crc32c" }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (crc32cCodec) decode(src []byte, size int, exact bool) ([]byte, error) {
	if len(src) < 4 {
		return nil, errors.New("crc32c: shorter than its checksum")
	}
	body := src[:len(src)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(src[len(body):]); got != want {
		return nil, fmt.Errorf("crc32c: checksum %08x, stored %08x", got, want)
	}
	if len(body) > size || exact && len(body) != size {
		return nil, fmt.Errorf("crc32c: %d bytes, the chunk holds %d", len(body), size)
	}
	return body, nil
}

// v2Compressor returns the codec of a .zarray "compressor" (numcodecs'
// id and configuration); null is none.
func v2Compressor(raw json.RawMessage) (bytesCodec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c struct {
		ID     string `json:"id"`
		Format *int   `json:"format"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("compressor: %w", err)
	}
	return codecByID(c.ID, c.Format)
}

// codecByID maps numcodecs' (and v3's) codec names to codecs.
func codecByID(id string, format *int) (bytesCodec, error) {
	switch id {
	case "zlib":
		return zlibCodec, nil
	case "gzip":
		return gzipCodec, nil
	case "bz2":
		return bz2Codec, nil
	case "zstd":
		return zstdCodec{}, nil
	case "lz4":
		return lz4Codec{}, nil
	case "blosc":
		return bloscCodecT{}, nil
	case "crc32c":
		return crc32cCodec{}, nil
	case "lzma":
		// numcodecs' LZMA writes .xz (format 1) unless told otherwise.
		if format == nil || *format == 1 {
			return xzCodec, nil
		}
		return nil, fmt.Errorf("codec lzma: format %d is not read (only xz, format 1)", *format)
	}
	return nil, fmt.Errorf("codec %q is not read (zlib, gzip, bz2, zstd, lz4, blosc, lzma/xz, crc32c are)", id)
}
