// Package inflate is a fast pure-Go gzip (RFC 1952) / DEFLATE (RFC 1951)
// decoder for compressed files held wholly in memory (Reset) or read through
// an io.Reader into an internal input window (ResetReader).
//
// Because the input is a []byte (the whole file, or a 256 KiB window over it
// refilled only when fewer than a few dozen bytes remain), the decoder keeps
// a 64-bit bit buffer refilled eight bytes at a time without per-byte reads,
// decodes with libdeflate-style packed tables, and writes into a large flat
// output buffer instead of a 32 KiB ring, so the hot loop checks for room
// once per symbol group and copies matches eight bytes at a time. It accepts
// and rejects the same streams as compress/gzip (with multistream on, the
// default). On noisy 16-bit MRI data it inflates twice as fast as
// klauspost/compress (docs/bench/inflate.md), which is why the NIfTI reader
// uses it; klauspost/compress still writes .nii.gz files.
package inflate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrHeader is returned (wrapped, with the byte offset) for an invalid gzip
// member header, and for trailing bytes after the last member that do not
// start a new member, as compress/gzip does.
var ErrHeader = errors.New("inflate: invalid gzip header")

// ErrChecksum is returned (wrapped, with the byte offset) when a member's
// CRC-32 or ISIZE trailer does not match the decoded data.
var ErrChecksum = errors.New("inflate: invalid checksum")

// CorruptError reports invalid DEFLATE data, or truncated input (then Err is
// io.ErrUnexpectedEOF), at byte Offset of the compressed input.
type CorruptError struct {
	Offset int64  // byte offset into the whole compressed input
	Msg    string // what is wrong
	Err    error  // underlying cause, if any (io.ErrUnexpectedEOF for truncation)
}

// Error implements the error interface.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("inflate: offset %d: %s", e.Offset, e.Msg)
}

// Unwrap returns the underlying cause, so errors.Is(err, io.ErrUnexpectedEOF)
// identifies truncated input.
func (e *CorruptError) Unwrap() error { return e.Err }

// The error constructors take an offset into the window z.src and report it
// as an offset into the whole compressed input.

func (z *Reader) corrupt(off int, format string, args ...any) error {
	return &CorruptError{Offset: z.base + int64(off), Msg: fmt.Sprintf(format, args...)}
}

// truncated reports that the input ended inside what. If the input reader
// failed, that is the cause, and its error is returned (wrapped) instead.
func (z *Reader) truncated(what string) error {
	off := z.base + int64(len(z.src))
	if z.rerr != nil {
		return fmt.Errorf("inflate: offset %d: reading input: %w", off, z.rerr)
	}
	return &CorruptError{Offset: off, Msg: "unexpected end of input in " + what, Err: io.ErrUnexpectedEOF}
}

func (z *Reader) headerError(off int, what string) error {
	return fmt.Errorf("inflate: offset %d: %s: %w", z.base+int64(off), what, ErrHeader)
}

// Output buffer layout: histSize bytes of history (the DEFLATE window) then
// a fresh area of areaSize bytes the decoder fills; slack beyond that lets a
// symbol that starts before the limit finish (a match writes at most 258
// bytes, rounded up to whole 8-byte words by the fast copy).
const (
	histSize  = 32 << 10
	areaSize  = 256 << 10
	outLimit  = histSize + areaSize
	outSlack  = 512
	outBufLen = outLimit + outSlack
)

// Input window for ResetReader. The decoder refills it (moving the unread
// tail to the front and reading until it is full or the reader is at EOF)
// when the fast loop has fewer than fastInMargin bytes left, and before
// anything that reads more than that without checks when fewer than
// inMargin bytes are left: a gzip header's fixed part, FNAME, FCOMMENT and
// FHCRC (at most 10+2+512+512+2 bytes; an FEXTRA field, up to 65535 bytes,
// is skipped through refills) and a block header (a dynamic one is at most
// about 570 bytes). Everything else (stored data, the trailer) takes what
// the window holds and refills as it goes. So any window of at least
// minWindow bytes works; defaultWindow makes refills rare.
const (
	inMargin      = 2 << 10
	minWindow     = inMargin + 64
	defaultWindow = 256 << 10
)

