package nifti

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fuzzSeeds are whole small files from the fixtures; the committed corpus
// under testdata/fuzz holds them and malformed variants (see
// TestWriteFuzzCorpus).
var fuzzSeeds = []string{
	"testdata/synth/dt_int16_le.nii",
	"testdata/synth/dt_float64_be.nii",
	"testdata/synth/dt_RGB24_le.nii",
	"testdata/synth/nifti2_int16_be.nii",
	"testdata/synth/nifti2_int16_le.nii.gz",
	"testdata/synth/extensions.nii.gz",
	"testdata/synth/scaled_int16.nii.gz",
	"testdata/synth/ndim7.nii",
}

// FuzzParseHeader throws arbitrary bytes at the header parser: it must
// return a header or an error, never panic, and a parsed header must have
// self-consistent dimensions.
func FuzzParseHeader(f *testing.F) {
	for _, p := range fuzzSeeds {
		if b, err := os.ReadFile(p); err == nil && !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			f.Add(b[:min(len(b), Nifti2HeaderSize)])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, "fuzz.nii")
		if err != nil {
			return
		}
		if h.NDim() < 1 || h.NDim() > 7 || h.DataSize() < 0 {
			t.Fatalf("accepted header with dim %v", h.Dim)
		}
		h.Affine()
		h.QformAffine()
		Orientation(h.SformAffine())
	})
}

// FuzzDecode throws arbitrary bytes at the whole-file decoder (plain or
// gzip). It must never panic, and never allocate beyond its cap (enforced by
// MaxGzipBytes and the file-size checks).
func FuzzDecode(f *testing.F) {
	for _, p := range fuzzSeeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	r := Reader{MaxGzipBytes: 1 << 24}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := r.DecodeFloat32(b, "fuzz.nii")
		if err != nil {
			return
		}
		if int64(len(data)) != h.NumVoxels()*int64(h.Datatype.Components()) {
			t.Fatalf("%d values for %v", len(data), h.Dim)
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz from the fixtures when
// VOXTRAIN_WRITE_CORPUS=1; otherwise it checks the corpus is there, so
// `go test` (and `make test`) replays it.
func TestWriteFuzzCorpus(t *testing.T) {
	dirs := map[string]string{"FuzzDecode": "testdata/fuzz/FuzzDecode", "FuzzParseHeader": "testdata/fuzz/FuzzParseHeader"}
	if os.Getenv("VOXTRAIN_WRITE_CORPUS") != "1" {
		for name, d := range dirs {
			ents, err := os.ReadDir(d)
			if err != nil || len(ents) < 10 {
				t.Fatalf("%s corpus missing in %s (regenerate with VOXTRAIN_WRITE_CORPUS=1)", name, d)
			}
		}
		return
	}
	var inputs [][]byte
	for _, p := range fuzzSeeds {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
		// Malformed variants: truncations and single-field corruptions.
		inputs = append(inputs, b[:len(b)/2], b[:min(len(b), 100)])
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			for _, off := range []int{0, 40, 42, 70, 108, 344} {
				c := append([]byte(nil), b...)
				if off+2 <= len(c) {
					c[off] ^= 0xff
					c[off+1] ^= 0x7f
				}
				inputs = append(inputs, c)
			}
		} else {
			c := append([]byte(nil), b...)
			c[len(c)/2] ^= 0xff
			inputs = append(inputs, c)
		}
	}
	for name, d := range dirs {
		os.RemoveAll(d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, b := range inputs {
			if name == "FuzzParseHeader" {
				if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
					continue
				}
				b = b[:min(len(b), Nifti2HeaderSize)]
			}
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("seed%03d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
