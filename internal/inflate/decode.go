package inflate

import (
	"encoding/binary"
)

// Fast-loop margins. One fast-loop iteration refills at most twice; each
// refill reads 8 bytes at pos and advances pos by at most 7, so 32 bytes of
// input left guarantee the unchecked loads stay inside src. With fewer left,
// the window is refilled if the input goes on; otherwise the checked loop
// finishes the input. On the output
// side an iteration writes at most 2 literals plus a 258-byte match rounded up
// to 8-byte words, which outSlack covers whenever wpos < outLimit.
const fastInMargin = 32

// offset returns the byte offset of the next unconsumed input bit, for errors.
func (z *Reader) offset() int {
	return z.pos - int(z.bitcnt/8)
}

// overread reports whether decoding consumed bits past the end of the input,
// i.e. some of the zero bytes refillSlow shifted in as padding.
func (z *Reader) overread() bool {
	return z.pos*8-int(z.bitcnt) > len(z.src)*8
}

// refillSlow tops the bit buffer up to 56..63 bits one byte at a time.
// Past the end of src it shifts in zero bytes but still advances pos, so
// overread can tell whether any of them were consumed. Used outside the fast
// loop only, where either the window is at EOF or at least inMargin bytes
// were ensured (so it never goes past a window that has more input coming).
func (z *Reader) refillSlow() {
	for z.bitcnt < 56 {
		if z.pos < len(z.src) {
			z.bitbuf |= uint64(z.src[z.pos]) << z.bitcnt
		}
		z.pos++
		z.bitcnt += 8
	}
}

// alignToByte drops the bits up to the next byte boundary, empties the bit
// buffer and returns the byte position of the next input byte.
func (z *Reader) alignToByte() (int, error) {
	z.bitcnt &^= 7
	p := z.pos - int(z.bitcnt/8)
	z.pos, z.bitbuf, z.bitcnt = p, 0, 0
	if p > len(z.src) {
		return p, z.truncated("DEFLATE stream")
	}
	return p, nil
}