// Decoder states.
const (
	stateBlockHeader = iota // at the start of a block (or member end if z.final)
	stateStored             // inside a stored block, z.storedLeft bytes to go
	stateHuffman            // inside a Huffman block using z.lt and z.dt
	stateTrailer            // final block done; trailer not yet checked
)

// Reader decompresses a gzip file (RFC 1952: one or more members, each a
// DEFLATE stream, RFC 1951) held wholly in memory or read from an io.Reader.
// The zero value is ready to Reset or ResetReader; a Reader is not safe for
// concurrent use. Reuse one Reader across files: after the first Reset (and
// the first ResetReader) it allocates nothing.
type Reader struct {
	src    []byte // input window: the whole input (Reset) or z.win[:n] (ResetReader)
	pos    int    // next input byte to load into bitbuf (may pass len(src) by phantom zero bytes at the end, only once eof)
	bitbuf uint64 // input bits, next bit lowest; bits above bitcnt are either zero or the true following input
	bitcnt uint   // number of valid bits in bitbuf

	base int64     // offset of src[0] in the whole compressed input
	eof  bool      // src ends where the input ends (always so after Reset)
	r    io.Reader // ResetReader's source; nil after Reset
	rerr error     // r's error other than io.EOF; reported when the input runs out
	win  []byte    // ResetReader's input buffer, allocated on first use
	// winSize is the window size to allocate (0: defaultWindow; at least
	// minWindow). Tests set it small to exercise refills.
	winSize int

	out   []byte // outBufLen bytes: history, fresh area, slack
	rpos  int    // out[rpos:wpos] is decoded but not yet handed out
	wpos  int
	start int // out index where the current member's data begins (history limit for distances)

	state      int
	final      bool // the current block is the member's last
	storedLeft int
	crc        uint32 // CRC-32 of the current member's bytes handed out so far
	size       uint32 // and their count mod 2^32
	err        error  // sticky error (io.EOF at the end)

	lt *[litTableSize]uint32 // current block's tables: dynamic or fixed
	dt *[distTableSize]uint32

	fixedBuilt bool
	fixedLit   [litTableSize]uint32
	fixedDist  [distTableSize]uint32
	dynLit     [litTableSize]uint32
	dynDist    [distTableSize]uint32
	clTable    [clTableSize]uint32
	lens       [maxLitSyms + maxDistSyms]uint8
}

// Reset starts decoding src (the whole .gz file), which must stay unmodified
// while z reads it. It parses the first member's header and returns its error,
// which Read then also returns. Like compress/gzip, an empty src yields io.EOF.
// Reset allocates only the first time it is called on a Reader.
func (z *Reader) Reset(src []byte) error {
	// The in-memory input is a window already at EOF: nothing to refill.
	z.src, z.base, z.eof, z.r, z.rerr = src, 0, true, nil, nil
	return z.start0()
}

// ResetReader starts decoding the gzip stream read from r, through an
// internal input buffer (allocated on first use and reused). It reads r in
// large chunks (256 KiB, io.ReadFull-style), so it may read ahead of what has
// been decoded; it reads r to its end, since bytes after the last member must
// be another member. Decoding behaves exactly as Reset on the same bytes (same
// data, same errors and offsets); a read error other than io.EOF is returned
// wrapped, with the offset where input stopped, once the decoder needs the
// missing input. Like Reset, it parses the first member's header and returns
// its error, which Read then also returns; it allocates only on first use.
func (z *Reader) ResetReader(r io.Reader) error {
	if r == nil {
		z.Reset(nil) // drop the previous stream's state
		z.err = errors.New("inflate: ResetReader(nil)")
		return z.err
	}
	if z.win == nil {
		n := z.winSize
		if n == 0 {
			n = defaultWindow
		}
		z.win = make([]byte, max(n, minWindow))
	}
	z.src, z.base, z.eof, z.r, z.rerr = z.win[:0], 0, false, r, nil
	return z.start0()
}

