package zarr

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/voxtrain/voxtrain/internal/xxh32"
)

// N5's lz4 compression (the Java reference's Lz4Compression) is lz4-java's
// LZ4BlockOutputStream: a sequence of frames, each
//
//	"LZ4Block"  8 bytes of magic
//	token       1 byte: the method (0x10 raw, 0x20 an LZ4 block) OR'd with
//	            a level in the low 4 bits; the writer's block size is at
//	            most 1<<(10+level) (65536, N5's default, is level 6)
//	compressed  int32 LE: the bytes that follow
//	original    int32 LE: the bytes they decode to
//	checksum    int32 LE: XXH32 of the decoded bytes, seed 0x9747b28c,
//	            masked to 28 bits (StreamingXXHash32.asChecksum's
//	            getValue() & 0xFFFFFFF)
//	data        an LZ4 block, or the bytes themselves (raw, written when
//	            LZ4 would not make them smaller)
//
// and the stream ends with an empty frame (finish(): the raw method with
// the level, lengths and checksum 0). The checks below are
// LZ4BlockInputStream's, and each length is also held to what the block
// can hold.
const (
	lz4BlockMagic     = "LZ4Block"
	lz4BlockHeader    = len(lz4BlockMagic) + 1 + 4 + 4 + 4
	lz4BlockRaw       = 0x10
	lz4BlockLZ4       = 0x20
	lz4BlockLevel0    = 10 // log2 of the block size at level 0
	lz4BlockSeed      = 0x9747b28c
	lz4BlockCheckMask = 0x0fffffff // the checksum's 28 bits
)

// n5LZ4Codec decodes N5's lz4 (an LZ4Block stream).
type n5LZ4Codec struct{}

func (n5LZ4Codec) name() string { return "N5 lz4" }

// decode reads the frames of src into at most size bytes (exactly size
// when exact), and requires the end frame after them and nothing else.
func (n5LZ4Codec) decode(src []byte, size int, exact bool) ([]byte, error) {
	var dst []byte
	if exact {
		dst = make([]byte, 0, size)
	}
	off := 0
	for frame := 0; ; frame++ {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("N5 lz4 frame %d (at byte %d): %s", frame, off, fmt.Sprintf(format, a...))
		}
		rest := src[off:]
		if len(rest) == 0 {
			return nil, bad("the stream ends without its end frame (%d bytes decoded)", len(dst))
		}
		if len(rest) < lz4BlockHeader {
			return nil, bad("header truncated: %d of its %d bytes", len(rest), lz4BlockHeader)
		}
		if string(rest[:len(lz4BlockMagic)]) != lz4BlockMagic {
			return nil, bad("magic %q, want %q", rest[:len(lz4BlockMagic)], lz4BlockMagic)
		}
		token := rest[8]
		method := token & 0xf0
		if method != lz4BlockRaw && method != lz4BlockLZ4 {
			return nil, bad("token %#02x: compression method %#02x is neither raw (0x10) nor lz4 (0x20)", token, method)
		}
		maxLen := 1 << (lz4BlockLevel0 + int(token&0x0f))
		clen := int32(binary.LittleEndian.Uint32(rest[9:]))
		olen := int32(binary.LittleEndian.Uint32(rest[13:]))
		check := binary.LittleEndian.Uint32(rest[17:])
		switch {
		case clen < 0:
			return nil, bad("compressed length %d", clen)
		case olen < 0:
			return nil, bad("decompressed length %d", olen)
		case int(olen) > maxLen:
			return nil, bad("decompressed length %d over the token's block size %d", olen, maxLen)
		case (olen == 0) != (clen == 0):
			return nil, bad("compressed length %d with decompressed length %d", clen, olen)
		case method == lz4BlockRaw && clen != olen:
			return nil, bad("raw, but compressed length %d differs from decompressed length %d", clen, olen)
		}
		if olen == 0 {
			// The end frame.
			if check != 0 {
				return nil, bad("end frame with checksum %#08x, want 0", check)
			}
			if extra := len(rest) - lz4BlockHeader; extra > 0 {
				return nil, bad("%d bytes after the end frame", extra)
			}
			if exact && len(dst) != size {
				return nil, bad("the stream ends at %d bytes, the block holds %d", len(dst), size)
			}
			return dst, nil
		}
		if int(olen) > size-len(dst) {
			return nil, bad("decompressed length %d past the block's %d bytes (%d decoded before it)", olen, size, len(dst))
		}
		body := rest[lz4BlockHeader:]
		if int(clen) > len(body) {
			return nil, bad("compressed length %d, but only %d bytes follow (truncated)", clen, len(body))
		}
		body = body[:clen]
		n := len(dst)
		dst = slices.Grow(dst, int(olen))[:n+int(olen)]
		out := dst[n:]
		if method == lz4BlockRaw {
			copy(out, body)
		} else if err := lz4Block(body, out); err != nil {
			return nil, bad("%v", err)
		}
		if got := xxh32.Checksum(out, lz4BlockSeed) & lz4BlockCheckMask; got != check {
			return nil, bad("checksum %#08x, the decoded bytes' XXH32 (28 bits) is %#08x", check, got)
		}
		off += lz4BlockHeader + int(clen)
	}
}
