package nifti

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
)

var allTypes = []Datatype{Uint8, Int8, Int16, Uint16, Int32, Uint32, Int64, Uint64, Float32, Float64, Complex64, Complex128, RGB24, RGBA32}

// randomRaw returns n voxels of random little-endian bytes valid for dt
// (floats finite, so comparisons are meaningful).
func randomRaw(rng *rand.Rand, dt Datatype, n int) []byte {
	b := make([]byte, n*dt.Size())
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	info := dtTable[dt]
	if dt == Float32 || dt == Complex64 {
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(rng.NormFloat64()*1e3)))
		}
	}
	if dt == Float64 || dt == Complex128 {
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(rng.NormFloat64()*1e6))
		}
	}
	_ = info
	return b
}

// TestRoundTripRaw writes every datatype in both byte orders, both versions
// and every container, reads it back and requires identical header fields
// and bit-identical voxels.
func TestRoundTripRaw(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	shape := []int{5, 4, 3, 2}
	for _, dt := range allTypes {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			for _, version := range []int{1, 2} {
				for _, ext := range []string{".nii", ".nii.gz", ".hdr", ".img.gz"} {
					h, err := NewHeader(shape, dt)
					if err != nil {
						t.Fatal(err)
					}
					h.ByteOrder, h.Version = order, version
					h.Descrip = "round trip"
					h.Pixdim[1], h.Pixdim[2], h.Pixdim[3], h.Pixdim[4] = 0.75, 1.25, 2.5, 3
					var m Matrix4 = Matrix4{{0, -0.75, 0, 10}, {1.25, 0, 0, -20}, {0, 0, 2.5, 30.5}, {0, 0, 0, 1}}
					h.SetAffine(m, 2)
					h.Extensions = []Extension{{Code: 6, Data: []byte("hello, voxtrain\x00")}}
					raw := randomRaw(rng, dt, int(h.NumVoxels()))
					path := filepath.Join(dir, dt.String()+"_"+order.String()+map[int]string{1: "_v1", 2: "_v2"}[version]+ext)
					if err := WriteRaw(path, h, raw); err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					got, gotRaw, err := ReadRaw(path)
					if err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					if !bytes.Equal(gotRaw, raw) {
						t.Fatalf("%s: voxel bytes differ after round trip", path)
					}
					if got.Version != version || got.ByteOrder != order || got.Datatype != dt || got.Dim != h.Dim {
						t.Fatalf("%s: header (v%d %v %v %v), want (v%d %v %v %v)", path, got.Version, got.ByteOrder, got.Datatype, got.Dim, version, order, dt, h.Dim)
					}
					if got.Pixdim != h.Pixdim || got.Srow != h.Srow || got.Descrip != h.Descrip || got.QformCode != 2 || got.SformCode != 2 {
						t.Fatalf("%s: geometry fields differ: %+v", path, got)
					}
					if len(got.Extensions) != 1 || got.Extensions[0].Code != 6 || !bytes.HasPrefix(got.Extensions[0].Data, []byte("hello, voxtrain")) {
						t.Fatalf("%s: extensions = %+v", path, got.Extensions)
					}
					a, err := got.Affine()
					if err != nil {
						t.Fatal(err)
					}
					q, err := got.QformAffine()
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i < 4; i++ {
						for j := 0; j < 4; j++ {
							if math.Abs(a[i][j]-m[i][j]) > 1e-6 || math.Abs(q[i][j]-m[i][j]) > 1e-6 {
								t.Fatalf("%s: affine %v / qform %v, want %v", path, a, q, m)
							}
						}
					}
				}
			}
		}
	}
}

// TestRoundTripFloat32 writes float32 values as each scalar type (with and
// without scaling) and reads them back through the float32 path.
func TestRoundTripFloat32(t *testing.T) {
	dir := t.TempDir()
	shape := []int{7, 3, 2}
	n := 7 * 3 * 2
	for _, dt := range []Datatype{Uint8, Int8, Int16, Uint16, Int32, Uint32, Int64, Uint64, Float32, Float64, RGB24} {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			for _, scaled := range []bool{false, true} {
				h, _ := NewHeader(shape, dt)
				h.ByteOrder = order
				vals := make([]float32, n*dt.Components())
				for i := range vals {
					vals[i] = float32(i % 100) // exactly representable in every type
				}
				if scaled {
					h.SclSlope, h.SclInter = 0.5, -3
					for i := range vals {
						vals[i] = float32(float64(i%100)*0.5 - 3)
					}
				}
				path := filepath.Join(dir, "f32_"+dt.String()+"_"+order.String()+".nii.gz")
				if err := WriteFloat32(path, h, vals); err != nil {
					t.Fatal(err)
				}
				_, got, err := ReadFloat32(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(vals) {
					t.Fatalf("%s: %d values, want %d", path, len(got), len(vals))
				}
				for i := range got {
					if got[i] != vals[i] {
						t.Fatalf("%s: value %d = %v, want %v", path, i, got[i], vals[i])
					}
				}
			}
		}
	}
}

