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
	f, err := parseBlosc(src, want)
	if err != nil {
		return nil, err
	}
	dst := make([]byte, f.nbytes, f.nbytes+zstdSlack) // the slack: the last block decodes in place too
	if err := f.decodeBlocks(0, f.nblocks(), dst, nil); err != nil {
		return nil, err
	}
	return dst, nil
}

// bloscFrame is a parsed blosc container. Its blocks are compressed
// independently, so a reader that needs only part of a chunk decodes
// only the blocks holding that part (decodeBlocks).
type bloscFrame struct {
	// src holds the container's bytes from offset base on: the whole
	// container (base 0), or a window of it holding some blocks' streams
	// (window, withWindow), or nothing (a header kept for its layout).
	src       []byte
	base      int
	cbytes    int // the container's size
	flags     byte
	typesize  int
	nbytes    int   // decoded size
	blocksize int   // decoded bytes per block (the last may hold fewer)
	starts    []int // where each block's streams start in the container
}

// parseBlosc reads a blosc container's header and checks it against the
// decoded size the chunk's metadata gives (want) and the bytes present.
func parseBlosc(src []byte, want int) (bloscFrame, error) {
	// The starts lie before cbytes ≤ len(src): src always holds them.
	f, _, err := parseBloscHead(src, len(src), want)
	if err != nil {
		return f, err
	}
	f.src = src[:f.cbytes]
	return f, nil
}

// parseBloscHead reads the layout of a blosc container of size bytes —
// its header and block starts — from head, its first bytes, without the
// blocks' streams (src is left nil). When head is too short to hold the
// starts, need says how many bytes it must hold (read that many and call
// again); otherwise need is 0.
func parseBloscHead(head []byte, size, want int) (f bloscFrame, need int, err error) {
	if len(head) < bloscHeader {
		return f, 0, fmt.Errorf("blosc: %d bytes, shorter than the 16-byte header", len(head))
	}
	f.flags = head[2]
	f.typesize = int(head[3])
	f.nbytes = int(binary.LittleEndian.Uint32(head[4:]))
	f.blocksize = int(binary.LittleEndian.Uint32(head[8:]))
	cbytes := int(binary.LittleEndian.Uint32(head[12:]))
	if head[0] == 0 || head[0] > 2 {
		return f, 0, fmt.Errorf("blosc: format version %d, want 1 or 2 (blosc2 frames are not read)", head[0])
	}
	if f.nbytes != want {
		return f, 0, fmt.Errorf("blosc: header says %d decoded bytes, the chunk holds %d", f.nbytes, want)
	}
	if cbytes > size || cbytes < bloscHeader {
		return f, 0, fmt.Errorf("blosc: header says %d bytes, the stream has %d", cbytes, size)
	}
	f.cbytes = cbytes
	if f.typesize == 0 {
		return f, 0, fmt.Errorf("blosc: type size 0")
	}
	if f.flags&bloscMemcpyed != 0 {
		if cbytes != bloscHeader+f.nbytes {
			return f, 0, fmt.Errorf("blosc: an uncompressed container of %d bytes holding %d", cbytes, f.nbytes)
		}
		return f, 0, nil
	}
	if f.nbytes == 0 {
		return f, 0, nil
	}
	if f.blocksize <= 0 {
		return f, 0, fmt.Errorf("blosc: block size %d", f.blocksize)
	}
	end := bloscHeader + 4*f.nblocks()
	if end > cbytes {
		return f, 0, fmt.Errorf("blosc: %d blocks do not fit %d bytes", f.nblocks(), cbytes)
	}
	if end > len(head) {
		return f, end, nil
	}
	f.starts = make([]int, f.nblocks())
	for j := range f.starts {
		f.starts[j] = int(binary.LittleEndian.Uint32(head[bloscHeader+4*j:]))
	}
	return f, 0, nil
}

// window returns the container's byte range [lo, hi) holding the streams
// of blocks [j0, j1): from the first of their starts to where the next
// block's streams begin (or the container ends) after the last. c-blosc
// writes blocks in order, so this is about their compressed size.
func (f bloscFrame) window(j0, j1 int) (lo, hi int) {
	if f.flags&bloscMemcpyed != 0 || len(f.starts) == 0 {
		return bloscHeader, f.cbytes
	}
	lo, hi = f.cbytes, bloscHeader
	for j := j0; j < j1; j++ {
		s := f.starts[j]
		end := f.cbytes
		for _, t := range f.starts {
			if t > s && t < end {
				end = t
			}
		}
		lo, hi = min(lo, s), max(hi, end)
	}
	return max(lo, bloscHeader), min(max(hi, lo), f.cbytes)
}

// withWindow is f with b, the container's bytes [lo, lo+len(b)), as its
// source: the blocks whose streams lie there decode from it.
func (f bloscFrame) withWindow(b []byte, lo int) bloscFrame {
	f.src, f.base = b, lo
	return f
}

// nblocks is the number of blocks; an uncompressed (memcpyed) container
// counts as one block of nbytes.
func (f bloscFrame) nblocks() int {
	if f.nbytes == 0 {
		return 0
	}
	if f.flags&bloscMemcpyed != 0 {
		return 1
	}
	return (f.nbytes + f.blocksize - 1) / f.blocksize
}