// decode decodes blocks until the output area is full (wpos >= outLimit), the
// member's final block has ended (state becomes stateTrailer), or an error.
func (z *Reader) decode() error {
	for z.wpos < outLimit {
		switch z.state {
		case stateBlockHeader:
			if z.final {
				z.state = stateTrailer
				return nil
			}
			if err := z.readBlockHeader(); err != nil {
				return err
			}
		case stateStored:
			if err := z.copyStored(); err != nil {
				return err
			}
		case stateHuffman:
			if err := z.decodeHuffman(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

func (z *Reader) readBlockHeader() error {
	// A block header takes at most ~570 bytes (dynamic code lengths): have
	// inMargin in the window, so the checked reads below only pad at EOF.
	// Refilling here also bounds the input needed by endless empty blocks.
	z.ensure(inMargin)
	if z.bitcnt < 3 {
		z.refillSlow()
	}
	hdr := z.bitbuf & 7
	z.bitbuf >>= 3
	z.bitcnt -= 3
	if z.overread() {
		return z.truncated("block header")
	}
	z.final = hdr&1 != 0
	switch hdr >> 1 {
	case 0:
		p, err := z.alignToByte()
		if err != nil {
			return err
		}
		if len(z.src)-p < 4 {
			return z.truncated("stored block header")
		}
		n := binary.LittleEndian.Uint16(z.src[p:])
		nn := binary.LittleEndian.Uint16(z.src[p+2:])
		if n != ^nn {
			return z.corrupt(p, "stored block length %d does not match its complement %d", n, nn)
		}
		z.pos = p + 4
		z.storedLeft = int(n)
		z.state = stateStored
	case 1:
		if !z.fixedBuilt {
			z.buildFixed()
		}
		z.lt, z.dt = &z.fixedLit, &z.fixedDist
		z.state = stateHuffman
	case 2:
		if err := z.readDynamic(); err != nil {
			return err
		}
		z.lt, z.dt = &z.dynLit, &z.dynDist
		z.state = stateHuffman
	default:
		return z.corrupt(z.offset(), "invalid block type 3")
	}
	return nil
}

// buildFixed builds the RFC 1951 fixed-Huffman tables, once per Reader.
func (z *Reader) buildFixed() {
	var lens [maxLitSyms]uint8
	for i := range lens {
		switch {
		case i < 144:
			lens[i] = 8
		case i < 256:
			lens[i] = 9
		case i < 280:
			lens[i] = 7
		default:
			lens[i] = 8
		}
	}
	buildTable(z.fixedLit[:], lens[:], litTemplates[:], litBits)
	var dl [maxDistSyms]uint8
	for i := range dl {
		dl[i] = 5
	}
	buildTable(z.fixedDist[:], dl[:], distTemplates[:], distBits)
	z.fixedBuilt = true
}

// copyStored copies a stored block's bytes straight from the input, as many as
// fit in the output area and the window holds, refilling an empty window.
func (z *Reader) copyStored() error {
	if z.pos == len(z.src) && !z.eof {
		z.fill() // the bit buffer is empty: nothing is moved
	}
	n := min(z.storedLeft, outLimit-z.wpos, len(z.src)-z.pos)
	copy(z.out[z.wpos:z.wpos+n], z.src[z.pos:z.pos+n])
	z.wpos += n
	z.pos += n
	z.storedLeft -= n
	if z.storedLeft == 0 {
		z.state = stateBlockHeader
	} else if z.pos == len(z.src) && z.eof {
		return z.truncated("stored block")
	}
	return nil
}

// codeLengthOrder is the order of the code-length code lengths (RFC 1951 3.2.7).
var codeLengthOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// readDynamic reads a dynamic block's code lengths and builds z.dynLit and
// z.dynDist. It runs once per block, so it uses the simple checked bit reader.
func (z *Reader) readDynamic() error {
	err := z.readDynamicLens()
	if err != nil && z.overread() {
		// The bad lengths came from padding past the end of the input.
		return z.truncated("dynamic block header")
	}
	return err
}

func (z *Reader) readDynamicLens() error {
	z.refillSlow()
	hlit := int(z.bitbuf&31) + 257
	hdist := int(z.bitbuf>>5&31) + 1
	hclen := int(z.bitbuf>>10&15) + 4
	z.bitbuf >>= 14
	z.bitcnt -= 14
	if hlit > 286 || hdist > 30 {
		return z.corrupt(z.offset(), "too many length or distance symbols (%d, %d)", hlit, hdist)
	}
	var cl [19]uint8
	for i := 0; i < hclen; i++ {
		if z.bitcnt < 3 {
			z.refillSlow()
		}
		cl[codeLengthOrder[i]] = uint8(z.bitbuf & 7)
		z.bitbuf >>= 3
		z.bitcnt -= 3
	}
	if z.overread() {
		return z.truncated("dynamic block header")
	}
	if !buildTable(z.clTable[:], cl[:], clTemplates[:], clBits) {
		return z.corrupt(z.offset(), "invalid code-length code")
	}
	n := hlit + hdist
	lens := z.lens[:n]
	for i := 0; i < n; {
		if z.bitcnt < 7+7 {
			z.refillSlow()
		}
		e := z.clTable[z.bitbuf&(clTableSize-1)]
		if e&entryExceptional != 0 {
			return z.corrupt(z.offset(), "invalid code-length symbol")
		}
		z.bitbuf >>= e & 63
		z.bitcnt -= uint(e & 63)
		sym := e >> 16
		if sym < 16 {
			lens[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16:
			if i == 0 {
				return z.corrupt(z.offset(), "code-length repeat with no previous length")
			}
			val = lens[i-1]
			rep = 3 + int(z.bitbuf&3)
			z.bitbuf >>= 2
			z.bitcnt -= 2
		case 17:
			rep = 3 + int(z.bitbuf&7)
			z.bitbuf >>= 3
			z.bitcnt -= 3
		default: // 18
			rep = 11 + int(z.bitbuf&127)
			z.bitbuf >>= 7
			z.bitcnt -= 7
		}
		if i+rep > n {
			return z.corrupt(z.offset(), "code-length repeat past the end (%d+%d > %d)", i, rep, n)
		}
		for ; rep > 0; rep-- {
			lens[i] = val
			i++
		}
	}
	if z.overread() {
		return z.truncated("dynamic block header")
	}
	if !buildTable(z.dynLit[:], lens[:hlit], litTemplates[:], litBits) {
		return z.corrupt(z.offset(), "invalid literal/length code")
	}
	if !buildTable(z.dynDist[:], lens[hlit:], distTemplates[:], distBits) {
		return z.corrupt(z.offset(), "invalid distance code")
	}
	return nil
}
