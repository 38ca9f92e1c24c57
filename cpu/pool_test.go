package cpu

import (
	"math"
	"testing"

	"github.com/voxtrain/voxtrain/nn"
)

// TestAvgPool checks AvgPool against the mean of each window computed
// directly (float64) and AvgPoolBackward as its adjoint:
// ⟨AvgPool(x), g⟩ = ⟨x, AvgPoolBackward(g)⟩, with windows that leave a
// remainder on some axes (its gradient must be 0, not left stale).
func TestAvgPool(t *testing.T) {
	d := New(Options{})
	rng := newRNG(3)
	n, D, H, W, c := 2, 5, 4, 6, 3
	s := nn.Shape{n, D, H, W, c}
	x := randn(rng, s.Len(), 1, 0)
	for _, k := range [][3]int{{1, 1, 1}, {2, 2, 2}, {1, 2, 3}, {5, 4, 6}, {2, 3, 4}} {
		ps := nn.Shape{n, D / k[0], H / k[1], W / k[2], c}
		y := d.Alloc(ps)
		d.AvgPool(tensorOf(d, s, x), y, k)
		got := cpuTensor(y).data
		at := func(b, z, yy, xx, j int) float64 { return float64(x[(((b*D+z)*H+yy)*W+xx)*c+j]) }
		for b := 0; b < n; b++ {
			for oz := 0; oz < ps[1]; oz++ {
				for oy := 0; oy < ps[2]; oy++ {
					for ox := 0; ox < ps[3]; ox++ {
						for j := 0; j < c; j++ {
							var sum float64
							for a := 0; a < k[0]; a++ {
								for e := 0; e < k[1]; e++ {
									for f := 0; f < k[2]; f++ {
										sum += at(b, oz*k[0]+a, oy*k[1]+e, ox*k[2]+f, j)
									}
								}
							}
							want := sum / float64(k[0]*k[1]*k[2])
							g := got[(((b*ps[1]+oz)*ps[2]+oy)*ps[3]+ox)*c+j]
							if math.Abs(float64(g)-want) > 1e-6 {
								t.Fatalf("window %v: y[%d,%d,%d,%d,%d] = %v, want %v", k, b, oz, oy, ox, j, g, want)
							}
						}
					}
				}
			}
		}

		gy := randn(rng, ps.Len(), 1, 0)
		dx := tensorOf(d, s, randn(rng, s.Len(), 5, 0)) // stale values must be overwritten
		d.AvgPoolBackward(tensorOf(d, ps, gy), dx, k)
		var lhs, rhs float64
		for i, v := range got {
			lhs += float64(v) * float64(gy[i])
		}
		for i, v := range cpuTensor(dx).data {
			rhs += float64(x[i]) * float64(v)
		}
		if math.Abs(lhs-rhs) > 1e-5*(1+math.Abs(lhs)) {
			t.Errorf("window %v: <AvgPool(x), g> = %v, <x, AvgPoolBackward(g)> = %v", k, lhs, rhs)
		}
		// The remainder of an axis gets no gradient.
		for i, v := range cpuTensor(dx).data {
			xx, yy, z := (i/c)%W, (i/(c*W))%H, (i/(c*W*H))%D
			if (z >= ps[1]*k[0] || yy >= ps[2]*k[1] || xx >= ps[3]*k[2]) && v != 0 {
				t.Fatalf("window %v: gradient %v in the remainder at element %d", k, v, i)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a window larger than its axis did not panic")
		}
	}()
	d.AvgPool(tensorOf(d, s, x), d.Alloc(nn.Shape{n, 0, 1, 1, c}), [3]int{6, 4, 6})
}
