package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// shardSpec is v3's sharding_indexed codec: a shard holds a grid of inner
// chunks, each encoded by codec, and an index of (offset, nbytes) pairs,
// little- or big-endian uint64s, at its end or start, then optionally
// its CRC-32C. An inner chunk whose pair is all ones is missing.
type shardSpec struct {
	inner    []int // inner chunk shape
	perShard []int // inner chunks per shard, per axis
	n        int   // inner chunks per shard
	codec    chunkCodec
	atStart  bool
	bigIndex bool
	crc      bool
	shardKey func(idx []int) string
}

func readSharding(raw json.RawMessage, dt dtype, ndim int) (*shardSpec, error) {
	var c struct {
		ChunkShape    []int     `json:"chunk_shape"`
		Codecs        []v3Codec `json:"codecs"`
		IndexCodecs   []v3Codec `json:"index_codecs"`
		IndexLocation string    `json:"index_location"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if len(c.ChunkShape) != ndim {
		return nil, fmt.Errorf("chunk_shape %v for %d dimensions", c.ChunkShape, ndim)
	}
	s := &shardSpec{inner: c.ChunkShape}
	var err error
	if s.codec, _, err = v3Codecs(c.Codecs, dt, ndim, false); err != nil {
		return nil, fmt.Errorf("codecs: %w", err)
	}
	switch c.IndexLocation {
	case "end", "":
	case "start":
		s.atStart = true
	default:
		return nil, fmt.Errorf("index_location %q", c.IndexLocation)
	}
	ic, _, err := v3Codecs(c.IndexCodecs, dtype{kind: 'u', size: 8}, ndim+1, false)
	if err != nil {
		return nil, fmt.Errorf("index_codecs: %w", err)
	}
	s.bigIndex = ic.dt.big
	for _, b := range ic.bytes {
		if _, ok := b.(crc32cCodec); !ok {
			return nil, fmt.Errorf("index_codecs: %s is not read (bytes and crc32c are)", b.name())
		}
		s.crc = true
	}
	if !isIdentity(ic.perm) {
		return nil, fmt.Errorf("index_codecs: transpose is not read")
	}
	return s, nil
}

// indexBytes is the size of a shard's index.
func (s *shardSpec) indexBytes() int {
	n := 16 * s.n
	if s.crc {
		n += 4
	}
	return n
}

// shardIndex is a decoded index: offset and size of each inner chunk (C
// order over the shard's grid).
type shardIndex []uint64

// parseIndex checks an index read from a shard of size bytes.
func (s *shardSpec) parseIndex(b []byte, size int64) (shardIndex, error) {
	if s.crc {
		body, err := crc32cCodec{}.decode(b, len(b)-4, true)
		if err != nil {
			return nil, fmt.Errorf("shard index: %w", err)
		}
		b = body
	}
	var o binary.ByteOrder = binary.LittleEndian
	if s.bigIndex {
		o = binary.BigEndian
	}
	idx := make(shardIndex, 2*s.n)
	for i := range idx {
		idx[i] = o.Uint64(b[8*i:])
	}
	for i := 0; i < len(idx); i += 2 {
		off, n := idx[i], idx[i+1]
		if off == math.MaxUint64 && n == math.MaxUint64 {
			continue
		}
		if off > uint64(size) || n > uint64(size)-off {
			return nil, fmt.Errorf("shard index: inner chunk %d at %d+%d bytes, past the %d-byte shard", i/2, off, n, size)
		}
	}
	return idx, nil
}