func (z *Reader) start0() error {
	if z.out == nil {
		z.out = make([]byte, outBufLen)
	}
	z.pos, z.bitbuf, z.bitcnt = 0, 0, 0
	z.rpos, z.wpos, z.start = 0, 0, 0
	z.err = z.readHeader()
	return z.err
}

// errBadCount reports an io.Reader returning an impossible count.
var errBadCount = errors.New("inflate: input reader returned an invalid count")

// fill moves the unread input to the front of the window and reads from z.r
// until the window is full, r is at EOF or fails (then z.eof is set, and
// z.rerr for a failure). It keeps the bytes whose bits are still in the bit
// buffer (at most 8 before pos), so offset and alignToByte stay valid, and
// the bits above bitcnt that the fast loop preloaded still match src[pos:].
// Only for !z.eof, when pos <= len(src).
func (z *Reader) fill() {
	k := z.pos - int((z.bitcnt+7)/8)
	n := copy(z.win, z.src[k:])
	z.base += int64(k)
	z.pos -= k
	for empty := 0; n < len(z.win); {
		m, err := z.r.Read(z.win[n:])
		if m < 0 || m > len(z.win)-n {
			m, err = 0, errBadCount
		}
		n += m
		if err != nil {
			z.eof = true
			if err != io.EOF {
				z.rerr = err
			}
			break
		}
		if m > 0 {
			empty = 0
		} else if empty++; empty == 100 { // as bufio does
			z.eof, z.rerr = true, io.ErrNoProgress
			break
		}
	}
	z.src = z.win[:n]
}

// ensure refills the window if fewer than n <= minWindow-8 bytes are left
// after pos and the input goes on; then at least n are there or z.eof is set.
func (z *Reader) ensure(n int) {
	if !z.eof && len(z.src)-z.pos < n {
		z.fill()
	}
}

// Read implements io.Reader. It fills p as far as the data allows. After the
// last member it returns io.EOF, having verified every member's CRC-32 and
// ISIZE. Concatenated members are decoded in sequence; as in compress/gzip,
// bytes after a member that are not another gzip header are an error
// (ErrHeader, or io.ErrUnexpectedEOF for fewer than 10 bytes), so trailing
// zero padding is rejected too.
func (z *Reader) Read(p []byte) (n int, err error) {
	if z.src == nil && z.err == nil {
		return 0, errors.New("inflate: Read before Reset")
	}
	for n < len(p) {
		if z.rpos < z.wpos {
			m := copy(p[n:], z.out[z.rpos:z.wpos])
			z.crc = crc32.Update(z.crc, crc32.IEEETable, p[n:n+m])
			z.size += uint32(m)
			z.rpos += m
			n += m
			continue
		}
		if z.err != nil {
			return n, z.err
		}
		z.err = z.step()
	}
	return n, nil
}

// WriteTo implements io.WriterTo, writing the decompressed data to w
// straight from the internal buffer (io.Copy uses it and saves a copy).
func (z *Reader) WriteTo(w io.Writer) (int64, error) {
	if z.src == nil && z.err == nil {
		return 0, errors.New("inflate: WriteTo before Reset")
	}
	var total int64
	for {
		if z.rpos < z.wpos {
			b := z.out[z.rpos:z.wpos]
			z.crc = crc32.Update(z.crc, crc32.IEEETable, b)
			z.size += uint32(len(b))
			z.rpos = z.wpos
			m, err := w.Write(b)
			total += int64(m)
			if err == nil && m < len(b) {
				err = io.ErrShortWrite
			}
			if err != nil {
				// Data already checksummed cannot be handed out again.
				z.err = err
				return total, err
			}
			continue
		}
		if z.err != nil {
			if z.err == io.EOF {
				return total, nil
			}
			return total, z.err
		}
		z.err = z.step()
	}
}

// step makes progress when all decoded bytes have been handed out: it either
// decodes more data into the output area or, at a member's end, checks the
// trailer and starts the next member. It returns io.EOF after the last member.
func (z *Reader) step() error {
	if z.state == stateTrailer {
		if err := z.readTrailer(); err != nil {
			return err
		}
		return z.readHeader() // io.EOF at the end of the input
	}
	if z.wpos >= outLimit {
		// Output area full and handed out: keep the last 32 KiB as history.
		shift := z.wpos - histSize
		copy(z.out[:histSize], z.out[shift:z.wpos])
		z.wpos, z.rpos = histSize, histSize
		z.start = max(z.start-shift, 0)
	}
	return z.decode()
}

