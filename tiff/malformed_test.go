package tiff

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// setTag rewrites the inline value of tag in the first IFD of a classic
// little-endian TIFF.
func setTag(t *testing.T, b []byte, tag uint16, v uint32) []byte {
	t.Helper()
	b = append([]byte(nil), b...)
	le := binary.LittleEndian
	off := le.Uint32(b[4:])
	n := le.Uint16(b[off:])
	for i := range uint32(n) {
		e := b[off+2+12*i:]
		if le.Uint16(e) == tag {
			switch le.Uint16(e[2:]) {
			case 3:
				le.PutUint16(e[8:], uint16(v))
			default:
				le.PutUint32(e[8:], v)
			}
			return b
		}
	}
	t.Fatalf("no tag %d", tag)
	return nil
}

// TestMalformed: an IFD offset past the end, truncated strips, loops,
// unknown codecs and types, and absurd sizes are errors naming the file
// and the field.
func TestMalformed(t *testing.T) {
	st := volumetest.MustRead(t, "testdata/stack_uint8.tif")
	z := volumetest.MustRead(t, "testdata/comp_zlib_uint16.tif")
	big := volumetest.MustRead(t, "testdata/bigtiff_int16.tif")
	le := binary.LittleEndian
	one := func(b []byte) map[string][]byte { return map[string][]byte{"a.tif": b} }
	ifdPastEnd := append([]byte(nil), st...)
	le.PutUint32(ifdPastEnd[4:], 0xfffffff0)
	loop := append([]byte(nil), st...)
	first := le.Uint32(loop[4:])
	n := uint32(le.Uint16(loop[first:]))
	le.PutUint32(loop[first+2+12*n:], first)
	bigPastEnd := append([]byte(nil), big...)
	le.PutUint64(bigPastEnd[8:], 1<<40)
	badMagic := append([]byte(nil), st...)
	le.PutUint16(badMagic[2:], 41)
	volumetest.CheckBroken(t, Open, []volumetest.Broken{
		{Name: "IFD offset past the end", Files: one(ifdPastEnd), Open: "a.tif", Want: []string{"IFD", "past the end"}},
		{Name: "BigTIFF IFD offset past the end", Files: one(bigPastEnd), Open: "a.tif", Want: []string{"IFD", "past the end"}},
		{Name: "IFD loop", Files: one(loop), Open: "a.tif", Want: []string{"loops"}},
		{Name: "truncated", Files: one(st[:len(st)/2]), Open: "a.tif", Want: []string{"past the end"}},
		{Name: "truncated header", Files: one(st[:6]), Open: "a.tif", Want: []string{"header"}},
		{Name: "bad version", Files: one(badMagic), Open: "a.tif", Want: []string{"version 41"}},
		{Name: "unknown compression", Files: one(setTag(t, st, tCompression, 7)), Open: "a.tif", Want: []string{"Compression 7", "not supported"}},
		{Name: "unknown sample format", Files: one(setTag(t, volumetest.MustRead(t, "testdata/stack_int8.tif"), tSampleFormat, 6)), Open: "a.tif", Want: []string{"SampleFormat 6"}},
		{Name: "absurd width", Files: one(setTag(t, st, tImageWidth, 0x7fffffff)), Open: "a.tif", Want: []string{"strip of", "2147483647 pixels", "too large to decode"}},
		{Name: "zero height", Files: one(setTag(t, st, tImageLength, 0)), Open: "a.tif", Want: []string{"ImageWidth×ImageLength"}},
		{Name: "strip past the end", Files: one(setTag(t, st, tStripByteCounts, 1<<30)), Open: "a.tif", Want: []string{"StripOffsets", "past the end"}},
		{Name: "deflate strip cut short", Files: one(setTag(t, z, tStripByteCounts, 20)), Open: "a.tif", Want: []string{"deflate chunk", "page 0, chunk 0"}},
		{Name: "short uncompressed strip", Files: one(setTag(t, st, tStripByteCounts, 3)), Open: "a.tif", Want: []string{"uncompressed chunk of 3 bytes, want 42"}},
		{Name: "bad predictor", Files: one(setTag(t, volumetest.MustRead(t, "testdata/zlib_pred_uint32.tif"), tPredictor, 9)), Open: "a.tif", Want: []string{"Predictor 9"}},
	})
}

// FuzzOpen throws arbitrary bytes at the TIFF reader: an error naming the
// file or a valid header and a read that returns, never a panic.
func FuzzOpen(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.tif")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { volumetest.Fuzz(t, Open, "fuzz.tif", b) })
}
