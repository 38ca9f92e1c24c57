package nrrd

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
	raw := volumetest.MustRead(t, "testdata/int16_raw_lps.nrrd")
	gz := volumetest.MustRead(t, "testdata/uint8_gzip.nrrd")
	bz := volumetest.MustRead(t, "testdata/uint16_bzip2_be.nrrd")
	asc := volumetest.MustRead(t, "testdata/int32_ascii.nrrd")
	nhdr := volumetest.MustRead(t, "testdata/int16_detached.nhdr")
	one := func(b []byte) map[string][]byte { return map[string][]byte{"a.nrrd": b} }
	volumetest.CheckBroken(t, Open, []volumetest.Broken{
		{Name: "truncated raw", Files: one(raw[:len(raw)-10]), Open: "a.nrrd", Want: []string{"holds", "need 420"}},
		{Name: "sizes past the data", Files: one(replace(t, raw, "sizes: 7 6 5", "sizes: 7 6 500")), Open: "a.nrrd", Want: []string{"need 42000"}},
		{Name: "truncated gzip", Files: one(gz[:len(gz)-60]), Open: "a.nrrd", Want: []string{"gzip"}},
		{Name: "gzip sizes past the data", Files: one(replace(t, gz, "sizes: 7 6 5", "sizes: 7 6 5000")), Open: "a.nrrd", Want: []string{"gzip data", "ends after 210 bytes"}},
		{Name: "bzip2 sizes past the data", Files: one(replace(t, bz, "sizes: 7 6 5", "sizes: 7 60 50")), Open: "a.nrrd", Want: []string{"bzip2"}},
		{Name: "ascii too short", Files: one(asc[:len(asc)-40]), Open: "a.nrrd", Want: []string{"ascii data", "samples, want 210"}},
		{Name: "ascii not a number", Files: one(replace(t, asc, "\n-93", "\nx93")), Open: "a.nrrd", Want: []string{"ascii data", "sample 1"}},
		{Name: "unknown type", Files: one(replace(t, raw, "type: int16", "type: quaternion")), Open: "a.nrrd", Want: []string{`field "type"`, "quaternion"}},
		{Name: "absurd sizes", Files: one(replace(t, raw, "sizes: 7 6 5", "sizes: 4294967296 4294967296 5")), Open: "a.nrrd", Want: []string{"2^53"}},
		{Name: "negative size", Files: one(replace(t, raw, "sizes: 7 6 5", "sizes: 7 -6 5")), Open: "a.nrrd", Want: []string{`field "sizes"`}},
		{Name: "sizes too few", Files: one(replace(t, raw, "sizes: 7 6 5", "sizes: 7 6")), Open: "a.nrrd", Want: []string{`field "sizes"`}},
		{Name: "bad encoding", Files: one(replace(t, raw, "encoding: raw", "encoding: hex")), Open: "a.nrrd", Want: []string{`field "encoding"`, "not supported"}},
		{Name: "bad endian", Files: one(replace(t, raw, "endian: little", "endian: middle")), Open: "a.nrrd", Want: []string{`field "endian"`}},
		{Name: "bad space", Files: one(replace(t, raw, "space: left-posterior-superior", "space: up-down")), Open: "a.nrrd", Want: []string{`field "space"`}},
		{Name: "bad space directions", Files: one(replace(t, raw, "space directions: (", "space directions: ((")), Open: "a.nrrd", Want: []string{`field "space directions"`}},
		{Name: "no magic", Files: one(raw[4:]), Open: "a.nrrd", Want: []string{"NRRD magic"}},
		{Name: "missing data file", Files: map[string][]byte{"a.nhdr": nhdr}, Open: "a.nhdr", Want: []string{"data file", "int16_detached.raw"}},
		{Name: "byte skip past the end", Files: one(replace(t, raw, "encoding: raw", "encoding: raw\nbyte skip: 100000")), Open: "a.nrrd", Want: []string{"holds"}},
	})
}

// fuzzSeeds are the single-file fixtures.
func fuzzSeeds(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.nrrd")
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzOpen throws arbitrary bytes at the NRRD reader: an error naming the
// file or a valid header and a read that returns, never a panic.
func FuzzOpen(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { volumetest.Fuzz(t, Open, "fuzz.nrrd", b) })
}
