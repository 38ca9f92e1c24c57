package zarr

import (
	"encoding/binary"
	"fmt"
)

// Blosc's container (format version 2, c-blosc 1.x, what numcodecs and
// zarr write): a 16-byte header (version, codec version, flags, type size,
// decoded size, block size, container size), then for a compressed
// buffer the start of each block, and each block as one stream or, when
// split, one stream per byte of the type; each stream is a 4-byte size
// and the codec's bytes (or the raw bytes when the size is the block's).
const (
	bloscHeader     = 16
	bloscShuffle    = 0x1
	bloscMemcpyed   = 0x2
	bloscBitshuffle = 0x4
	bloscDontSplit  = 0x10
	bloscMaxSplits  = 16
	bloscMinBuffer  = 128
)

// bloscDecompress decodes a blosc container whose decoded size must be
// want bytes (what the chunk's metadata says it holds).
func bloscDecompress(src []byte, want int) ([]byte, error) {
	if len(src) < bloscHeader {
		return nil, fmt.Errorf("blosc: %d bytes, shorter than the 16-byte header", len(src))
	}
	flags := src[2]
	typesize := int(src[3])
	nbytes := int(binary.LittleEndian.Uint32(src[4:]))
	blocksize := int(binary.LittleEndian.Uint32(src[8:]))
	cbytes := int(binary.LittleEndian.Uint32(src[12:]))
	if src[0] == 0 || src[0] > 2 {
		return nil, fmt.Errorf("blosc: format version %d, want 1 or 2 (blosc2 frames are not read)", src[0])
	}
	if nbytes != want {
		return nil, fmt.Errorf("blosc: header says %d decoded bytes, the chunk holds %d", nbytes, want)
	}
	if cbytes > len(src) || cbytes < bloscHeader {
		return nil, fmt.Errorf("blosc: header says %d bytes, the stream has %d", cbytes, len(src))
	}
	src = src[:cbytes]
	if typesize == 0 {
		return nil, fmt.Errorf("blosc: type size 0")
	}
	dst := make([]byte, nbytes)
	if flags&bloscMemcpyed != 0 {
		if cbytes != bloscHeader+nbytes {
			return nil, fmt.Errorf("blosc: an uncompressed container of %d bytes holding %d", cbytes, nbytes)
		}
		copy(dst, src[bloscHeader:])
		return dst, nil
	}
	if nbytes == 0 {
		return dst, nil
	}
	if blocksize <= 0 {
		return nil, fmt.Errorf("blosc: block size %d", blocksize)
	}
	nblocks := (nbytes + blocksize - 1) / blocksize
	if bloscHeader+4*nblocks > cbytes {
		return nil, fmt.Errorf("blosc: %d blocks do not fit %d bytes", nblocks, cbytes)
	}
	codec := flags >> 5
	tmp := make([]byte, min(blocksize, nbytes))
	for j := range nblocks {
		start := int(binary.LittleEndian.Uint32(src[bloscHeader+4*j:]))
		bsize := blocksize
		leftover := j == nblocks-1 && nbytes%blocksize != 0
		if leftover {
			bsize = nbytes % blocksize
		}
		out := dst[j*blocksize : j*blocksize+bsize]
		doShuffle := flags&bloscShuffle != 0 && typesize > 1
		doBit := flags&bloscBitshuffle != 0 && bsize >= typesize
		buf := out
		if doShuffle || doBit {
			buf = tmp[:bsize]
		}
		nsplits := 1
		if flags&bloscDontSplit == 0 && typesize <= bloscMaxSplits && bsize/typesize >= bloscMinBuffer && !leftover {
			nsplits = typesize
		}
		neblock := bsize / nsplits
		if neblock*nsplits != bsize {
			return nil, fmt.Errorf("blosc: block size %d is not a multiple of the type size %d", bsize, typesize)
		}
		off := start
		for s := range nsplits {
			if off < 0 || off+4 > cbytes {
				return nil, fmt.Errorf("blosc: block %d split %d starts at %d, past the %d-byte stream", j, s, off, cbytes)
			}
			n := int(binary.LittleEndian.Uint32(src[off:]))
			off += 4
			if n < 0 || n > cbytes-off {
				return nil, fmt.Errorf("blosc: block %d split %d has %d bytes, past the stream", j, s, n)
			}
			part := buf[s*neblock : (s+1)*neblock]
			if n == neblock {
				copy(part, src[off:off+n])
			} else if err := bloscCodec(codec, src[off:off+n], part); err != nil {
				return nil, fmt.Errorf("blosc: block %d split %d: %w", j, s, err)
			}
			off += n
		}
		if doShuffle {
			unshuffle(out, buf, typesize)
		} else if doBit {
			bitunshuffle(out, buf, typesize)
		}
	}
	return dst, nil
}

// bloscCodec decodes one split with blosc's codec number (the flags' top
// three bits) into dst, which it must fill exactly.
func bloscCodec(codec byte, src, dst []byte) error {
	switch codec {
	case 0:
		return blosclzDecompress(src, dst)
	case 1:
		return lz4Block(src, dst)
	case 2:
		return snappyBlock(src, dst)
	case 3:
		return zlibExact(src, dst)
	case 4:
		return zstdExact(src, dst)
	}
	return fmt.Errorf("codec %d is not read (blosclz 0, lz4 1, snappy 2, zlib 3, zstd 4 are)", codec)
}

// unshuffle undoes blosc's byte shuffle: the block holds byte 0 of every
// element, then byte 1, …; trailing bytes short of an element are as is.
func unshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	for j := range typesize {
		row := src[j*n : (j+1)*n]
		for i, b := range row {
			dst[i*typesize+j] = b
		}
	}
	copy(dst[n*typesize:], src[n*typesize:])
}

// bitunshuffle undoes blosc's bit shuffle (bitshuffle's bit transpose):
// row 8·j+b holds bit b of byte j of every element, eight elements a byte,
// least significant bit first. It applies to a multiple of 8 elements;
// c-blosc 1 copies a block of any other count as is, and so does this.
func bitunshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	clear(dst[:n*typesize])
	rowBytes := n / 8
	for j := range typesize {
		for b := range 8 {
			row := src[(8*j+b)*rowBytes : (8*j+b+1)*rowBytes]
			for k, v := range row {
				if v == 0 {
					continue
				}
				for e := range 8 {
					if v>>e&1 != 0 {
						dst[(8*k+e)*typesize+j] |= 1 << b
					}
				}
			}
		}
	}
	copy(dst[n*typesize:], src[n*typesize:])
}
