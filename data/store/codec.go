package store

import (
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codec names.
const (
	CodecS2   = "s2"
	CodecZstd = "zstd"
)

// Codec names with a byte-shuffle filter: float32 chunks are stored as
// four byte planes (all first bytes, then all second bytes, ...) before
// compression, as Blosc's shuffle does.
const (
	CodecS2Shuffle   = "s2-shuffle"
	CodecZstdShuffle = "zstd-shuffle"
)

// CodecRaw stores chunks uncompressed and reads them through a memory map
// (see the package documentation).
const CodecRaw = "raw"

// codecID is the case-file code of a codec name: 1 S2, 2 zstd, +16 for
// the shuffle filter.
func codecID(name string) (uint32, bool) {
	switch name {
	case CodecRaw:
		return codecRawID, true
	case CodecS2:
		return 1, true
	case CodecZstd:
		return 2, true
	case CodecS2Shuffle:
		return 1 | shuffleBit, true
	case CodecZstdShuffle:
		return 2 | shuffleBit, true
	}
	return 0, false
}

const shuffleBit = 16

// codecRawID is the raw codec's case-file code.
const codecRawID = 3

// shuffle writes the bytes of b's float32s as four planes into dst.
func shuffle(dst, b []byte) []byte {
	n := len(b) / 4
	if cap(dst) < len(b) {
		dst = make([]byte, len(b))
	}
	dst = dst[:len(b)]
	for i := 0; i < n; i++ {
		dst[i], dst[n+i], dst[2*n+i], dst[3*n+i] = b[4*i], b[4*i+1], b[4*i+2], b[4*i+3]
	}
	return dst
}

// Scratch is one reader goroutine's reusable buffers; the zero value is
// ready. Not safe for concurrent use.
type Scratch struct {
	comp []byte
	raw  []byte
	dec  *zstd.Decoder
	// Chunks counts chunks decompressed (or, raw, copied from), Bytes
	// their raw bytes.
	Chunks, Bytes int64
}

func (sc *Scratch) decode(codec uint32, src []byte, want int) ([]byte, error) {
	if cap(sc.raw) < want {
		sc.raw = make([]byte, want)
	}
	var out []byte
	var err error
	if codec == 2 {
		if sc.dec == nil {
			sc.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
		}
		out, err = sc.dec.DecodeAll(src, sc.raw[:0])
	} else {
		out, err = s2.Decode(sc.raw[:want], src)
	}
	if err != nil {
		return nil, err
	}
	if len(out) != want {
		return nil, fmt.Errorf("decompressed %d bytes, want %d", len(out), want)
	}
	sc.Chunks++
	sc.Bytes += int64(want)
	return out, nil
}
