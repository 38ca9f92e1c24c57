package optiming_test

import (
	"slices"
	"testing"

	"github.com/voxtrain/voxtrain/config"
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
		name      string
		act, grad int
		want      int64
	}{
		{optiming.NormForward + " 2×4×4×4×8", 2, 2, 2 * 64 * 8 * 2 * 3},
		{optiming.NormForward + " 2×4×4×4×8", 2, 4, 2 * 64 * 8 * 2 * 3},
		{optiming.NormBackward + " 2×4×4×4×8", 4, 4, 2 * 64 * 8 * 4 * 5},
		{optiming.NormBackward + " 2×4×4×4×8", 2, 2, 2 * 64 * 8 * 2 * 5},
		// bf16 activations, float32 gradients: x read twice at 2 bytes,
		// dy twice and dx once at 4.
		{optiming.NormBackward + " 2×4×4×4×8", 2, 4, 2 * 64 * 8 * (2*2 + 3*4)},
		{optiming.NormForward, 2, 2, 0},
		{optiming.NormForward + " 2×x", 2, 2, 0},
		{optiming.Concat + " 2×4×4×4×8", 2, 2, 0},
		{optiming.ConvForward + " 1×4×4×4×2→8 k3×3×3 s1×1×1", 2, 2, 0},
	} {
		if got := optiming.MinimalTraffic(c.name, c.act, c.grad); got != c.want {
			t.Errorf("MinimalTraffic(%q, %d, %d) = %d, want %d", c.name, c.act, c.grad, got, c.want)
		}
	}
}

// narrowDevice is a CPU device that says it stores activations and their
// gradients in 2 bytes and reports its memory, counting the calls: what
// the CUDA device does in bf16 mode, as nn sees it.
type narrowDevice struct {
	*cpu.Device
	acts, grads, prepared int
}

func (d *narrowDevice) PrepareConvs(ps []nn.ConvPass) error {
	d.prepared += len(ps)
	return nil
}

func (d *narrowDevice) ActivationBytes() int         { return 2 }
func (d *narrowDevice) ActivationGradientBytes() int { return 2 }
func (d *narrowDevice) MemoryAvailable() (int64, bool) {
	return 1 << 40, true
}
func (d *narrowDevice) PeakAllocated() int64 { return 12345 }
func (d *narrowDevice) AllocActivation(s nn.Shape) nn.Tensor {
	d.acts++
	return d.Alloc(s)
}
func (d *narrowDevice) AllocActivationGradient(s nn.Shape) nn.Tensor {
	d.grads++
	return d.Alloc(s)
}

// TestForwardsOptionalInterfaces checks that the wrapper keeps what the
// wrapped device tells nn through optional interfaces: a U-Net built on
// the wrapper allocates its activations and their gradients through the
// wrapped device's narrow allocators (timing a bf16 GPU step with float32
// activations is the fault this guards against), and over a device without
// them everything is float32.
func TestForwardsOptionalInterfaces(t *testing.T) {
	nd := &narrowDevice{Device: cpu.New(cpu.Options{Threads: 1})}
	d := &optiming.Device{Device: nd, Span: func(string) func() { return func() {} }}
	var (
		_ nn.ActivationAllocator         = d
		_ nn.ActivationGradientAllocator = d
		_ nn.MemoryReporter              = d
		_ nn.ConvPreparer                = d
	)
	if d.ActivationBytes() != 2 || d.ActivationGradientBytes() != 2 || d.PeakAllocated() != 12345 {
		t.Errorf("wrapper answers activation %d, gradient %d bytes, peak %d; want the wrapped 2, 2, 12345",
			d.ActivationBytes(), d.ActivationGradientBytes(), d.PeakAllocated())
	}
	if b, ok := d.MemoryAvailable(); !ok || b != 1<<40 {
		t.Errorf("MemoryAvailable = %d, %v; want the wrapped device's", b, ok)
	}
	m, err := nn.NewUNet(d, config.Default().Model, 1)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := m.NewWorkspace(1, [3]int{16, 16, 16}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	if nd.prepared == 0 {
		t.Error("the U-Net's workspace prepared no convolution through the wrapped device")
	}
	if nd.acts == 0 || nd.grads == 0 {
		t.Errorf("the U-Net's workspace made %d activations and %d activation gradients through the wrapped device's allocators; want both > 0", nd.acts, nd.grads)
	}

	plain := &optiming.Device{Device: cpu.New(cpu.Options{Threads: 1})}
	if plain.ActivationBytes() != 4 || plain.ActivationGradientBytes() != 4 || plain.PeakAllocated() != 0 {
		t.Errorf("over the CPU device: activation %d, gradient %d bytes, peak %d; want 4, 4, 0",
			plain.ActivationBytes(), plain.ActivationGradientBytes(), plain.PeakAllocated())
	}
	if _, ok := plain.MemoryAvailable(); !ok {
		t.Error("over the CPU device MemoryAvailable says not ok; the CPU device reports the machine's")
	}
	if err := plain.PrepareConvs([]nn.ConvPass{{}}); err != nil {
		t.Errorf("PrepareConvs over the CPU device: %v", err)
	}
	if x := plain.AllocActivation(nn.Shape{2, 3}); x.Shape().Len() != 6 {
		t.Errorf("AllocActivation over the CPU device: shape %v", x.Shape())
	}
}