// blockSpan is the decoded byte range [lo, hi) of block j.
func (f bloscFrame) blockSpan(j int) (lo, hi int) {
	if f.flags&bloscMemcpyed != 0 {
		return 0, f.nbytes
	}
	lo = j * f.blocksize
	return lo, min(lo+f.blocksize, f.nbytes)
}

// decodeBlocks decodes blocks [j0, j1) into their places in dst (the
// whole decoded buffer, nbytes long), in order; bytes outside them are
// left as they are, except up to zstdSlack bytes after the last within
// dst's capacity (decodeBlock's scratch: the next block's, when there is
// one, which is decoded after or not needed) — for valid streams; a
// damaged one may write all of dst's capacity before its error. tmp, when at least a block
// long, is the scratch a shuffled block is decoded into before
// unshuffling (nil: allocated).
func (f bloscFrame) decodeBlocks(j0, j1 int, dst, tmp []byte) error {
	if len(dst) != f.nbytes {
		return fmt.Errorf("blosc: a %d-byte buffer for %d decoded bytes", len(dst), f.nbytes)
	}
	if len(tmp) < min(f.blocksize, f.nbytes) {
		n := min(f.blocksize, f.nbytes)
		tmp = make([]byte, n, n+zstdSlack)
	}
	for j := j0; j < j1; j++ {
		lo, hi := f.blockSpan(j)
		if err := f.decodeBlock(j, dst[lo:hi], tmp); err != nil {
			return err
		}
	}
	return nil
}

// blocksOf returns the blocks [j0, j1) that hold the decoded bytes
// [lo, hi).
func (f bloscFrame) blocksOf(lo, hi int) (j0, j1 int) {
	if f.flags&bloscMemcpyed != 0 || f.nbytes == 0 {
		return 0, f.nblocks()
	}
	return lo / f.blocksize, (hi + f.blocksize - 1) / f.blocksize
}

// decodeBlock decodes block j into out, exactly its decoded bytes
// (blockSpan), through tmp when it is shuffled (allocated when shorter
// than the block). out's capacity past its length (and tmp's) is
// scratch: a zstd split decodes in place when zstdSlack bytes follow it
// there (zstdExact), else through a copy. A caller whose bytes after out
// matter passes out[:n:n] (a valid stream writes at most zstdSlack bytes
// past out, a damaged one up to its capacity before failing).
func (f bloscFrame) decodeBlock(j int, out, tmp []byte) error {
	if lo, hi := f.blockSpan(j); len(out) != hi-lo {
		return fmt.Errorf("blosc: a %d-byte buffer for block %d of %d bytes", len(out), j, hi-lo)
	}
	if f.flags&bloscMemcpyed != 0 {
		if at := bloscHeader - f.base; at < 0 || at+len(out) > len(f.src) {
			return fmt.Errorf("blosc: the uncompressed bytes lie outside the %d bytes read at %d", len(f.src), f.base)
		}
		copy(out, f.src[bloscHeader-f.base:])
		return nil
	}
	// Offsets below are the container's; src holds it from base on, and
	// cbytes is where the bytes read end (the container's end when src
	// is all of it).
	src, flags, typesize, blocksize, nbytes := f.src, f.flags, f.typesize, f.blocksize, f.nbytes
	cbytes := f.base + len(src)
	codec := flags >> 5
	start := f.starts[j]
	if start < f.base {
		return fmt.Errorf("blosc: block %d starts at %d, before the bytes read at %d", j, start, f.base)
	}
	bsize := len(out)
	leftover := j == f.nblocks()-1 && nbytes%blocksize != 0
	doShuffle := flags&bloscShuffle != 0 && typesize > 1
	doBit := flags&bloscBitshuffle != 0 && bsize >= typesize
	buf := out
	if doShuffle || doBit {
		if len(tmp) < bsize {
			tmp = make([]byte, bsize, bsize+zstdSlack)
		}
		buf = tmp[:bsize]
	}
	nsplits := 1
	if flags&bloscDontSplit == 0 && typesize <= bloscMaxSplits && bsize/typesize >= bloscMinBuffer && !leftover {
		nsplits = typesize
	}
	neblock := bsize / nsplits
	if neblock*nsplits != bsize {
		return fmt.Errorf("blosc: block size %d is not a multiple of the type size %d", bsize, typesize)
	}
	off := start
	for s := range nsplits {
		if off < 0 || off+4 > cbytes {
			return fmt.Errorf("blosc: block %d split %d starts at %d, past the %d-byte stream", j, s, off, cbytes)
		}
		n := int(binary.LittleEndian.Uint32(src[off-f.base:]))
		off += 4
		if n < 0 || n > cbytes-off {
			return fmt.Errorf("blosc: block %d split %d has %d bytes, past the stream", j, s, n)
		}
		part := buf[s*neblock : (s+1)*neblock]
		if rel := off - f.base; n == neblock {
			copy(part, src[rel:rel+n])
		} else if err := bloscCodec(codec, src[rel:rel+n], part); err != nil {
			return fmt.Errorf("blosc: block %d split %d: %w", j, s, err)
		}
		off += n
	}
	if doShuffle {
		unshuffle(out, buf, typesize)
	} else if doBit {
		bitunshuffle(out, buf, typesize)
	}
	return nil
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
