package inflate

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// smallFile is a ~2 KB gzip file with a dynamic block, a stored block and
// a fixed block.
func smallFile(t testing.TB) ([]byte, []byte) {
	data := text(3000, 11)
	src := gzipStd(t, data, 9)
	var w bitWriter
	w.stored([]byte("stored!"), false)
	w.bits(1|1<<1, 3)
	w.fixedSym('z')
	w.fixedMatch(10, 1)
	w.fixedSym(256)
	tail := []byte("stored!zzzzzzzzzzz")
	src = append(src, gzipWrap(w.flush(), tail)...)
	src = append(src, gzipStd(t, randomBytes(300, 1), 0)...)
	data = append(append(data, tail...), randomBytes(300, 1)...)
	return src, data
}

// TestTruncation cuts a small file at every byte: each prefix must fail with
// an error wrapping io.ErrUnexpectedEOF (or be empty input: io.EOF), never
// panic or hang.
// Through ResetReader, every prefix must fail exactly as with Reset (same
// error text, so the same absolute offset), with every source kind.
func TestTruncation(t *testing.T) {
	src, data := smallFile(t)
	var z Reader
	zs := streamReaders()
	if got, err := readAll(&z, src, 4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("full file: %v", err)
	}
	for n := 0; n < len(src); n++ {
		// Prefixes ending exactly at a member boundary are complete files.
		if got, err := readAll(&z, src[:n], 333); err == nil || (n == 0 && err == io.EOF) {
			if _, stdErr := stdDecode(src[:n], 1<<20); stdErr != nil && n != 0 {
				t.Fatalf("prefix %d: no error, compress/gzip says %v", n, stdErr)
			}
			if !bytes.HasPrefix(data, got) {
				t.Fatalf("prefix %d: wrong data", n)
			}
		} else if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("prefix %d/%d: got %v, want io.ErrUnexpectedEOF", n, len(src), err)
		}
		want, wantErr := readAll(&z, src[:n], 333)
		for kind := range numSrcKinds {
			zr := zs[(n+kind)%len(zs)]
			got, err := readAllKind(zr, src[:n], kind, 333, uint64(n))
			if errString(err) != errString(wantErr) || !bytes.Equal(got, want) {
				t.Fatalf("prefix %d/%d: ResetReader(%s) window %d: got %v, Reset gave %v (equal data %v)",
					n, len(src), srcKindNames[kind], len(zr.win), err, wantErr, bytes.Equal(got, want))
			}
		}
	}
}

// TestCorruption flips bits and bytes at many positions: the result must be
// an error or exactly what compress/gzip returns.
// Through ResetReader (rotating source kind and window) the result must be
// exactly Reset's: same data, same error text.
func TestCorruption(t *testing.T) {
	src, _ := smallFile(t)
	r := rand.New(rand.NewPCG(1, 2))
	var z Reader
	zs := streamReaders()
	bad := make([]byte, len(src))
	for i := 0; i < len(src)*4; i++ {
		copy(bad, src)
		pos := i % len(src)
		switch i / len(src) {
		case 0:
			bad[pos] ^= 1 << r.IntN(8)
		case 1:
			bad[pos] = ^bad[pos]
		default:
			bad[pos] = byte(r.Uint32())
			bad[r.IntN(len(bad))] ^= byte(r.Uint32())
		}
		want, stdErr := stdDecode(bad, 1<<24)
		got, err := readAll(&z, bad, 1000)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("case %d: err %v, compress/gzip err %v", i, err, stdErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("case %d: accepted different data", i)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "inflate: offset ") {
			t.Fatalf("case %d: error without offset: %v", i, err)
		}
		kind, zr := i%numSrcKinds, zs[i/numSrcKinds%len(zs)]
		sgot, serr := readAllKind(zr, bad, kind, 1000, uint64(i))
		if errString(serr) != errString(err) || !bytes.Equal(sgot, got) {
			t.Fatalf("case %d: ResetReader(%s) window %d: err %v, Reset gave %v (equal data %v)",
				i, srcKindNames[kind], len(zr.win), serr, err, bytes.Equal(sgot, got))
		}
	}
}

// TestCorruptErrors checks the error kinds and texts.
func TestCorruptErrors(t *testing.T) {
	data := text(10000, 5)
	src := gzipStd(t, data, 6)
	var z Reader

	bad := append([]byte(nil), src...)
	bad[len(bad)-8] ^= 1 // CRC
	_, err := readAll(&z, bad, 4096)
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("CRC: got %v", err)
	}
	checkStreamErr(t, bad, err)
	bad = append([]byte(nil), src...)
	bad[len(bad)-1] ^= 1 // ISIZE
	_, err = readAll(&z, bad, 4096)
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("ISIZE: got %v", err)
	}
	checkStreamErr(t, bad, err)
	bad = append([]byte(nil), src...)
	bad[0] = 0
	if err := z.Reset(bad); !errors.Is(err, ErrHeader) {
		t.Errorf("magic: got %v", err)
	}
	bad = append([]byte(nil), src...)
	bad[10] |= 6 // block type 3
	_, err = readAll(&z, bad, 4096)
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "block type") {
		t.Errorf("block type 3: got %v", err)
	}
	t.Log(err)
	if _, err := readAll(&z, src[:len(src)/2], 4096); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: got %v", err)
	}
	var fresh Reader
	if _, err := fresh.Read(make([]byte, 10)); err == nil {
		t.Error("Read before Reset: no error")
	}
}