// TestWriteSaturatesAndRounds pins down the float → integer conversion.
func TestWriteSaturatesAndRounds(t *testing.T) {
	h, _ := NewHeader([]int{6}, Uint8)
	path := filepath.Join(t.TempDir(), "sat.nii")
	in := []float32{-5, 0.5, 1.5, 254.6, 1000, float32(math.NaN())}
	if err := WriteFloat32(path, h, in); err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadFloat32(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 0, 2, 255, 255, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestComplexToFloat32IsAnError checks the documented refusal.
func TestComplexToFloat32IsAnError(t *testing.T) {
	_, _, err := ReadFloat32("testdata/synth/dt_complex64_le.nii")
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("dt_complex64_le.nii")) {
		t.Fatalf("err = %v, want an error naming the file", err)
	}
}

// TestReadFloat32IntoReusesBuffer checks the caller-buffer variant.
func TestReadFloat32IntoReusesBuffer(t *testing.T) {
	var r Reader
	h, want, err := r.ReadFloat32("testdata/real/msd_hippocampus_003.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, h.NumVoxels())
	if _, err := r.ReadFloat32Into("testdata/real/msd_hippocampus_003.nii.gz", buf); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		if buf[i] != want[i] {
			t.Fatalf("voxel %d differs", i)
		}
	}
	if _, err := r.ReadFloat32Into("testdata/real/msd_hippocampus_003.nii.gz", buf[:10]); err == nil {
		t.Fatal("short buffer accepted")
	}
}

func TestPairFindsGzipPartner(t *testing.T) {
	h, err := ReadHeader("testdata/synth/pair_gz.hdr.gz")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("testdata/synth/pair_gz.img.gz"); err != nil {
		t.Fatal(err)
	}
	if h.Datatype != Float32 {
		t.Fatalf("datatype %v", h.Datatype)
	}
}

// TestReadFloat32PrefixMatchesWholeRead holds the prefix read to the whole
// read for every scalar type, both byte orders, scaled or not, plain or gzip.
func TestReadFloat32PrefixMatchesWholeRead(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	var r Reader
	for _, dt := range []Datatype{Uint8, Int8, Int16, Uint16, Int32, Uint32, Int64, Uint64, Float32, Float64} {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			for _, ext := range []string{".nii", ".nii.gz", ".img.gz"} {
				h, _ := NewHeader([]int{7, 5, 6}, dt)
				h.ByteOrder = order
				if rng.IntN(2) == 0 {
					h.SclSlope, h.SclInter = 0.5, -3
				}
				raw := randomRaw(rng, dt, int(h.NumVoxels()))
				p := filepath.Join(dir, dt.String()+order.String()+ext)
				if err := WriteRaw(p, h, raw); err != nil {
					t.Fatal(err)
				}
				_, whole, err := ReadFloat32(p)
				if err != nil {
					t.Fatal(err)
				}
				_, wholeRaw, err := ReadRaw(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{0, 1, 35, 36, 100, 210} {
					dst := make([]float32, n)
					if _, err := r.ReadFloat32Prefix(p, dst); err != nil {
						t.Fatalf("%s prefix %d: %v", p, n, err)
					}
					for i := range dst {
						if math.Float32bits(dst[i]) != math.Float32bits(whole[i]) {
							t.Fatalf("%s prefix %d: value %d = %v, whole read %v", p, n, i, dst[i], whole[i])
						}
					}
					raw := make([]byte, n*dt.Size())
					if _, err := r.ReadRawPrefix(p, raw); err != nil {
						t.Fatalf("%s raw prefix %d: %v", p, n, err)
					}
					if !bytes.Equal(raw, wholeRaw[:len(raw)]) {
						t.Fatalf("%s raw prefix %d differs from the whole read", p, n)
					}
				}
				if _, err := r.ReadRawPrefix(p, make([]byte, dt.Size()*211)); err == nil {
					t.Fatalf("%s: raw prefix longer than the image accepted", p)
				}
				if _, err := r.ReadFloat32Prefix(p, make([]float32, 211)); err == nil {
					t.Fatalf("%s: prefix longer than the image accepted", p)
				}
			}
		}
	}
	if _, err := r.ReadFloat32Prefix("testdata/synth/dt_RGB24_le.nii", make([]float32, 3)); err == nil {
		t.Fatal("RGB prefix accepted")
	}
}

// TestFileReadsOnce checks Reader.Open: the header is there before any
// voxel is read, a prefix read gives the whole read's first values, and a
// second read of the same open file is an error naming it.
func TestFileReadsOnce(t *testing.T) {
	dir := t.TempDir()
	h, _ := NewHeader([]int{9, 8, 7}, Int16)
	raw := randomRaw(rand.New(rand.NewPCG(3, 4)), Int16, int(h.NumVoxels()))
	p := filepath.Join(dir, "vol.nii.gz")
	if err := WriteRaw(p, h, raw); err != nil {
		t.Fatal(err)
	}
	_, whole, err := ReadFloat32(p)
	if err != nil {
		t.Fatal(err)
	}
	var r Reader
	f, err := r.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Header().Shape(); !slices.Equal(got, []int{9, 8, 7}) {
		t.Fatalf("shape %v", got)
	}
	dst := make([]float32, 72)
	if err := f.ReadFloat32Prefix(dst); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst, whole[:72]) {
		t.Fatal("prefix differs from the whole read")
	}
	if err := f.ReadFloat32Into(make([]float32, len(whole))); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("second read: %v, want an error naming %s", err, p)
	}
}

