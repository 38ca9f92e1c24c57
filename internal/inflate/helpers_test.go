package inflate

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	kpgzip "github.com/klauspost/compress/gzip"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// Test data generators; all deterministic.

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// mriLike returns little-endian int16 samples of a smooth 3D-ish field plus
// Gaussian noise: compresses about 2x, literal heavy, like MRI volumes.
func mriLike(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n&^1)
	for i := 0; i < len(b)/2; i++ {
		x, y := float64(i%96), float64(i/96%96)
		v := 600*math.Sin(x/15)*math.Cos(y/11) + 800 + 40*r.NormFloat64()
		if i%7 == 0 && i/96%96 < 10 {
			v = 0 // background rows: runs of zeros
		}
		binary.LittleEndian.PutUint16(b[2*i:], uint16(int16(v)))
	}
	return b
}

// runs returns highly repetitive data: long runs and short repeating motifs.
func runs(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, 0, n)
	for len(b) < n {
		switch r.IntN(3) {
		case 0:
			b = append(b, bytes.Repeat([]byte{byte(r.IntN(4))}, 1+r.IntN(2000))...)
		case 1:
			m := randomBytes(1+r.IntN(7), r.Uint64())
			b = append(b, bytes.Repeat(m, 1+r.IntN(100))...)
		default:
			b = append(b, byte(r.IntN(256)))
		}
	}
	return b[:n]
}

func text(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 4))
	words := []string{"the", "voxel", "of", "a", "brain", "scan", "is", "noisy", "and", "gzip",
		"inflate", "decoder", "table", "Huffman", "\n", "distance", "length", "literal"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

var generators = []struct {
	name string
	gen  func(int, uint64) []byte
}{
	{"random", randomBytes},
	{"mri", mriLike},
	{"runs", runs},
	{"text", text},
}

func gzipStd(t testing.TB, data []byte, level int) []byte {
	return gzipWith(t, data, func(w io.Writer) (io.WriteCloser, error) { return stdgzip.NewWriterLevel(w, level) })
}

func gzipKP(t testing.TB, data []byte, level int) []byte {
	return gzipWith(t, data, func(w io.Writer) (io.WriteCloser, error) { return kpgzip.NewWriterLevel(w, level) })
}

// gzipWith compresses data with the writer newWriter makes.
func gzipWith(t testing.TB, data []byte, newWriter func(io.Writer) (io.WriteCloser, error)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := newWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gzipWrap frames a raw DEFLATE stream as a minimal gzip member for data.
func gzipWrap(deflate, data []byte) []byte {
	b := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}
	b = append(b, deflate...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(data))
	return binary.LittleEndian.AppendUint32(b, uint32(len(data)))
}

// stdDecode decodes with compress/gzip, capping output at limit bytes.
func stdDecode(src []byte, limit int64) ([]byte, error) {
	zr, err := stdgzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, limit))
}

// readAll decodes src with z, calling Read with a bufSize buffer (0: WriteTo).
func readAll(z *Reader, src []byte, bufSize int) ([]byte, error) {
	if err := z.Reset(src); err != nil {
		return nil, err
	}
	return drain(z, bufSize)
}

// drain reads z to the end with a bufSize buffer (0: WriteTo).
func drain(z *Reader, bufSize int) ([]byte, error) {
	var out bytes.Buffer
	if bufSize == 0 {
		_, err := z.WriteTo(&out)
		return out.Bytes(), err
	}
	buf := make([]byte, bufSize)
	for {
		n, err := z.Read(buf)
		if n < 0 || n > len(buf) {
			return nil, io.ErrShortBuffer
		}
		out.Write(buf[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

// bitWriter builds DEFLATE streams by hand (LSB-first bit order).
type bitWriter struct {
	out   []byte
	acc   uint64
	nbits uint
}

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.nbits
	w.nbits += n
	for w.nbits >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nbits -= 8
	}
}

// huff writes an n-bit Huffman codeword (sent most significant bit first).
func (w *bitWriter) huff(code uint64, n uint) {
	w.bits(uint64(bits.Reverse16(uint16(code))>>(16-n)), n)
}

func (w *bitWriter) flush() []byte {
	if w.nbits > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc, w.nbits = 0, 0
	}
	return w.out
}

// fixedSym writes litlen symbol s with the fixed code.
func (w *bitWriter) fixedSym(s int) {
	switch {
	case s < 144:
		w.huff(uint64(0x30+s), 8)
	case s < 256:
		w.huff(uint64(0x190+s-144), 9)
	case s < 280:
		w.huff(uint64(s-256), 7)
	default:
		w.huff(uint64(0xc0+s-280), 8)
	}
}

var (
	tLenBase   = []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	tLenExtra  = []uint{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	tDistBase  = []int{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	tDistExtra = []uint{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
)

// fixedMatch writes a (length, distance) pair with the fixed code.
func (w *bitWriter) fixedMatch(length, dist int) {
	i := len(tLenBase) - 1
	for tLenBase[i] > length {
		i--
	}
	if length == 258 {
		i = 28
	}
	w.fixedSym(257 + i)
	w.bits(uint64(length-tLenBase[i]), tLenExtra[i])
	j := len(tDistBase) - 1
	for tDistBase[j] > dist {
		j--
	}
	w.huff(uint64(j), 5)
	w.bits(uint64(dist-tDistBase[j]), tDistExtra[j])
}

// stored writes a stored block (aligning first).
func (w *bitWriter) stored(data []byte, final bool) {
	f := uint64(0)
	if final {
		f = 1
	}
	w.bits(f, 3)
	w.flush()
	w.out = binary.LittleEndian.AppendUint16(w.out, uint16(len(data)))
	w.out = binary.LittleEndian.AppendUint16(w.out, ^uint16(len(data)))
	w.out = append(w.out, data...)
}

// lighter reports whether the big matrices run reduced: with -short, and
// under the race detector (where TestMatrix and TestLarge skip themselves:
// it makes this single-goroutine decoder ~10× slower without finding
// anything a plain run would not; the project's concurrency code is tested
// under it in full).
func lighter() bool { return testing.Short() || testutil.Race }
