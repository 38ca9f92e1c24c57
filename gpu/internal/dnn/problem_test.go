package dnn

import (
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/geom"
)

// TestNewProblemNDHWC: the descriptors of a strided convolution on
// channels-last tensors: dimensions in cuDNN's N, C, D, H, W order, the
// strides of the NDHWC memory (C fastest), the filter as nn's
// (O, kD, kH, kW, I) weights, and each precision's data and math types.
func TestNewProblemNDHWC(t *testing.T) {
	g := geom.Conv{N: 2, InD: 9, InH: 10, InW: 11, InC: 3, OutC: 5, KD: 3, KH: 3, KW: 1, SD: 2, SH: 1, SW: 1, PD: 1, PH: 1, PW: 0}
	p, err := NewProblem(g, FP32)
	if err != nil {
		t.Fatal(err)
	}
	want := Problem{
		X: Tensor{Type: Float, Dims: [5]int32{2, 3, 9, 10, 11}, Strides: [5]int32{9 * 10 * 11 * 3, 1, 10 * 11 * 3, 11 * 3, 3}},
		Y: Tensor{Type: Float, Dims: [5]int32{2, 5, 5, 10, 11}, Strides: [5]int32{5 * 10 * 11 * 5, 1, 10 * 11 * 5, 11 * 5, 5}},
		W: Filter{Type: Float, Format: FormatNHWC, Dims: [5]int32{5, 3, 3, 3, 1}},
		Conv: Convolution{Pad: [3]int32{1, 1, 0}, Stride: [3]int32{2, 1, 1}, Dilation: [3]int32{1, 1, 1},
			Mode: CrossCorrelation, Compute: Float, Math: FMAMath},
	}
	if p != want {
		t.Errorf("NewProblem(%+v, fp32) =\n%+v\nwant\n%+v", g, p, want)
	}
	if p.X.Elems() != g.InLen() || p.Y.Elems() != g.OutLen() || p.W.Elems() != g.WeightLen() {
		t.Errorf("elements %d %d %d, want %d %d %d", p.X.Elems(), p.Y.Elems(), p.W.Elems(), g.InLen(), g.OutLen(), g.WeightLen())
	}
	for _, tc := range []struct {
		prec Precision
		dt   DataType
		m    MathType
	}{{TF32, Float, DefaultMath}, {BF16, BFloat16, TensorOpMath}} {
		q, err := NewProblem(g, tc.prec)
		if err != nil {
			t.Fatal(err)
		}
		if q.X.Type != tc.dt || q.Y.Type != tc.dt || q.W.Type != tc.dt || q.Conv.Compute != Float || q.Conv.Math != tc.m {
			t.Errorf("%s: types x %s y %s w %s compute %s math %d", tc.prec, q.X.Type, q.Y.Type, q.W.Type, q.Conv.Compute, q.Conv.Math)
		}
		if q.X.Strides != p.X.Strides {
			t.Errorf("%s: strides %v differ from fp32's %v (strides count elements)", tc.prec, q.X.Strides, p.X.Strides)
		}
	}
}

// TestNewProblemLimits: tensors beyond cuDNN's int and invalid
// geometries are errors, not truncated descriptors.
func TestNewProblemLimits(t *testing.T) {
	big := geom.Conv{N: 4, InD: 512, InH: 512, InW: 512, InC: 8, OutC: 8, KD: 1, KH: 1, KW: 1, SD: 1, SH: 1, SW: 1}
	if _, err := NewProblem(big, BF16); err == nil || !strings.Contains(err.Error(), "exceed cuDNN's int") {
		t.Errorf("4·512³·8 elements: %v", err)
	}
	if _, err := NewProblem(geom.Conv{N: 1, InD: 2, InH: 2, InW: 2, InC: 1, OutC: 1, KD: 3, KH: 3, KW: 3, SD: 1, SH: 1, SW: 1}, FP32); err == nil {
		t.Error("a kernel larger than the input was accepted")
	}
}
