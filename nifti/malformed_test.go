package nifti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// validNii returns a small valid little-endian NIfTI-1 (.nii) file in memory.
func validNii(t testing.TB, version int) []byte {
	t.Helper()
	h, err := NewHeader([]int{4, 3, 2}, Int16)
	if err != nil {
		t.Fatal(err)
	}
	h.Version = version
	p := filepath.Join(t.TempDir(), "valid.nii")
	raw := make([]byte, h.DataSize())
	for i := range raw {
		raw[i] = byte(i)
	}
	if err := WriteRaw(p, h, raw); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// readBad writes b to a file called name and reads it with r, returning the error.
func readBad(t *testing.T, r *Reader, name string, b []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := r.ReadFloat32(p)
	runtime.ReadMemStats(&after)
	// Never allocate more than the file could hold (plus fixed buffers).
	if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(len(b))*8+4<<20 {
		t.Errorf("%s: reading a %d-byte file allocated %d bytes", name, len(b), grew)
	}
	return err
}

func TestMalformedInputNamesFileAndField(t *testing.T) {
	v1 := validNii(t, 1)
	v2 := validNii(t, 2)
	le := binary.LittleEndian
	mod := func(src []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), src...)
		f(b)
		return b
	}
	cases := []struct {
		name  string
		file  string
		data  []byte
		field string // must appear in the message
		r     Reader
	}{
		{"wrong magic", "magic.nii", mod(v1, func(b []byte) { copy(b[344:], "abcd") }), "magic", Reader{}},
		{"wrong sizeof_hdr", "sizeof.nii", mod(v1, func(b []byte) { le.PutUint32(b, 349) }), "sizeof_hdr", Reader{}},
		{"truncated header", "shorthdr.nii", v1[:200], "truncated", Reader{}},
		{"truncated header nifti2", "shorthdr2.nii", v2[:300], "truncated", Reader{}},
		{"empty file", "empty.nii", nil, "truncated", Reader{}},
		{"truncated data", "shortdata.nii", v1[:len(v1)-5], "truncated", Reader{}},
		{"dim zero", "dimzero.nii", mod(v1, func(b []byte) { le.PutUint16(b[44:], 0) }), "dim[2]", Reader{}},
		{"dim negative", "dimneg.nii", mod(v1, func(b []byte) { le.PutUint16(b[46:], uint16(0xfffd)) }), "dim[3]", Reader{}},
		{"dim[0] too big", "dim0.nii", mod(v1, func(b []byte) { le.PutUint16(b[40:], 9) }), "dim[0]", Reader{}},
		{"dim product overflows", "overflow.nii", mod(v2, func(b []byte) {
			for i := 1; i <= 3; i++ {
				le.PutUint64(b[16+8*i:], 1<<40)
			}
		}), "overflows", Reader{}},
		{"dims exceed file", "huge.nii", mod(v1, func(b []byte) {
			for i := 1; i <= 3; i++ {
				le.PutUint16(b[40+2*i:], 30000)
			}
		}), "dim", Reader{}},
		{"dims exceed gzip", "huge.nii.gz", gz(t, mod(v1, func(b []byte) {
			for i := 1; i <= 3; i++ {
				le.PutUint16(b[40+2*i:], 30000)
			}
		})), "gzip file can hold", Reader{}},
		{"gzip cap", "cap.nii.gz", gz(t, v1), "cap", Reader{MaxGzipBytes: 360}},
		{"vox_offset past end", "voxoff.nii", mod(v1, func(b []byte) { le.PutUint32(b[108:], math.Float32bits(1e6)) }), "vox_offset", Reader{}},
		{"vox_offset inside header", "voxin.nii", mod(v1, func(b []byte) { le.PutUint32(b[108:], math.Float32bits(100)) }), "vox_offset", Reader{}},
		{"unknown datatype", "dtype.nii", mod(v1, func(b []byte) { le.PutUint16(b[70:], 77) }), "datatype", Reader{}},
		{"unsupported float128", "f128.nii", mod(v1, func(b []byte) { le.PutUint16(b[70:], 1536) }), "float128", Reader{}},
		{"corrupt gzip", "corrupt.nii.gz", func() []byte {
			g := gz(t, bytes.Repeat(v1, 50))
			for i := 20; i < 40; i++ {
				g[i] ^= 0x5a
			}
			return g
		}(), "gzip", Reader{}},
		{"truncated gzip", "cut.nii.gz", func() []byte { g := gz(t, v1); return g[:len(g)/2] }(), "truncated", Reader{}},
		{"bad gzip crc", "crc.nii.gz", func() []byte { g := gz(t, v1); g[len(g)-6] ^= 1; return g }(), "gzip", Reader{}},
		{"scl_inter not finite", "inter.nii", mod(v1, func(b []byte) {
			le.PutUint32(b[112:], math.Float32bits(2))
			le.PutUint32(b[116:], math.Float32bits(float32(math.Inf(1))))
		}), "scl_slope", Reader{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readBad(t, &c.r, c.file, c.data)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.file) {
				t.Errorf("error %q does not name the file %s", msg, c.file)
			}
			if !strings.Contains(msg, c.field) {
				t.Errorf("error %q does not mention %q", msg, c.field)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %q is not a *FormatError", msg)
			}
		})
	}
}

func TestMissingPairMember(t *testing.T) {
	dir := t.TempDir()
	h, _ := NewHeader([]int{2, 2, 2}, Uint8)
	p := filepath.Join(dir, "x.hdr")
	if err := WriteFloat32(p, h, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "x.img"))
	_, _, err := ReadFloat32(p)
	if err == nil || !strings.Contains(err.Error(), "x.img") {
		t.Fatalf("err = %v, want one naming x.img", err)
	}
}

func TestUnknownExtension(t *testing.T) {
	_, _, err := ReadFloat32("volume.mha")
	if err == nil || !strings.Contains(err.Error(), "volume.mha") {
		t.Fatalf("err = %v", err)
	}
}
