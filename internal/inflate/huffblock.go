package inflate

import "encoding/binary"

// decodeHuffman decodes symbols of the current Huffman block into z.out until
// the block ends (state becomes stateBlockHeader), the output area is full, or
// an error. The decoder state lives in locals for the duration so the compiler
// keeps it in registers.
func (z *Reader) decodeHuffman() error {
	src := z.src
	out := z.out[:outBufLen]
	lt, dt := z.lt, z.dt
	pos, bitbuf, bitcnt := z.pos, z.bitbuf, z.bitcnt
	wpos, start := z.wpos, z.start

	for {
		// Fast loop: no input-end or output-end checks per symbol. Each refill
		// leaves 56..63 valid bits: enough for three literals (3 x 15 bits) or
		// one length plus distance (15+5 + 15+13 = 48 bits).
		for pos <= len(src)-fastInMargin && wpos < outLimit {
			// Branch-free refill (libdeflate): load 8 bytes, advance pos by the
			// whole bytes that fit. Bits above bitcnt may already hold the next
			// input bits; OR-ing the same bits again is harmless.
			bitbuf |= binary.LittleEndian.Uint64(src[pos:]) << (bitcnt & 63)
			pos += int((63 - bitcnt) >> 3)
			bitcnt |= 56

			e := lt[bitbuf&(1<<litBits-1)]
			if e&entryLiteral != 0 {
				// Literal-heavy data (noisy images) spends most time here:
				// decode up to three literals per refill.
				bitbuf >>= e & 63
				bitcnt -= uint(e & 63)
				out[wpos] = byte(e >> 16)
				wpos++
				e = lt[bitbuf&(1<<litBits-1)]
				if e&entryLiteral != 0 {
					bitbuf >>= e & 63
					bitcnt -= uint(e & 63)
					out[wpos] = byte(e >> 16)
					wpos++
					e = lt[bitbuf&(1<<litBits-1)]
					if e&entryLiteral != 0 {
						bitbuf >>= e & 63
						bitcnt -= uint(e & 63)
						out[wpos] = byte(e >> 16)
						wpos++
						continue
					}
				}
				// At most 30 bits used, >= 26 left: e (indexed by 11 bits) is
				// valid, but a match needs 48 bits, so refill before it. The
				// refill does not change the low bits e was looked up with.
				bitbuf |= binary.LittleEndian.Uint64(src[pos:]) << (bitcnt & 63)
				pos += int((63 - bitcnt) >> 3)
				bitcnt |= 56
			}
			if e&entryExceptional != 0 {
				if e&entrySubtable != 0 {
					bitbuf >>= litBits
					bitcnt -= litBits
					e = lt[(e>>16+uint32(bitbuf)&(1<<(e>>8&31)-1))&(litTableSize-1)]
				}
				if e&entryLiteral != 0 {
					bitbuf >>= e & 63
					bitcnt -= uint(e & 63)
					out[wpos] = byte(e >> 16)
					wpos++
					continue
				}
				if e&entryExceptional != 0 {
					if e&entryEOB != 0 {
						bitbuf >>= e & 63
						bitcnt -= uint(e & 63)
						z.state = stateBlockHeader
						z.pos, z.bitbuf, z.bitcnt, z.wpos = pos, bitbuf, bitcnt, wpos
						return nil
					}
					return z.corrupt(pos-int(bitcnt/8), "invalid literal/length code")
				}
			}
			// Length: base plus extra bits, consumed with the codeword.
			saved := bitbuf
			bitbuf >>= e & 63
			bitcnt -= uint(e & 63)
			length := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&31))

			e = dt[bitbuf&(1<<distBits-1)]
			if e&entryExceptional != 0 {
				if e&entrySubtable != 0 {
					bitbuf >>= distBits
					bitcnt -= distBits
					e = dt[(e>>16+uint32(bitbuf)&(1<<(e>>8&31)-1))&(distTableSize-1)]
				}
				if e&entryExceptional != 0 {
					return z.corrupt(pos-int(bitcnt/8), "invalid distance code")
				}
			}
			saved = bitbuf
			bitbuf >>= e & 63
			bitcnt -= uint(e & 63)
			dist := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&31))
			if dist > wpos-start {
				return z.corrupt(pos-int(bitcnt/8), "invalid distance %d (only %d bytes decoded)", dist, wpos-start)
			}

			// Match copy. Overrunning the end by up to 7 bytes is fine: the
			// slack absorbs it and later output overwrites it.
			s := wpos - dist
			end := wpos + length
			switch {
			case dist >= 8:
				// Each 8-byte load reads bytes at least 8 behind the store,
				// all already final.
				for wpos < end {
					binary.LittleEndian.PutUint64(out[wpos:], binary.LittleEndian.Uint64(out[s:]))
					wpos += 8
					s += 8
				}
			case dist == 1:
				v := uint64(out[s]) * 0x0101010101010101
				for wpos < end {
					binary.LittleEndian.PutUint64(out[wpos:], v)
					wpos += 8
				}
			default:
				for wpos < end {
					out[wpos] = out[s]
					wpos++
					s++
				}
			}
			wpos = end
		}
		if z.eof || wpos >= outLimit {
			break
		}
		// Fewer than fastInMargin bytes left in the window and more input to
		// come: refill it (moving at most fastInMargin+8 bytes) and go on. The
		// bit buffer stays as it is; fill keeps src[pos:] in step with it.
		z.pos, z.bitbuf, z.bitcnt = pos, bitbuf, bitcnt
		z.fill()
		src, pos = z.src, z.pos
	}

	// Slow loop near the end of the input: one symbol per iteration, a
	// checked byte-wise refill, and a check that no padding bits were used
	// before anything is written.
	for wpos < outLimit {
		for bitcnt < 56 {
			if pos < len(src) {
				bitbuf |= uint64(src[pos]) << bitcnt
			}
			pos++
			bitcnt += 8
		}
		e := lt[bitbuf&(1<<litBits-1)]
		if e&entrySubtable != 0 {
			bitbuf >>= litBits
			bitcnt -= litBits
			e = lt[(e>>16+uint32(bitbuf)&(1<<(e>>8&31)-1))&(litTableSize-1)]
		}
		saved := bitbuf
		bitbuf >>= e & 63
		bitcnt -= uint(e & 63)
		if pos*8-int(bitcnt) > len(src)*8 {
			return z.truncated("DEFLATE stream")
		}
		if e&entryLiteral != 0 {
			out[wpos] = byte(e >> 16)
			wpos++
			continue
		}
		if e&entryExceptional != 0 {
			if e&entryEOB != 0 {
				z.state = stateBlockHeader
				break
			}
			return z.corrupt(pos-int(bitcnt/8), "invalid literal/length code")
		}
		length := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&31))

		e = dt[bitbuf&(1<<distBits-1)]
		if e&entrySubtable != 0 {
			bitbuf >>= distBits
			bitcnt -= distBits
			e = dt[(e>>16+uint32(bitbuf)&(1<<(e>>8&31)-1))&(distTableSize-1)]
		}
		saved = bitbuf
		bitbuf >>= e & 63
		bitcnt -= uint(e & 63)
		if pos*8-int(bitcnt) > len(src)*8 {
			return z.truncated("DEFLATE stream")
		}
		if e&entryExceptional != 0 {
			return z.corrupt(pos-int(bitcnt/8), "invalid distance code")
		}
		dist := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&31))
		if dist > wpos-start {
			return z.corrupt(pos-int(bitcnt/8), "invalid distance %d (only %d bytes decoded)", dist, wpos-start)
		}
		for s, end := wpos-dist, wpos+length; wpos < end; wpos, s = wpos+1, s+1 {
			out[wpos] = out[s]
		}
	}
	z.pos, z.bitbuf, z.bitcnt, z.wpos = pos, bitbuf, bitcnt, wpos
	return nil
}
