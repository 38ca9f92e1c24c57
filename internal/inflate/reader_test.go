package inflate

import (
	"bytes"
	"compress/flate"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

var levels = []int{-2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}

// TestMatrix compares against the original data for every data kind, size,
// level and encoder, reading with several buffer sizes (and WriteTo) so reads
// straddle the output area's refills. 300000 bytes exceeds the output area.
// Each case is also decoded through ResetReader, rotating the source kind,
// the input window size and the read size.
func TestMatrix(t *testing.T) {
	testutil.SkipUnderRace(t, "single-goroutine decoder: its matrices take 9 s without the race detector, a minute with")
	sizes := []int{0, 1, 100, 65535, 65536 + 1, 300000}
	var z Reader
	zs := streamReaders()
	c := 0
	for _, g := range generators {
		for _, size := range sizes {
			data := g.gen(size, uint64(size))
			for _, level := range levels {
				for _, enc := range []string{"std", "kp"} {
					var src []byte
					if enc == "std" {
						src = gzipStd(t, data, level)
					} else {
						src = gzipKP(t, data, level)
					}
					bufSizes := []int{1, 7, 4096, 1 << 20, 0}
					if size > 70000 {
						// Size-1 reads of big inputs are slow under -race;
						// rotate one small size per level instead.
						bufSizes = []int{[]int{1, 7}[level&1], 4096, 1 << 20, 0}
						if lighter() && level != 6 {
							bufSizes = bufSizes[1:]
						}
					}
					for _, bs := range bufSizes {
						got, err := readAll(&z, src, bs)
						if err != nil || !bytes.Equal(got, data) {
							t.Fatalf("%s size %d %s level %d buf %d: err %v, equal %v",
								g.name, size, enc, level, bs, err, bytes.Equal(got, data))
						}
					}
					kind, zr := c%numSrcKinds, zs[c/numSrcKinds%len(zs)]
					bs := []int{4096, 0, 1 << 20, 7}[(c+c/numSrcKinds)%4]
					c++
					got, err := readAllKind(zr, src, kind, bs, uint64(c))
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("%s size %d %s level %d: ResetReader(%s) window %d buf %d: err %v, equal %v",
							g.name, size, enc, level, srcKindNames[kind], len(zr.win), bs, err, bytes.Equal(got, data))
					}
				}
			}
		}
	}
}

// TestLarge decodes multi-megabyte inputs (several output-area refills).
func TestLarge(t *testing.T) {
	testutil.SkipUnderRace(t, "single-goroutine decoder: its matrices take 9 s without the race detector, a minute with")
	n := 5 << 20
	if lighter() {
		n = 2 << 20
	}
	var z Reader
	zs := streamReaders()
	c := 0
	for _, g := range generators {
		data := g.gen(n, 99)
		for _, level := range []int{-2, 0, 1, 6, 9} {
			if lighter() && level == 9 {
				continue
			}
			for _, src := range [][]byte{gzipStd(t, data, level), gzipKP(t, data, level)} {
				for _, bs := range []int{4096, 1 << 20, 0} {
					got, err := readAll(&z, src, bs)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("%s level %d buf %d: err %v", g.name, level, bs, err)
					}
				}
				kind, zr := c%numSrcKinds, zs[c%len(zs)]
				c++
				if kind == srcOneByte && lighter() {
					kind = srcHalf // one-byte reads of megabytes are slow under -race
				}
				got, err := readAllKind(zr, src, kind, 1<<20, uint64(c))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s level %d: ResetReader(%s) window %d: err %v", g.name, level, srcKindNames[kind], len(zr.win), err)
				}
			}
		}
	}
}

