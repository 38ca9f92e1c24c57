package zarr

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Blosc codec numbers (the top three bits of the header's flags).
const (
	bloscLZ4    = 1
	bloscSnappy = 2
	bloscZlib   = 3
	bloscZstd   = 4
)

// zstdEnc is shared: EncodeAll may be called concurrently, and an encoder
// is costly to build per chunk.
var zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))

// bloscEncode writes src as a blosc container (format version 2, what
// c-blosc 1.x and numcodecs write and bloscDecompress reads): blocks of
// blocksize bytes, each byte-shuffled when shuffle is bloscShuffle, split
// per byte of the type on exactly the condition c-blosc 1.x's decoder
// splits (type ≤ 16 bytes, ≥ 128 elements, not the last short block),
// each stream compressed by codec (1 lz4, 2 snappy, 3 zlib, 4 zstd; 0,
// blosclz, stores every split raw) or
// stored raw when that does not shrink it, as c-blosc does.
func bloscEncode(src []byte, typesize, blocksize int, shuffle, codec byte) ([]byte, error) {
	if typesize < 1 || typesize > 255 || blocksize < typesize || blocksize%typesize != 0 {
		return nil, fmt.Errorf("blosc: type size %d, block size %d", typesize, blocksize)
	}
	nbytes := len(src)
	if int64(nbytes) > 1<<31-1-bloscHeader {
		return nil, fmt.Errorf("blosc: %d bytes, more than a container holds", nbytes)
	}
	nblocks := (nbytes + blocksize - 1) / blocksize
	hdr := make([]byte, bloscHeader+4*nblocks)
	hdr[0], hdr[1], hdr[2], hdr[3] = 2, 1, shuffle|codec<<5, byte(typesize)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(blocksize))
	out := bytes.NewBuffer(hdr)
	var shuf []byte
	for j := range nblocks {
		binary.LittleEndian.PutUint32(out.Bytes()[bloscHeader+4*j:], uint32(out.Len()))
		block := src[j*blocksize : min(nbytes, (j+1)*blocksize)]
		leftover := len(block) < blocksize
		buf := block
		if shuffle == bloscShuffle && typesize > 1 {
			if cap(shuf) < len(block) {
				shuf = make([]byte, blocksize)
			}
			buf = shuf[:len(block)]
			n := len(block) / typesize
			for i := range n {
				for k := range typesize {
					buf[k*n+i] = block[i*typesize+k]
				}
			}
			copy(buf[n*typesize:], block[n*typesize:])
		}
		nsplits := 1
		if typesize <= bloscMaxSplits && len(block)/typesize >= bloscMinBuffer && !leftover {
			nsplits = typesize
		}
		ne := len(block) / nsplits
		for s := range nsplits {
			part := buf[s*ne : (s+1)*ne]
			c, err := bloscCodecEncode(codec, part)
			if err != nil {
				return nil, fmt.Errorf("blosc: block %d: %w", j, err)
			}
			if len(c) == 0 || len(c) >= len(part) {
				c = part
			}
			var n [4]byte
			binary.LittleEndian.PutUint32(n[:], uint32(len(c)))
			out.Write(n[:])
			out.Write(c)
		}
	}
	b := out.Bytes()
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	return b, nil
}

// bloscCodecEncode compresses one split with blosc's codec number.
func bloscCodecEncode(codec byte, part []byte) ([]byte, error) {
	switch codec {
	case 0:
		// blosclz is read, not written: the split is stored raw, which
		// every blosclz decoder reads.
		return nil, nil
	case bloscLZ4:
		c := make([]byte, lz4.CompressBlockBound(len(part)))
		n, err := lz4.CompressBlock(part, c, nil)
		return c[:n], err
	case bloscSnappy:
		return s2.EncodeSnappy(nil, part), nil
	case bloscZlib:
		var zb bytes.Buffer
		w := zlib.NewWriter(&zb)
		if _, err := w.Write(part); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return zb.Bytes(), nil
	case bloscZstd:
		return zstdEnc.EncodeAll(part, nil), nil
	}
	return nil, fmt.Errorf("codec %d is not written (blosclz 0 raw, lz4 1, snappy 2, zlib 3, zstd 4 are)", codec)
}
