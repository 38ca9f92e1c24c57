package inflate

import "math/bits"

// Decode-table geometry. Each table is a primary table indexed by the next
// tableBits input bits, followed by subtables for codewords longer than
// tableBits. The array lengths are powers of two so the hot loop can mask
// indexes (t[i&(len-1)]) and the compiler drops the bounds checks. The worst
// cases (computed by zlib's examples/enough.c, as used by libdeflate) are 2342
// entries for 288 litlen symbols with an 11-bit primary table and 402 entries
// for 32 distance symbols with an 8-bit primary table; buildTable also refuses
// to overflow, so a bad guess could never write out of range.
const (
	litBits       = 11
	litTableSize  = 4096
	distBits      = 8
	distTableSize = 512
	clBits        = 7 // code-length codes are at most 7 bits: no subtables
	clTableSize   = 1 << clBits

	maxLitSyms  = 288 // fixed code defines 288; dynamic blocks may use 286
	maxDistSyms = 32  // fixed code defines 32; dynamic blocks may use 30
	maxCodeLen  = 15
)

// A table entry is a uint32:
//
//	bits 0-7   number of input bits to consume: codeword length plus, for
//	           length and distance symbols, the extra bits, so one shift
//	           consumes both. For a subtable pointer it is the primary width.
//	bits 8-12  codeword length alone (where the extra bits start); for a
//	           subtable pointer, the subtable's index width.
//	bit  13    end of block
//	bit  14    subtable pointer
//	bit  15    exceptional: subtable, end of block or invalid code. Literal,
//	           length and distance entries have it clear so the hot path tests
//	           one bit.
//	bits 16-30 value: literal byte, length base, distance base, subtable
//	           start, or code-length symbol.
//	bit  31    literal
const (
	entryEOB         = 1 << 13
	entrySubtable    = 1 << 14
	entryExceptional = 1 << 15
	entryLiteral     = 1 << 31
	entryInvalid     = entryExceptional // neither EOB nor subtable
)

// Per-symbol entry templates (value, flags and extra-bit count in bits 0-7);
// buildTable adds the codeword length. They are written once at package
// initialisation and only read afterwards.
var (
	litTemplates  = makeLitTemplates()
	distTemplates = makeDistTemplates()
	clTemplates   = makeCLTemplates()
)

func makeLitTemplates() (t [maxLitSyms]uint32) {
	// RFC 1951 section 3.2.5: length symbols 257..285.
	lengthBase := [29]uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
		35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra := [29]uint32{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
		3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	for s := 0; s < 256; s++ {
		t[s] = entryLiteral | uint32(s)<<16
	}
	t[256] = entryExceptional | entryEOB
	for i := range lengthBase {
		t[257+i] = lengthBase[i]<<16 | lengthExtra[i]
	}
	// 286 and 287 take part in the fixed code but must never be decoded.
	t[286], t[287] = entryInvalid, entryInvalid
	return t
}

func makeDistTemplates() (t [maxDistSyms]uint32) {
	distBase := [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
		257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra := [30]uint32{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
		7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	for i := range distBase {
		t[i] = distBase[i]<<16 | distExtra[i]
	}
	t[30], t[31] = entryInvalid, entryInvalid // fixed code only; invalid
	return t
}

func makeCLTemplates() (t [19]uint32) {
	for s := range t {
		t[s] = uint32(s) << 16
	}
	return t
}

// buildTable builds the canonical-Huffman decode table for code lengths lens
// (lens[s] is symbol s's codeword length, 0 for unused) into t, using entry
// templates tmpl. It reports false for code-length sets compress/flate rejects:
// over-subscribed codes, and incomplete codes other than the two degenerate
// shapes zlib and Go accept (no codes at all, or a single code of length 1);
// unused bit patterns of those decode to invalid entries, an error only if
// the stream actually uses them.
func buildTable(t []uint32, lens []uint8, tmpl []uint32, tableBits uint) bool {
	var count [maxCodeLen + 1]int
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	left, maxLen, numCodes := 1, 0, 0
	for l := 1; l <= maxCodeLen; l++ {
		left <<= 1
		left -= count[l]
		if left < 0 {
			return false // over-subscribed
		}
		if count[l] > 0 {
			maxLen = l
		}
		numCodes += count[l]
	}
	tableSize := 1 << tableBits
	if left > 0 {
		if numCodes != 0 && !(numCodes == 1 && count[1] == 1) {
			return false // incomplete
		}
		for i := range t[:tableSize] {
			t[i] = entryInvalid | 1
		}
		if numCodes == 0 {
			return true
		}
	}

	// Sort symbols by (length, symbol): canonical code order.
	var sorted [maxLitSyms]uint16
	var offs [maxCodeLen + 2]int
	for l := 1; l <= maxCodeLen; l++ {
		offs[l+1] = offs[l] + count[l]
	}
	for s, l := range lens {
		if l != 0 {
			sorted[offs[l]] = uint16(s)
			offs[l]++
		}
	}

	remaining := count
	code := 0 // canonical codeword, most significant bit first
	idx := 0
	next := tableSize // first free subtable slot
	curPrefix := -1
	subStart, subBits := 0, 0
	tb := int(tableBits)
	for l := 1; l <= maxLen; l++ {
		for k := 0; k < count[l]; k++ {
			e := tmpl[sorted[idx]]
			idx++
			// DEFLATE sends codewords MSB first into an LSB-first bit
			// stream, so the table is indexed by the reversed codeword.
			rev := int(bits.Reverse16(uint16(code)) >> (16 - l))
			if l <= tb {
				e += uint32(l) | uint32(l)<<8
				for i := rev; i < tableSize; i += 1 << l {
					t[i] = e
				}
			} else {
				prefix := rev & (tableSize - 1)
				if prefix != curPrefix {
					// Codes sharing a prefix are contiguous in canonical
					// order. Size the subtable like zlib: grow it while the
					// remaining longer codes would not fit.
					curPrefix = prefix
					sb := l - tb
					room := 1 << sb
					for sb+tb < maxLen {
						room -= remaining[sb+tb]
						if room <= 0 {
							break
						}
						sb++
						room <<= 1
					}
					if next+1<<sb > len(t) {
						return false
					}
					subStart, subBits = next, sb
					t[prefix] = entryExceptional | entrySubtable | uint32(subStart)<<16 | uint32(sb)<<8 | uint32(tb)
					next += 1 << sb
				}
				sl := l - tb
				e += uint32(sl) | uint32(sl)<<8
				for i := rev >> tb; i < 1<<subBits; i += 1 << sl {
					t[subStart+i] = e
				}
			}
			remaining[l]--
			code++
		}
		code <<= 1
	}
	return true
}