// readHeader parses a gzip member header at z.pos (byte aligned, bit buffer
// empty), following compress/gzip: reserved flag bits are ignored, FNAME and
// FCOMMENT must end within 512 bytes, and FHCRC is verified. At the end of
// the input it returns io.EOF (or the input reader's error).
func (z *Reader) readHeader() error {
	z.ensure(inMargin)
	src, p := z.src, z.pos
	if p == len(src) {
		if z.rerr != nil {
			return z.truncated("gzip header")
		}
		return io.EOF // no more members
	}
	if len(src)-p < 10 {
		return z.truncated("gzip header")
	}
	if src[p] != 0x1f || src[p+1] != 0x8b {
		return z.headerError(p, "bad magic number")
	}
	if src[p+2] != 8 {
		return z.headerError(p+2, "unsupported compression method")
	}
	flg := src[p+3]
	q := p + 10
	var hcrc uint32    // CRC-32 of the header bytes before src[p:q]
	if flg&0x04 != 0 { // FEXTRA
		if len(src)-q < 2 {
			return z.truncated("gzip header extra field")
		}
		xlen := int(binary.LittleEndian.Uint16(src[q:]))
		q += 2
		// The field may be longer than the window: skip it through refills.
		for len(src)-q < xlen {
			if z.eof {
				return z.truncated("gzip header extra field")
			}
			hcrc = crc32.Update(hcrc, crc32.IEEETable, src[p:])
			xlen -= len(src) - q
			z.pos = len(src)
			z.fill()
			src, p, q = z.src, z.pos, z.pos
		}
		q += xlen
		// Make sure the strings and FHCRC (up to 1026 bytes) are in the window.
		hcrc = crc32.Update(hcrc, crc32.IEEETable, src[p:q])
		z.pos = q
		z.ensure(inMargin)
		src, p, q = z.src, z.pos, z.pos
	}
	for _, f := range [2]byte{0x08, 0x10} { // FNAME, FCOMMENT: NUL-terminated
		if flg&f == 0 {
			continue
		}
		end := min(len(src), q+512) // compress/gzip's limit, NUL included
		i := q
		for i < end && src[i] != 0 {
			i++
		}
		if i == end {
			if end == len(src) && end-q < 512 {
				return z.truncated("gzip header string")
			}
			return z.headerError(q, "header string too long")
		}
		q = i + 1
	}
	if flg&0x02 != 0 { // FHCRC: low 16 bits of the CRC-32 of the header so far
		if len(src)-q < 2 {
			return z.truncated("gzip header CRC")
		}
		hcrc = crc32.Update(hcrc, crc32.IEEETable, src[p:q])
		if uint16(hcrc) != binary.LittleEndian.Uint16(src[q:]) {
			return z.headerError(q, "header CRC mismatch")
		}
		q += 2
	}
	z.pos = q
	z.bitbuf, z.bitcnt = 0, 0
	z.state = stateBlockHeader
	z.final = false
	z.crc, z.size = 0, 0
	z.start = z.wpos // a new DEFLATE stream: no history
	return nil
}

// readTrailer checks the CRC-32 and ISIZE after the member's final block.
func (z *Reader) readTrailer() error {
	_, err := z.alignToByte()
	if err != nil {
		return err
	}
	z.ensure(8)
	p := z.pos
	if len(z.src)-p < 8 {
		return z.truncated("gzip trailer")
	}
	crc := binary.LittleEndian.Uint32(z.src[p:])
	size := binary.LittleEndian.Uint32(z.src[p+4:])
	if crc != z.crc || size != z.size {
		return fmt.Errorf("inflate: offset %d: trailer CRC-32 %08x size %d, decoded data has %08x size %d: %w",
			z.base+int64(p), crc, size, z.crc, z.size, ErrChecksum)
	}
	z.pos = p + 8
	return nil
}