// TestFixedHuffman checks streams compress/flate writes with fixed codes.
func TestFixedHuffman(t *testing.T) {
	var z Reader
	zs := Reader{winSize: minWindow}
	fixed := 0
	inputs := [][]byte{[]byte("a"), []byte("hello, hello, hello world"), bytes.Repeat([]byte("ab"), 20), text(60, 1)}
	for _, data := range inputs {
		for _, level := range []int{1, 6, 9, flate.HuffmanOnly} {
			var buf bytes.Buffer
			w, _ := flate.NewWriter(&buf, level)
			w.Write(data)
			w.Close()
			raw := buf.Bytes()
			if raw[0]>>1&3 == 1 {
				fixed++
			}
			got, err := readAll(&z, gzipWrap(raw, data), 7)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("level %d %q: got %q, %v", level, data, got, err)
			}
			for kind := range numSrcKinds {
				got, err := readAllKind(&zs, gzipWrap(raw, data), kind, 7, 1)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("level %d %q: ResetReader(%s): got %q, %v", level, data, srcKindNames[kind], got, err)
				}
			}
		}
	}
	// compress/flate picks the cheapest block type; short inputs get fixed
	// codes at some levels (TestHandcrafted covers fixed blocks too).
	if fixed < 3 {
		t.Errorf("only %d fixed-Huffman streams produced", fixed)
	}
	t.Logf("%d of %d streams use a fixed-Huffman first block", fixed, 4*len(inputs))
}

// TestHandcrafted builds edge-case streams bit by bit: a stored block then a
// fixed block using distance exactly 32768, length 258, distance-1 runs and
// every short distance, all checked against compress/gzip and the intended data.
func TestHandcrafted(t *testing.T) {
	prefix := randomBytes(40000, 7)
	want := append([]byte(nil), prefix...)
	var w bitWriter
	w.stored(prefix, false)
	w.bits(1<<1, 3) // not final, fixed
	match := func(length, dist int) {
		w.fixedMatch(length, dist)
		for i := 0; i < length; i++ {
			want = append(want, want[len(want)-dist])
		}
	}
	match(258, 32768)
	match(3, 32768)
	match(258, 1)
	w.fixedSym('x')
	want = append(want, 'x')
	for d := 1; d <= 9; d++ {
		for _, l := range []int{3, 4, 7, 8, 9, 15, 16, 17, 100, 257, 258} {
			match(l, d)
		}
	}
	match(258, 32768)
	w.fixedSym(256)
	w.bits(1|1<<1, 3) // final fixed block: a literal and EOB
	w.fixedSym('y')
	want = append(want, 'y')
	w.fixedSym(256)
	src := gzipWrap(w.flush(), want)

	std, err := stdDecode(src, 1<<30)
	if err != nil || !bytes.Equal(std, want) {
		t.Fatalf("test stream rejected by compress/gzip: %v", err)
	}
	var z Reader
	for _, bs := range []int{1, 7, 4096, 0} {
		got, err := readAll(&z, src, bs)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("buf %d: err %v equal %v", bs, err, bytes.Equal(got, want))
		}
	}
	checkStream(t, src, want)

	// Distance 32768 with only 32767 bytes of history must fail in both.
	var w2 bitWriter
	w2.stored(prefix[:32767], false)
	w2.bits(1|1<<1, 3)
	w2.fixedMatch(3, 32768)
	w2.fixedSym(256)
	bad := gzipWrap(w2.flush(), nil)
	if _, err := stdDecode(bad, 1<<30); err == nil {
		t.Fatal("compress/gzip accepted a too-far distance")
	}
	_, err = readAll(&z, bad, 4096)
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("too-far distance: got %v, want *CorruptError", err)
	}
	t.Log(err)
	checkStreamErr(t, bad, err)
}

// checkStream decodes src through ResetReader with every source kind and
// window size and compares with want.
func checkStream(t *testing.T, src, want []byte) {
	t.Helper()
	for i, zr := range streamReaders() {
		for kind := range numSrcKinds {
			got, err := readAllKind(zr, src, kind, []int{4096, 7, 0}[(i+kind)%3], uint64(kind))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("ResetReader(%s) window %d: err %v equal %v", srcKindNames[kind], len(zr.win), err, bytes.Equal(got, want))
			}
		}
	}
}

// checkStreamErr decodes src through ResetReader with every source kind and
// window size and checks that it fails exactly as Reset did with want.
func checkStreamErr(t *testing.T, src []byte, want error) {
	t.Helper()
	for _, zr := range streamReaders() {
		for kind := range numSrcKinds {
			_, err := readAllKind(zr, src, kind, 4096, uint64(kind))
			if errString(err) != errString(want) {
				t.Fatalf("ResetReader(%s) window %d: err %v, Reset gave %v", srcKindNames[kind], len(zr.win), err, want)
			}
		}
	}
}