// TestConcurrentGzipReads decodes gzip files from many goroutines at once
// through the pooled decoders: every read must give its own file's values.
func TestConcurrentGzipReads(t *testing.T) {
	dir := t.TempDir()
	const files = 6
	want := make([][]float32, files)
	paths := make([]string, files)
	for i := range files {
		h, _ := NewHeader([]int{20 + i, 16, 12}, Int16)
		raw := randomRaw(rand.New(rand.NewPCG(uint64(i), 9)), Int16, int(h.NumVoxels()))
		paths[i] = filepath.Join(dir, fmt.Sprintf("v%d.nii.gz", i))
		if err := WriteRaw(paths[i], h, raw); err != nil {
			t.Fatal(err)
		}
		var err error
		if _, want[i], err = ReadFloat32(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 30 {
				i := (g + k) % files
				_, got, err := ReadFloat32(paths[i])
				if err == nil && !slices.Equal(got, want[i]) {
					err = fmt.Errorf("%s: values differ", paths[i])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestFreeSurferVectorsRoundTrip: the FreeSurfer long-vector headers
// nibabel writes (dim (-1, 1, 1) with the length in glmin; the ico7
// surface as (27307, 1, 6)) read as their vectors and write back as they
// were stored, bytes and all; dim[1] = -1 without glmin is refused.
func TestFreeSurferVectorsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		file  string
		shape []int
	}{{"fs_glmin.nii", []int{40000, 1, 1}}, {"fs_ico7.nii", []int{163842, 1, 1}}} {
		h, raw, err := ReadRaw(filepath.Join("testdata", "synth", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(h.Shape()) != fmt.Sprint(tc.shape) || h.NumVoxels() != int64(len(raw)) {
			t.Errorf("%s: shape %v, %d voxels for %d bytes; want %v", tc.file, h.Shape(), h.NumVoxels(), len(raw), tc.shape)
		}
		out := filepath.Join(t.TempDir(), tc.file)
		if err := WriteRaw(out, h, raw); err != nil {
			t.Fatalf("%s: write: %v", tc.file, err)
		}
		h2, raw2, err := ReadRaw(out)
		if err != nil {
			t.Fatal(err)
		}
		if h2.Dim != h.Dim || h2.Glmin != h.Glmin || !bytes.Equal(raw, raw2) {
			t.Errorf("%s: written back as dim %v glmin %d (was %v, %d)", tc.file, h2.Dim, h2.Glmin, h.Dim, h.Glmin)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "synth", "fs_glmin.nii"))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[144:], 0) // glmin
	bad := filepath.Join(t.TempDir(), "noglmin.nii")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadRaw(bad); err == nil || !strings.Contains(err.Error(), "glmin = 0 holds no length") {
		t.Errorf("dim[1] = -1 without glmin: %v", err)
	}
}

// TestWrittenFilesFollowTheUmask: written images (a prediction, a .hdr/
// .img pair) get the umask's permissions, as os.Create gives, so others
// can open them; they were 0600 whatever the umask.
func TestWrittenFilesFollowTheUmask(t *testing.T) {
	testutil.Umask(t, 0o022)
	h, _ := NewHeader([]int{2, 2, 2}, Uint8)
	dir := t.TempDir()
	for _, name := range []string{"pred.nii.gz", "pair.hdr"} {
		if err := WriteFloat32(filepath.Join(dir, name), h, make([]float32, 8)); err != nil {
			t.Fatal(err)
		}
	}
	names := testutil.DirNames(t, dir)
	if !slices.Equal(names, []string{"pair.hdr", "pair.img", "pred.nii.gz"}) {
		t.Fatalf("wrote %v", names)
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644 under umask 022", n, fi.Mode().Perm())
		}
	}
}

// TestReadingADirectory: a folder, with or without a NIfTI extension, is
// reported as a directory rather than as an unknown extension.
func TestReadingADirectory(t *testing.T) {
	for _, name := range []string{"imagesTr", "odd.nii.gz"} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := ReadHeader(dir)
		if err == nil || !strings.Contains(err.Error(), dir+" is a directory") {
			t.Errorf("ReadHeader(%s): %v, want it named as a directory", name, err)
		}
	}
}
