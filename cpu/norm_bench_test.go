package cpu

import (
	"testing"

	"github.com/voxtrain/voxtrain/internal/procstat"
	"github.com/voxtrain/voxtrain/nn"
)

// BenchmarkInstanceNormAct times the fused norm+activation forward and
// backward on one level-0 activation of the reference U-Net (2×64³×16).
func BenchmarkInstanceNormAct(b *testing.B) {
	d := New(Options{})
	rng := newRNG(1)
	s := nn.Shape{2, 64, 64, 64, 16}
	c := s[4]
	x := tensorOf(d, s, randn(rng, s.Len(), 1, 0.3))
	gamma, beta := tensorOf(d, nn.Shape{c}, randn(rng, c, 0.1, 1)), tensorOf(d, nn.Shape{c}, randn(rng, c, 0.1, 0))
	y, st := d.Alloc(s), d.Alloc(nn.Shape{2, c, 2})
	dy := tensorOf(d, s, randn(rng, s.Len(), 1, 0))
	dx, dg, db := d.Alloc(s), d.Alloc(nn.Shape{c}), d.Alloc(nn.Shape{c})
	b.Run("forward", func(b *testing.B) {
		b.SetBytes(int64(s.Len()) * 4)
		c0 := procstat.CPUTime()
		for i := 0; i < b.N; i++ {
			d.InstanceNormActForward(x, gamma, beta, y, st, 1e-5, 0.01)
		}
		b.ReportMetric(float64((procstat.CPUTime()-c0).Nanoseconds())/float64(b.N)/float64(s.Len()), "cpu-ns/elem")
	})
	b.Run("backward", func(b *testing.B) {
		b.SetBytes(int64(s.Len()) * 4)
		c0 := procstat.CPUTime()
		for i := 0; i < b.N; i++ {
			d.InstanceNormActBackward(x, gamma, beta, st, dy, dx, dg, db, 0.01)
		}
		b.ReportMetric(float64((procstat.CPUTime()-c0).Nanoseconds())/float64(b.N)/float64(s.Len()), "cpu-ns/elem")
	})
}
