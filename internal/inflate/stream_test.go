package inflate

import (
	"bytes"
	"compress/flate"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	kpgzip "github.com/klauspost/compress/gzip"
)

var errBoom = errors.New("boom: disk on fire")

// failReader hands out data[:n] in pieces of at most 1000 bytes, then fails
// with err; withData returns the last piece together with the error.
type failReader struct {
	data     []byte
	err      error
	withData bool
}

func (f *failReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data[:min(len(f.data), 1000)])
	f.data = f.data[n:]
	if len(f.data) == 0 && f.withData {
		return n, f.err
	}
	return n, nil
}

// TestStreamReadError: a source failing anywhere surfaces its error
// (wrapped, with an offset), after exactly the data Reset decodes from the
// same prefix when that prefix is a complete stream, and never hangs.
func TestStreamReadError(t *testing.T) {
	src, data := smallFile(t)
	big := gzipKP(t, mriLike(200000, 3), 6)
	bigData, _ := stdDecode(big, 1<<30)
	zs := streamReaders()
	for _, tc := range []struct {
		src, data []byte
		step      int
	}{{src, data, 1}, {big, bigData, 997}} {
		for n := 0; n < len(tc.src); n += tc.step {
			zr := zs[n%len(zs)]
			got, err := readAllStream(zr, &failReader{tc.src[:n], errBoom, n%2 == 0}, 333)
			if !errors.Is(err, errBoom) || !strings.HasPrefix(err.Error(), "inflate: offset ") {
				t.Fatalf("fail at %d window %d: got %v, want wrapped errBoom", n, len(zr.win), err)
			}
			if !bytes.HasPrefix(tc.data, got) {
				t.Fatalf("fail at %d: wrong data", n)
			}
		}
	}
	// The error is reported once the missing input is needed, even when the
	// window still holds data: the decoded prefix is all there.
	var z Reader
	got, err := readAllStream(&z, &failReader{big[:len(big)-8], errBoom, true}, 0)
	if !errors.Is(err, errBoom) || !bytes.Equal(got, bigData) {
		t.Fatalf("fail in trailer: %v, %d of %d bytes", err, len(got), len(bigData))
	}
	t.Log(err)
	// Failing before any data: ResetReader itself returns the error.
	if err := z.ResetReader(iotest.ErrReader(errBoom)); !errors.Is(err, errBoom) {
		t.Fatalf("immediate failure: got %v", err)
	}
	if _, err := z.Read(make([]byte, 10)); !errors.Is(err, errBoom) {
		t.Fatalf("Read after failed ResetReader: got %v", err)
	}
}

type stuckReader struct{ data []byte }

func (s *stuckReader) Read(p []byte) (int, error) {
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil // then (0, nil) forever
}

type liarReader struct{}

func (liarReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

// TestStreamBadReaders: a source that stops making progress or returns an
// impossible count gives an error, not a hang or a panic.
func TestStreamBadReaders(t *testing.T) {
	src, data := smallFile(t)
	var z Reader
	got, err := readAllStream(&z, &stuckReader{src[:len(src)/2]}, 4096)
	if !errors.Is(err, io.ErrNoProgress) || !bytes.HasPrefix(data, got) {
		t.Fatalf("stuck reader: %v", err)
	}
	if err := z.ResetReader(liarReader{}); !errors.Is(err, errBadCount) {
		t.Fatalf("liar reader: %v", err)
	}
}

// gzipHeader builds a member with a hand-made header (FEXTRA of xlen bytes,
// FNAME, FCOMMENT, and FHCRC if hcrc) around data.
func gzipHeader(t *testing.T, xlen int, name, comment string, hcrc bool, data []byte) []byte {
	t.Helper()
	flg := byte(0x04)
	if name != "" {
		flg |= 0x08
	}
	if comment != "" {
		flg |= 0x10
	}
	if hcrc {
		flg |= 0x02
	}
	b := []byte{0x1f, 0x8b, 8, flg, 0, 0, 0, 0, 0, 255}
	b = binary.LittleEndian.AppendUint16(b, uint16(xlen))
	b = append(b, randomBytes(xlen, uint64(xlen))...)
	if name != "" {
		b = append(append(b, name...), 0)
	}
	if comment != "" {
		b = append(append(b, comment...), 0)
	}
	if hcrc {
		b = binary.LittleEndian.AppendUint16(b, uint16(crc32.ChecksumIEEE(b)))
	}
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, 6)
	w.Write(data)
	w.Close()
	b = append(b, buf.Bytes()...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(data))
	return binary.LittleEndian.AppendUint32(b, uint32(len(data)))
}