// TestStoredLong checks stored blocks far longer than the output area and
// one 65535-byte stored block straddling an area refill.
func TestStoredLong(t *testing.T) {
	data := randomBytes(outLimit+3*65535+17, 5)
	var w bitWriter
	for i := 0; i < len(data); i += 65535 {
		end := min(i+65535, len(data))
		w.stored(data[i:end], end == len(data))
	}
	src := gzipWrap(w.flush(), data)
	var z Reader
	for _, bs := range []int{7, 1 << 20, 0} {
		got, err := readAll(&z, src, bs)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("buf %d: %v", bs, err)
		}
	}
	checkStream(t, src, data)
}

func TestMultiMember(t *testing.T) {
	a, b := text(100000, 1), mriLike(70000, 2)
	var src []byte
	src = append(src, gzipStd(t, a, 6)...)
	src = append(src, gzipKP(t, nil, 1)...) // an empty member in between
	src = append(src, gzipKP(t, b, 5)...)
	want := append(append([]byte(nil), a...), b...)
	var z Reader
	for _, bs := range []int{1, 4096, 0} {
		got, err := readAll(&z, src, bs)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("buf %d: %v", bs, err)
		}
	}
	checkStream(t, src, want)
}

func TestHeaderFlags(t *testing.T) {
	data := text(5000, 3)
	var buf bytes.Buffer
	w := stdgzip.NewWriter(&buf)
	w.Header = stdgzip.Header{Name: "case_000.nii", Comment: "résumé", Extra: []byte("xtra-field")}
	w.Write(data)
	w.Close()
	src := buf.Bytes()
	if src[3] != 0x04|0x08|0x10 {
		t.Fatalf("flags %#x", src[3])
	}
	var z Reader
	if got, err := readAll(&z, src, 100); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("FEXTRA|FNAME|FCOMMENT: %v", err)
	}
	checkStream(t, src, data)

	// FHCRC: compress/gzip cannot write it, so insert it by hand.
	hdrEnd := 10 + 2 + len("xtra-field") + len("case_000.nii") + 1
	for hdrEnd < len(src) && src[hdrEnd] != 0 { // end of the comment
		hdrEnd++
	}
	hdrEnd++
	hdr := append([]byte(nil), src[:hdrEnd]...)
	hdr[3] |= 0x02
	crc := crc32.ChecksumIEEE(hdr)
	withCRC := binary.LittleEndian.AppendUint16(hdr, uint16(crc))
	withCRC = append(withCRC, src[hdrEnd:]...)
	if _, err := stdDecode(withCRC, 1<<20); err != nil {
		t.Fatalf("compress/gzip rejects the hand-made FHCRC: %v", err)
	}
	if got, err := readAll(&z, withCRC, 100); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("FHCRC: %v", err)
	}
	checkStream(t, withCRC, data)
	withCRC[hdrEnd] ^= 1
	_, err := readAll(&z, withCRC, 100)
	if !errors.Is(err, ErrHeader) {
		t.Fatalf("bad FHCRC: got %v, want ErrHeader", err)
	}
	checkStreamErr(t, withCRC, err)
}

// TestTrailing matches compress/gzip on bytes after the last member.
func TestTrailing(t *testing.T) {
	data := text(1000, 4)
	good := gzipStd(t, data, 6)
	var z Reader
	for _, tc := range []struct {
		tail []byte
		want error
	}{
		{make([]byte, 20), ErrHeader},
		{make([]byte, 5), io.ErrUnexpectedEOF},
		{[]byte("garbage after the gzip data"), ErrHeader},
	} {
		src := append(append([]byte(nil), good...), tc.tail...)
		_, stdErr := stdDecode(src, 1<<20)
		got, err := readAll(&z, src, 4096)
		if !errors.Is(err, tc.want) || stdErr == nil {
			t.Errorf("tail %q: got %v (std %v), want %v", tc.tail, err, stdErr, tc.want)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("tail %q: data before the error differs", tc.tail)
		}
		checkStreamErr(t, src, err)
	}
	if err := z.Reset(nil); err != io.EOF {
		t.Errorf("empty input: got %v, want io.EOF like compress/gzip", err)
	}
	if err := z.ResetReader(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("empty input through ResetReader: got %v, want io.EOF", err)
	}
}

