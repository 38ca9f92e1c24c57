package inflate

import (
	"bytes"
	"io"
	"testing"
)

// FuzzReader checks that the decoder agrees with compress/gzip on arbitrary
// input: both fail, or both succeed with the same bytes. Output is capped so
// highly compressible inputs stay cheap.
func FuzzReader(f *testing.F) {
	f.Add(gzipStd(f, []byte("hello hello hello hello"), 6))
	f.Add(gzipStd(f, text(500, 1), 9))
	f.Add(gzipStd(f, randomBytes(100, 1), 0))
	f.Add(gzipKP(f, mriLike(600, 1), 5))
	f.Add(gzipKP(f, runs(2000, 1), -2))
	src, _ := smallFile(f)
	f.Add(src)
	f.Fuzz(func(t *testing.T, src []byte) {
		const limit = 16 << 20
		want, stdErr := stdDecode(src, limit)
		if len(want) == limit {
			return // too big to compare cheaply
		}
		var z Reader
		var got []byte
		err := z.Reset(src)
		if err == nil {
			got, err = io.ReadAll(io.LimitReader(&z, limit))
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("err %v, compress/gzip err %v", err, stdErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("accepted with different data")
		}
	})
}

// FuzzReaderStream decodes arbitrary input through ResetReader with the
// smallest window and a seeded chunked source: the result must be exactly
// Reset's (same data, same error text) and agree with compress/gzip.
func FuzzReaderStream(f *testing.F) {
	f.Add(gzipStd(f, []byte("hello hello hello hello"), 6), uint64(1))
	f.Add(gzipStd(f, text(5000, 1), 9), uint64(2))
	f.Add(gzipStd(f, randomBytes(3000, 1), 0), uint64(3))
	f.Add(gzipKP(f, mriLike(6000, 1), 5), uint64(4))
	f.Add(gzipKP(f, runs(20000, 1), -2), uint64(5))
	src, _ := smallFile(f)
	f.Add(append(append([]byte(nil), src...), src...), uint64(6))
	f.Fuzz(func(t *testing.T, src []byte, seed uint64) {
		const limit = 16 << 20
		want, stdErr := stdDecode(src, limit)
		if len(want) == limit {
			return // too big to compare cheaply
		}
		var z Reader
		got, err := readAll(&z, src, 4096)
		zs := Reader{winSize: minWindow}
		sgot, serr := readAllKind(&zs, src, int(seed%numSrcKinds), int(seed>>8%5000), seed)
		if errString(serr) != errString(err) || !bytes.Equal(sgot, got) {
			t.Fatalf("ResetReader: err %v, Reset err %v (equal data %v)", serr, err, bytes.Equal(sgot, got))
		}
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("err %v, compress/gzip err %v", err, stdErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("accepted with different data")
		}
	})
}