// TestStreamBigHeader: FEXTRA fields far larger than the window (60000 and
// 65535 bytes, skipped through refills, FHCRC over all of them) and FNAME /
// FCOMMENT at and just past compress/gzip's 512-byte limit, at window
// boundaries, plus truncations inside them.
func TestStreamBigHeader(t *testing.T) {
	data := text(20000, 8)
	long := strings.Repeat("n", 511) // 511 bytes + NUL: the longest accepted
	var z Reader
	for _, xlen := range []int{0, 1, 2000, 60000, 65535} {
		for _, hcrc := range []bool{false, true} {
			src := gzipHeader(t, xlen, long, strings.Repeat("c", 510), hcrc, data)
			src = append(src, gzipHeader(t, xlen, "x", long, hcrc, data)...) // second member
			want := append(append([]byte(nil), data...), data...)
			if got, err := stdDecode(src, 1<<30); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("xlen %d: compress/gzip: %v", xlen, err)
			}
			if got, err := readAll(&z, src, 4096); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("xlen %d hcrc %v: Reset: %v", xlen, hcrc, err)
			}
			checkStream(t, src, want)
			if hcrc { // a wrong header CRC after a big FEXTRA
				i := bytes.Index(src, append([]byte(long), 0, 'c')) + 512 + 511
				bad := append([]byte(nil), src...)
				bad[i] ^= 1
				_, err := readAll(&z, bad, 4096)
				if !errors.Is(err, ErrHeader) {
					t.Fatalf("xlen %d: bad FHCRC: %v", xlen, err)
				}
				checkStreamErr(t, bad, err)
			}
			for _, cut := range []int{11, 12, 13, 12 + xlen/2, 12 + xlen, 13 + xlen, 12 + xlen + 300, 12 + xlen + 512, 12 + xlen + 800} {
				_, err := readAll(&z, src[:cut], 4096)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("xlen %d cut %d: %v", xlen, cut, err)
				}
				checkStreamErr(t, src[:cut], err)
			}
		}
	}
	// One byte too long for FNAME and FCOMMENT: rejected by both decoders.
	for _, src := range [][]byte{
		gzipHeader(t, 60000, long+"n", "c", false, data),
		gzipHeader(t, 60000, "x", long+"c", true, data),
	} {
		_, stdErr := stdDecode(src, 1<<30)
		_, err := readAll(&z, src, 4096)
		if stdErr == nil || !errors.Is(err, ErrHeader) {
			t.Fatalf("512-byte string: got %v, compress/gzip %v", err, stdErr)
		}
		checkStreamErr(t, src, err)
	}
}

// TestStreamManyMembers: thousands of tiny members (some empty), so member
// headers and trailers fall at every window position.
func TestStreamManyMembers(t *testing.T) {
	var src, want []byte
	var buf bytes.Buffer
	ws := [2]io.WriteCloser{stdgzip.NewWriter(&buf), kpgzip.NewWriter(&buf)}
	for i := 0; i < 3000; i++ {
		d := text(i%23, uint64(i))
		buf.Reset()
		switch w := ws[i%2].(type) { // reused: a new writer per member is slow under -race
		case *stdgzip.Writer:
			w.Reset(&buf)
		case *kpgzip.Writer:
			w.Reset(&buf)
		}
		ws[i%2].Write(d)
		ws[i%2].Close()
		src = append(src, buf.Bytes()...)
		want = append(want, d...)
	}
	if got, err := stdDecode(src, 1<<30); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("compress/gzip: %v", err)
	}
	var z Reader
	if got, err := readAll(&z, src, 4096); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Reset: %v", err)
	}
	checkStream(t, src, want)
}

// TestStreamEmptyBlocks: a long run of empty stored and fixed blocks (no
// output for a long stretch of input) streams through a small window.
func TestStreamEmptyBlocks(t *testing.T) {
	var w bitWriter
	for i := 0; i < 50000; i++ {
		w.stored(nil, false)
		w.bits(1<<1, 3) // empty fixed block: just EOB
		w.fixedSym(256)
	}
	w.stored([]byte("end"), true)
	src := gzipWrap(w.flush(), []byte("end"))
	if got, err := stdDecode(src, 1<<20); err != nil || string(got) != "end" {
		t.Fatalf("compress/gzip: %q %v", got, err)
	}
	var z Reader
	if got, err := readAll(&z, src, 4096); err != nil || string(got) != "end" {
		t.Fatalf("Reset: %q %v", got, err)
	}
	checkStream(t, src, []byte("end"))
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestStreamHeaderOnly: reading a NIfTI-header's worth of a large file reads
// one window of input, not the file; and a Reader switches freely between
// Reset and ResetReader.
func TestStreamHeaderOnly(t *testing.T) {
	data := mriLike(3<<20, 5)
	src := gzipKP(t, data, 6)
	var z Reader
	cr := &countingReader{r: bytes.NewReader(src)}
	if err := z.ResetReader(cr); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 352)
	if _, err := io.ReadFull(&z, hdr); err != nil || !bytes.Equal(hdr, data[:352]) {
		t.Fatalf("header: %v", err)
	}
	if cr.n != defaultWindow {
		t.Fatalf("read %d bytes of %d for the header, want one window (%d)", cr.n, len(src), defaultWindow)
	}
	if got, err := readAll(&z, src, 4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Reset after ResetReader: %v", err)
	}
	if got, err := readAllStream(&z, bytes.NewReader(src), 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ResetReader after Reset: %v", err)
	}
}