// TestReuse decodes different files with one Reader and checks that the
// steady state allocates nothing.
func TestReuse(t *testing.T) {
	a, b := gzipKP(t, mriLike(400000, 1), 6), gzipStd(t, runs(50000, 2), 9)
	var z Reader
	for i := 0; i < 3; i++ {
		for _, src := range [][]byte{a, b} {
			want, _ := stdDecode(src, 1<<30)
			got, err := readAll(&z, src, 4096)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatal(err)
			}
		}
	}
	buf := make([]byte, 64<<10)
	allocs := testing.AllocsPerRun(5, func() {
		for _, src := range [][]byte{a, b} {
			if err := z.Reset(src); err != nil {
				t.Fatal(err)
			}
			discard(t, &z, buf)
		}
	})
	if allocs != 0 {
		t.Errorf("Reset+Read allocates %v times per run, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(5, func() {
		z.Reset(a)
		if _, err := io.Copy(io.Discard, &z); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Reset+WriteTo allocates %v times per run, want 0", allocs)
	}

	// ResetReader with a reused Reader and a reused source.
	for _, zr := range streamReaders() {
		br := bytes.NewReader(nil)
		allocs = testing.AllocsPerRun(5, func() {
			for _, src := range [][]byte{a, b} {
				br.Reset(src)
				if err := zr.ResetReader(br); err != nil {
					t.Fatal(err)
				}
				discard(t, zr, buf)
			}
		})
		if allocs != 0 {
			t.Errorf("window %d: ResetReader+Read allocates %v times per run, want 0", len(zr.win), allocs)
		}
		allocs = testing.AllocsPerRun(5, func() {
			br.Reset(a)
			zr.ResetReader(br)
			if _, err := io.Copy(io.Discard, zr); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("window %d: ResetReader+WriteTo allocates %v times per run, want 0", len(zr.win), allocs)
		}
	}
}

// discard reads z to the end through buf, without allocating (TestReuse
// counts allocations).
func discard(t *testing.T, z *Reader, buf []byte) {
	t.Helper()
	for {
		_, err := z.Read(buf)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealFiles decodes real NIfTI files: the demo cases bundled in
// testdata/demo always, and the full demo dataset where it is present.
func TestRealFiles(t *testing.T) {
	t.Run("bundled", func(t *testing.T) { testRealFiles(t, testutil.DemoDir(t)) })
	t.Run("full", func(t *testing.T) { testRealFiles(t, testutil.FullDemoDir(t)) })
}

// testRealFiles decodes the first ten .nii.gz files (by name) of a
// dataset folder's imagesTr and labelsTr in three ways and compares each
// with compress/gzip.
func testRealFiles(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.nii.gz"))
	sort.Strings(files)
	if len(files) > 10 {
		files = files[:10]
	}
	if len(files) == 0 {
		t.Fatalf("no .nii.gz files in %s/*/", dir)
	}
	var z Reader
	zs := Reader{winSize: 5000}
	for i, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := stdDecode(src, 1<<32)
		if err != nil {
			t.Fatalf("%s: compress/gzip: %v", f, err)
		}
		got, err := readAll(&z, src, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", f, err)
		}
		// Streaming from the file itself and from awkward pieces.
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err = readAllStream(&z, fh, 1<<20)
		fh.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: ResetReader(*os.File): %v", f, err)
		}
		got, err = readAllKind(&zs, src, srcChunks, 0, uint64(i))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: ResetReader(chunks) small window: %v", f, err)
		}
	}
	t.Logf("%d real files decoded identically", len(files))
}

func ExampleReader() {
	var buf bytes.Buffer
	w := stdgzip.NewWriter(&buf)
	w.Write([]byte("hello, voxels"))
	w.Close()

	var z Reader // reuse across files: no allocation after the first Reset
	if err := z.Reset(buf.Bytes()); err != nil {
		panic(err)
	}
	out, err := io.ReadAll(&z)
	fmt.Println(string(out), err)
	// Output: hello, voxels <nil>
}
