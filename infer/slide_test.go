package infer

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func TestStepsMatchNnUNet(t *testing.T) {
	cases := []struct {
		n, p int
		want []int
	}{
		{64, 64, []int{0}},
		{40, 64, []int{0}},
		{100, 64, []int{0, 18, 36}},
		{128, 64, []int{0, 32, 64}},
		{129, 64, []int{0, 22, 43, 65}},
	}
	for _, c := range cases {
		if got := Steps(c.n, c.p, 0.5); !slices.Equal(got, c.want) {
			t.Errorf("Steps(%d, %d) = %v, want %v", c.n, c.p, got, c.want)
		}
	}
}

// TestGaussianMapMatchesNnUNet compares with nnU-Net's compute_gaussian as
// computed by scipy (testdata/make_gaussian.py).
func TestGaussianMapMatchesNnUNet(t *testing.T) {
	b, err := os.ReadFile("testdata/gaussian_8x10x13.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Tile [3]int    `json:"tile"`
		Map  []float64 `json:"map"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	got := GaussianMap(ref.Tile)
	if len(got) != len(ref.Map) {
		t.Fatalf("%d values, want %d", len(got), len(ref.Map))
	}
	for i := range got {
		if math.Abs(float64(got[i])-ref.Map[i]) > 1e-5*math.Max(1, ref.Map[i]) {
			t.Fatalf("value %d = %v, scipy %v", i, got[i], ref.Map[i])
		}
	}
}

// pointwise maps every voxel independently (logit0 = x, logit1 = 2 − 3x,
// logit2 = x²), so sliding-window results must equal applying it to the
// whole volume, whatever the tiling, padding, batching and mirroring.
type pointwise struct{ inC, calls int }

func (m *pointwise) Forward(n int, in, out []float32) error {
	m.calls++
	pv := len(in) / (n * m.inC)
	for b := 0; b < n; b++ {
		x := in[b*m.inC*pv : (b*m.inC+1)*pv]
		o := out[b*3*pv : (b+1)*3*pv]
		for i, v := range x {
			o[i] = v
			o[pv+i] = 2 - 3*v
			o[2*pv+i] = v * v
		}
	}
	return nil
}

func TestPredictPointwiseModelIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		shape, patch [3]int
		mirror       []int
		batch        int
	}{
		{[3]int{20, 17, 33}, [3]int{8, 8, 16}, nil, 1},
		{[3]int{20, 17, 33}, [3]int{8, 8, 16}, []int{0, 1, 2}, 3},
		{[3]int{5, 30, 6}, [3]int{8, 8, 8}, []int{2}, 2}, // smaller than the patch on two axes
	} {
		n := tc.shape[0] * tc.shape[1] * tc.shape[2]
		img := make([]float32, n)
		for i := range img {
			img[i] = float32(rng.NormFloat64())
		}
		m := &pointwise{inC: 1}
		got, err := Predict(context.Background(), m, [][]float32{img}, tc.shape, 3, Window{Patch: tc.patch, Overlap: 0.5, BatchSize: tc.batch, MirrorAxes: tc.mirror})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range img {
			want := [3]float32{v, 2 - 3*v, v * v}
			for c := 0; c < 3; c++ {
				if g := got[c*n+i]; math.Abs(float64(g-want[c])) > 1e-5*math.Max(1, math.Abs(float64(want[c]))) {
					t.Fatalf("%+v: voxel %d channel %d = %v, want %v", tc, i, c, g, want[c])
				}
			}
		}
		if m.calls == 0 {
			t.Fatal("model never called")
		}
	}
}

// position is not flip-equivariant: its logits depend on the position inside
// the patch. Mirroring must average over the flips, so with all three axes
// mirrored the output is symmetric under flipping the patch.
type position struct{}

func (position) Forward(n int, in, out []float32) error {
	pv := len(in) / n
	for b := 0; b < n; b++ {
		for i := 0; i < pv; i++ {
			out[b*pv+i] = float32(i)
		}
	}
	return nil
}

func TestMirroringAveragesFlips(t *testing.T) {
	shape := [3]int{4, 4, 4}
	img := make([]float32, 64)
	got, err := Predict(context.Background(), position{}, [][]float32{img}, shape, 1, Window{Patch: shape, Overlap: 0.5, MirrorAxes: []int{0, 1, 2}, NoGaussian: true})
	if err != nil {
		t.Fatal(err)
	}
	// Average of index i and its flips over all 8 combinations = mean index 31.5.
	for i, v := range got {
		if math.Abs(float64(v)-31.5) > 1e-4 {
			t.Fatalf("voxel %d = %v, want 31.5", i, v)
		}
	}
	if len(mirrorCombos([]int{0, 2})) != 4 || len(mirrorCombos(nil)) != 1 {
		t.Fatal("mirror combinations")
	}
}

func TestArgmaxTiesGoLow(t *testing.T) {
	got := Argmax([]float32{1, 5, 2, 1, 5, 3}, 2, 3)
	if !slices.Equal(got, []uint8{0, 0, 1}) {
		t.Fatalf("got %v", got)
	}
}

func TestPredictRejectsBadInput(t *testing.T) {
	m := &pointwise{inC: 1}
	if _, err := Predict(context.Background(), m, [][]float32{make([]float32, 10)}, [3]int{2, 2, 2}, 3, Window{Patch: [3]int{2, 2, 2}}); err == nil {
		t.Fatal("wrong channel length accepted")
	}
	if _, err := Predict(context.Background(), m, [][]float32{make([]float32, 8)}, [3]int{2, 2, 2}, 3, Window{Patch: [3]int{2, 2, 2}, Overlap: 1}); err == nil {
		t.Fatal("overlap 1 accepted")
	}
}

// TestMirrorAxes: test-time mirroring skips the axes a patch is one voxel
// deep along (a 2d configuration's slices), where a flip changes nothing.
func TestMirrorAxes(t *testing.T) {
	for _, c := range []struct {
		patch [3]int
		want  []int
	}{
		{[3]int{16, 16, 16}, []int{0, 1, 2}},
		{[3]int{1, 56, 40}, []int{1, 2}},
		{[3]int{16, 16, 1}, []int{0, 1}},
		{[3]int{1, 1, 1}, nil},
	} {
		if got := mirrorAxes(c.patch); !slices.Equal(got, c.want) {
			t.Errorf("mirrorAxes(%v) = %v, want %v", c.patch, got, c.want)
		}
	}
}

// mixed's logits depend on the input and on the position inside the
// patch: not flip-equivariant in-plane.
type mixed struct{}

func (mixed) Forward(n int, in, out []float32) error {
	pv := len(in) / n
	for b := 0; b < n; b++ {
		for i := 0; i < pv; i++ {
			out[b*pv+i] = 2*in[b*pv+i] + float32(i%7)
		}
	}
	return nil
}

// TestMirrorAcrossSlicesChangesNothing: with windows one slice deep,
// mirroring across the slices too gives what mirroring in-plane gives (in
// twice the passes), which is why mirrorAxes leaves that axis out.
func TestMirrorAcrossSlicesChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	shape, patch := [3]int{5, 9, 11}, [3]int{1, 4, 6}
	img := make([]float32, shape[0]*shape[1]*shape[2])
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	run := func(axes []int) []float32 {
		got, err := Predict(context.Background(), mixed{}, [][]float32{img}, shape, 1, Window{Patch: patch, Overlap: 0.5, MirrorAxes: axes})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	all, inPlane := run([]int{0, 1, 2}), run(mirrorAxes(patch))
	for i := range all {
		if math.Abs(float64(all[i]-inPlane[i])) > 1e-5 {
			t.Fatalf("voxel %d: %v mirrored on all axes, %v in-plane", i, all[i], inPlane[i])
		}
	}
	if none := run(nil); slices.Equal(none, inPlane) {
		t.Fatal("in-plane mirroring changed nothing: the model does not test it")
	}
}
