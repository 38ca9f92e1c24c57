package nifti

import (
	"bufio"
	stdgzip "compress/gzip"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/voxtrain/voxtrain/internal/inflate"
)

// benchVolume writes a 160×192×160 int16 MRI-like volume (smooth anatomy-like
// intensities plus noise, compressing about 2× like real T1 images) as .nii
// and .nii.gz into a temporary directory, once per test binary.
var benchVolume = sync.OnceValues(func() (string, error) {
	benchMade.Store(true)
	dir, err := os.MkdirTemp("", "voxtrain-nifti-bench")
	if err != nil {
		return "", err
	}
	const nx, ny, nz = 160, 192, 160
	h, err := NewHeader([]int{nx, ny, nz}, Int16)
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(7, 7))
	vals := make([]float32, nx*ny*nz)
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				dx, dy, dz := float64(x-nx/2)/60, float64(y-ny/2)/75, float64(z-nz/2)/60
				r := math.Sqrt(dx*dx + dy*dy + dz*dz)
				v := 0.0
				if r < 1 {
					v = 600 + 300*math.Cos(6*r) + 80*math.Sin(float64(x)/7)*math.Cos(float64(y)/9)
				}
				vals[(z*ny+y)*nx+x] = float32(math.Abs(v + rng.NormFloat64()*20))
			}
		}
	}
	for _, name := range []string{"vol.nii", "vol.nii.gz"} {
		if err := WriteFloat32(filepath.Join(dir, name), h, vals); err != nil {
			return "", err
		}
	}
	return dir, nil
})

// benchMade records that benchVolume ran (TestMain cleans up after it).
var benchMade atomic.Bool

func benchDir(b *testing.B) string {
	dir, err := benchVolume()
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

const benchRawBytes = 160 * 192 * 160 * 2

// BenchmarkDecodeFloat32 measures file → []float32 (MB/s of int16 voxel data).
func BenchmarkDecodeFloat32(b *testing.B) {
	dir := benchDir(b)
	buf := make([]float32, 160*192*160)
	for _, name := range []string{"vol.nii", "vol.nii.gz"} {
		b.Run(name, func(b *testing.B) {
			var r Reader
			b.SetBytes(benchRawBytes)
			for b.Loop() {
				if _, err := r.ReadFloat32Into(filepath.Join(dir, name), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInflate is the ceiling for .nii.gz decoding: inflating the same
// file (opened and read like the decoder does) into a preallocated buffer,
// with internal/inflate (what Reader uses), klauspost/compress and the
// standard library.
func BenchmarkInflate(b *testing.B) {
	path := filepath.Join(benchDir(b), "vol.nii.gz")
	out := make([]byte, benchRawBytes+1024)
	run := func(b *testing.B, open func(io.Reader) (io.Reader, error)) {
		b.SetBytes(benchRawBytes)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			zr, err := open(bufio.NewReaderSize(f, 64<<10))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(zr, out[:benchRawBytes+352]); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	b.Run("inflate", func(b *testing.B) {
		var zr inflate.Reader
		run(b, func(r io.Reader) (io.Reader, error) { return &zr, zr.ResetReader(r) })
	})
	b.Run("klauspost", func(b *testing.B) {
		run(b, func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) })
	})
	b.Run("stdlib", func(b *testing.B) {
		run(b, func(r io.Reader) (io.Reader, error) { return stdgzip.NewReader(r) })
	})
}

// BenchmarkMemcpy is the floor: copying the voxel bytes once.
func BenchmarkMemcpy(b *testing.B) {
	src := make([]byte, benchRawBytes)
	dst := make([]byte, benchRawBytes)
	b.SetBytes(benchRawBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

// BenchmarkConvertInt16 is the conversion alone (int16 → float32).
func BenchmarkConvertInt16(b *testing.B) {
	src := make([]byte, benchRawBytes)
	dst := make([]float32, benchRawBytes/2)
	b.SetBytes(benchRawBytes)
	for b.Loop() {
		convert(Int16, true, src, dst, 1, 0, false)
	}
}

// TestMain removes the benchmark volume's directory when the benchmarks
// made one.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchMade.Load() {
		if dir, err := benchVolume(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}
