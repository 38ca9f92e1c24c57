package store

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// mriLike returns a z-scored volume shaped like the benchmark dataset's
// images: int16 intensities (smooth structure plus Rician-like noise of
// sigma 10) normalised to float32, so the float bytes have the statistics
// the store sees in practice.
func mriLike(shape [3]int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	n := shape[0] * shape[1] * shape[2]
	raw := make([]float64, n)
	sum, sq := 0.0, 0.0
	for z := 0; z < shape[0]; z++ {
		for y := 0; y < shape[1]; y++ {
			for x := 0; x < shape[2]; x++ {
				dz, dy, dx := float64(z)/float64(shape[0])-0.5, float64(y)/float64(shape[1])-0.5, float64(x)/float64(shape[2])-0.5
				base := 0.0
				if dz*dz+dy*dy+dx*dx < 0.2 {
					base = 500 + 200*math.Sin(float64(x)/7)*math.Cos(float64(y)/9)
				}
				a, b := base+10*r.NormFloat64(), 10*r.NormFloat64()
				v := math.Round(math.Sqrt(a*a + b*b))
				raw[(z*shape[1]+y)*shape[2]+x] = v
				sum += v
				sq += v * v
			}
		}
	}
	mean := sum / float64(n)
	std := math.Sqrt(sq/float64(n) - mean*mean)
	out := make([]float32, n)
	m, inv := float32(mean), float32(1/std)
	for i, v := range raw {
		out[i] = (float32(v) - m) * inv
	}
	return out
}

// BenchmarkReadRegion compares the codecs on what training does: read a
// 96³ region of a 128×144×128 MRI-like case (64³ chunks) into a buffer.
// It reports the compression ratio of the image and the rate in
// region-voxel MB/s. Recorded in docs/bench/data.md.
func BenchmarkReadRegion(b *testing.B) {
	shape := [3]int{128, 144, 128}
	img := mriLike(shape)
	src := filepath.Join(b.TempDir(), "src.nii")
	os.WriteFile(src, []byte("x"), 0o644)
	srcs := []SourceFile{{Path: src}}
	for _, codec := range []string{CodecS2, CodecS2Shuffle, CodecZstd, CodecZstdShuffle} {
		b.Run(codec, func(b *testing.B) {
			dir := b.TempDir()
			w, err := NewWriter(dir, []byte(`{}`), 64, codec)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Put("c", srcs, shape, [][]float32{img}, nil, nil); err != nil {
				b.Fatal(err)
			}
			e := w.Entry("c")
			w.Close()
			st, _ := Open(dir)
			defer st.Close()
			c, err := st.Case("c")
			if err != nil {
				b.Fatal(err)
			}
			const p = 96
			out := [][]float32{make([]float32, p*p*p)}
			var sc Scratch
			r := rand.New(rand.NewPCG(3, 4))
			b.SetBytes(4 * p * p * p)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lo := [3]int{r.IntN(shape[0] - p + 1), r.IntN(shape[1] - p + 1), r.IntN(shape[2] - p + 1)}
				if err := c.ReadRegion(lo, [3]int{lo[0] + p, lo[1] + p, lo[2] + p}, out, nil, &sc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(e.RawBytes)/float64(e.StoredBytes), "ratio")
		})
	}
}

func TestMRILikeIsNormalised(t *testing.T) {
	v := mriLike([3]int{16, 16, 16})
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	if m := s / float64(len(v)); math.Abs(m) > 1e-3 {
		t.Errorf("mean %g", m)
	}
}
