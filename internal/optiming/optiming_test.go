package optiming_test

import (
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/cpu"
	"github.com/voxtrain/voxtrain/internal/geom"
	"github.com/voxtrain/voxtrain/internal/optiming"
	"github.com/voxtrain/voxtrain/nn"
)

// TestSpans checks that the wrapped ops run inside spans named by group,
// with the main tensor's shape (a convolution's geometry) when ByShape,
// and that they still compute what the device computes.
func TestSpans(t *testing.T) {
	for _, byShape := range []bool{false, true} {
		var names []string
		open := 0
		d := &optiming.Device{Device: cpu.New(cpu.Options{Threads: 1}), ByShape: byShape, Span: func(g string) func() {
			names = append(names, g)
			open++
			return func() { open-- }
		}}
		g := geom.Conv{N: 1, InD: 4, InH: 4, InW: 4, InC: 2, OutC: 8, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1, PD: 1, PH: 1, PW: 1}
		x := d.Alloc(g.InShape()).(*cpu.Tensor)
		w := d.Alloc(g.WeightShape()).(*cpu.Tensor)
		for _, t := range []*cpu.Tensor{x, w} {
			for i := range t.Data() {
				t.Data()[i] = 1
			}
		}
		b := d.Alloc(nn.Shape{g.OutC})
		y := d.Alloc(g.OutShape()).(*cpu.Tensor)
		d.Conv3DForward(g, x, w, b, y)
		if y.Data()[0] == 0 {
			t.Error("the wrapped Conv3DForward did not run")
		}
		stats := d.Alloc(nn.Shape{1, 8, 2})
		gamma, beta := d.Alloc(nn.Shape{8}), d.Alloc(nn.Shape{8})
		d.InstanceNormActForward(y, gamma, beta, y, stats, 1e-5, 0.01)
		d.AddChannelBias(y, b)
		if open != 0 {
			t.Errorf("%d spans left open", open)
		}
		want := []string{optiming.ConvForward, optiming.NormForward, optiming.Bias}
		if byShape {
			want = []string{optiming.ConvForward + " 1×4×4×4×2→8 k3×3×3 s1×1×1", optiming.NormForward + " 1×4×4×4×8", optiming.Bias + " 1×4×4×4×8"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("ByShape %v: spans %q, want %q", byShape, names, want)
		}
	}
}

func TestMinimalTraffic(t *testing.T) {
	for _, c := range []struct {
		name string
		elem int
		want int64
	}{
		{optiming.NormForward + " 2×4×4×4×8", 2, 2 * 64 * 8 * 2 * 3},
		{optiming.NormBackward + " 2×4×4×4×8", 4, 2 * 64 * 8 * 4 * 5},
		{optiming.NormForward, 2, 0},
		{optiming.NormForward + " 2×x", 2, 0},
		{optiming.Concat + " 2×4×4×4×8", 2, 0},
		{optiming.ConvForward + " 1×4×4×4×2→8 k3×3×3 s1×1×1", 2, 0},
	} {
		if got := optiming.MinimalTraffic(c.name, c.elem); got != c.want {
			t.Errorf("MinimalTraffic(%q, %d) = %d, want %d", c.name, c.elem, got, c.want)
		}
	}
}
