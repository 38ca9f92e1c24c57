package metaimage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

func replace(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("fixture lacks %q", old)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// TestMalformed: truncated data, a header claiming more data than there
// is, unknown types and absurd sizes are errors naming the file and the
// field.
func TestMalformed(t *testing.T) {
	mha := volumetest.MustRead(t, "testdata/int16.mha")
	zmha := volumetest.MustRead(t, "testdata/uint16_zlib.mha")
	mhd := volumetest.MustRead(t, "testdata/uint8.mhd")
	raw := volumetest.MustRead(t, "testdata/uint8.raw")
	one := func(b []byte) map[string][]byte { return map[string][]byte{"a.mha": b} }
	volumetest.CheckBroken(t, Open, []volumetest.Broken{
		{Name: "truncated mha", Files: one(mha[:len(mha)-10]), Open: "a.mha", Want: []string{"holds", "need 420"}},
		{Name: "DimSize past the data", Files: one(replace(t, mha, "DimSize = 7 6 5", "DimSize = 7 6 50")), Open: "a.mha", Want: []string{"need 4200"}},
		{Name: "truncated raw", Files: map[string][]byte{"a.mhd": mhd, "uint8.raw": raw[:100]}, Open: "a.mhd", Want: []string{"uint8.raw holds 100 bytes"}},
		{Name: "missing raw", Files: map[string][]byte{"a.mhd": mhd}, Open: "a.mhd", Want: []string{"data file", "uint8.raw"}},
		{Name: "truncated zlib", Files: one(zmha[:len(zmha)-50]), Open: "a.mha", Want: []string{"zlib"}},
		{Name: "zlib DimSize past the data", Files: one(replace(t, zmha, "DimSize = 7 6 5", "DimSize = 7 6 5000")), Open: "a.mha", Want: []string{"zlib data", "ends after 420 bytes"}},
		{Name: "unknown type", Files: one(replace(t, mha, "MET_SHORT", "MET_QUATERNION")), Open: "a.mha", Want: []string{"ElementType", "MET_QUATERNION"}},
		{Name: "absurd DimSize", Files: one(replace(t, mha, "DimSize = 7 6 5", "DimSize = 2000000000 2000000000 5")), Open: "a.mha", Want: []string{"2^53"}},
		{Name: "DimSize not integer", Files: one(replace(t, mha, "DimSize = 7 6 5", "DimSize = 7 6.5 5")), Open: "a.mha", Want: []string{"DimSize"}},
		{Name: "NDims 4", Files: one(replace(t, mha, "NDims = 3", "NDims = 4")), Open: "a.mha", Want: []string{"NDims"}},
		{Name: "bad TransformMatrix", Files: one(replace(t, mha, "TransformMatrix = ", "TransformMatrix = 1 ")), Open: "a.mha", Want: []string{"TransformMatrix"}},
		{Name: "zero spacing", Files: one(replace(t, mha, "ElementSpacing = 1.2", "ElementSpacing = 0")), Open: "a.mha", Want: []string{"ElementSpacing"}},
		{Name: "bad MSB flag", Files: one(replace(t, mha, "BinaryDataByteOrderMSB = False", "BinaryDataByteOrderMSB = Maybe")), Open: "a.mha", Want: []string{"BinaryDataByteOrderMSB"}},
		{Name: "no ElementDataFile", Files: one(mha[:bytes.Index(mha, []byte("ElementDataFile"))]), Open: "a.mha", Want: []string{"ElementDataFile"}},
		{Name: "data file list", Files: one(replace(t, mha, "ElementDataFile = LOCAL", "ElementDataFile = LIST")), Open: "a.mha", Want: []string{"ElementDataFile", "not supported"}},
	})
}

// FuzzOpen throws arbitrary bytes at the MetaImage reader (.mha): an
// error naming the file or a valid header and a read that returns, never a
// panic.
func FuzzOpen(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.mha")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { volumetest.Fuzz(t, Open, "fuzz.mha", b) })
}
