package inflate

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	kpgzip "github.com/klauspost/compress/gzip"
)

const benchImage = "/tmp/vxdata/bench/data/imagesTr/case_000.nii.gz"

// mriVolume is a 96^3 int16 volume: a smooth field plus Gaussian noise with a
// zero background outside a sphere, like a skull-stripped MRI.
func mriVolume() []byte {
	const n = 96
	r := rand.New(rand.NewPCG(42, 42))
	b := make([]byte, 2*n*n*n)
	i := 0
	for z := 0; z < n; z++ {
		for y := 0; y < n; y++ {
			for x := 0; x < n; x++ {
				dx, dy, dz := float64(x-n/2), float64(y-n/2), float64(z-n/2)
				var v float64
				if dx*dx+dy*dy+dz*dz < 44*44 {
					v = 700 + 300*math.Sin(float64(x)/9)*math.Cos(float64(y)/13)*math.Sin(float64(z)/7) + 60*r.NormFloat64()
				}
				binary.LittleEndian.PutUint16(b[i:], uint16(int16(v)))
				i += 2
			}
		}
	}
	return b
}

// labelVolume is a 128^3 uint8 segmentation-like volume: a few nested blobs.
func labelVolume() []byte {
	const n = 128
	b := make([]byte, n*n*n)
	i := 0
	for z := 0; z < n; z++ {
		for y := 0; y < n; y++ {
			for x := 0; x < n; x++ {
				dx, dy, dz := x-60, y-70, z-64
				d := dx*dx + dy*dy + 2*dz*dz
				switch {
				case d < 15*15:
					b[i] = 2
				case d < 35*35:
					b[i] = 1
				}
				i++
			}
		}
	}
	return b
}

// BenchmarkInflate compares this package with klauspost/compress/gzip and
// compress/gzip. Every decoder is reused across iterations (Reset) and reads
// the whole file into a preallocated buffer, as the NIfTI loader does.
// inflate runs on the in-memory file (Reset) and streaming (ResetReader)
// from a *bytes.Reader and, for the real image, from the *os.File.
func BenchmarkInflate(b *testing.B) {
	type input struct {
		name string
		src  []byte
		path string // the file, for the *os.File variant
	}
	inputs := []input{
		{"mri96", gzipKP(b, mriVolume(), kpgzip.DefaultCompression), ""},
		{"labels128", gzipKP(b, labelVolume(), kpgzip.DefaultCompression), ""},
	}
	if src, err := os.ReadFile(benchImage); err == nil {
		inputs = append(inputs, input{"case_000", src, benchImage})
	} else {
		b.Logf("skipping case_000: %v", err)
	}
	for _, in := range inputs {
		want, err := stdDecode(in.src, 1<<32)
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]byte, len(want))
		check := func(b *testing.B) {
			if !bytes.Equal(dst, want) {
				b.Fatal("wrong output")
			}
		}
		b.Run(in.name+"/inflate", func(b *testing.B) {
			var z Reader
			b.SetBytes(int64(len(want)))
			b.ReportAllocs()
			for b.Loop() {
				if err := z.Reset(in.src); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(&z, dst); err != nil {
					b.Fatal(err)
				}
			}
			check(b)
		})
		// ResetReader from a *bytes.Reader: the streaming path's overhead
		// (window refills) without I/O.
		b.Run(in.name+"/inflate-reader", func(b *testing.B) {
			var z Reader
			br := bytes.NewReader(in.src)
			b.SetBytes(int64(len(want)))
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(in.src)
				if err := z.ResetReader(br); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(&z, dst); err != nil {
					b.Fatal(err)
				}
			}
			check(b)
		})
		// ResetReader from an *os.File (page cache): what a streaming
		// NIfTI read does instead of os.ReadFile + Reset.
		if in.path != "" {
			b.Run(in.name+"/inflate-file", func(b *testing.B) {
				f, err := os.Open(in.path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				var z Reader
				b.SetBytes(int64(len(want)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.Seek(0, io.SeekStart); err != nil {
						b.Fatal(err)
					}
					if err := z.ResetReader(f); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(&z, dst); err != nil {
						b.Fatal(err)
					}
				}
				check(b)
			})
		}
		// The libraries' readers, reused the same way.
		lib := func(b *testing.B, zr interface {
			io.Reader
			Reset(io.Reader) error
		}) {
			br := bytes.NewReader(in.src)
			b.SetBytes(int64(len(want)))
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(in.src)
				if err := zr.Reset(br); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(zr, dst); err != nil {
					b.Fatal(err)
				}
			}
			check(b)
		}
		b.Run(in.name+"/klauspost", func(b *testing.B) { lib(b, new(kpgzip.Reader)) })
		b.Run(in.name+"/stdlib", func(b *testing.B) { lib(b, new(stdgzip.Reader)) })
	}
}
