package preprocess

import (
	"math"
	"os"
	"testing"

	"github.com/voxtrain/voxtrain/internal/npy"
)

// readNPZ reads a committed fixture of make_nnunet_fixtures.py.
func readNPZ(t *testing.T, path string) map[string]npy.Array {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := npy.ReadNPZ(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func shape3(a npy.Array) [3]int { return [3]int{a.Shape[0], a.Shape[1], a.Shape[2]} }

func vec3(a npy.Array) [3]float64 {
	return [3]float64{float64(a.Data[0]), float64(a.Data[1]), float64(a.Data[2])}
}

// TestNNUNetResamplerMatchesNNUNet holds NNUNetResampler to nnU-Net's own
// resample_data_or_seg_to_shape (testdata/nnunet_resample.npz), isotropic
// and anisotropic (nearest along the out-of-plane axis): images by cubic
// spline and probabilities by linear interpolation within 1e-6 (both
// compute in float64 and round to float32; only the order of the sums
// and the spline prefilter's boundary start differ, far below float32's
// resolution, so this allows a last-bit difference), labels exactly.
func TestNNUNetResamplerMatchesNNUNet(t *testing.T) {
	fx := readNPZ(t, "testdata/nnunet_resample.npz")
	img, lbl := fx["img"], fx["lbl"]
	from := shape3(img)
	src := make([]uint8, len(lbl.Data))
	for i, v := range lbl.Data {
		src[i] = uint8(v)
	}
	for _, name := range []string{"iso", "aniso"} {
		want := fx[name+"_img"]
		to := shape3(want)
		r := NewNNUNetResampler(from, to, vec3(fx[name+"_spacing"]), vec3(fx[name+"_target"]))
		if wantAxis := map[string]int{"iso": -1, "aniso": 0}[name]; r.SeparateAxis() != wantAxis {
			t.Errorf("%s: separate axis %d, nnU-Net's %d", name, r.SeparateAxis(), wantAxis)
		}
		n := to[0] * to[1] * to[2]
		got := make([]float32, n)
		r.Image(got, img.Data)
		closeTo(t, name+" image (order 3)", got, want.Data, 1e-6)
		r.Linear(got, img.Data)
		closeTo(t, name+" probabilities (order 1)", got, fx[name+"_lin"].Data, 1e-6)
		gl := make([]uint8, n)
		r.Labels(gl, src)
		bad := 0
		for i, v := range fx[name+"_lbl"].Data {
			if uint8(v) != gl[i] {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s labels: %d of %d voxels differ from nnU-Net's", name, bad, n)
		}
	}
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range got {
		d := math.Abs(float64(got[i]-want[i])) / math.Max(1, math.Abs(float64(want[i])))
		if !(d <= worst) {
			worst, at = d, i
		}
	}
	if worst > tol {
		t.Errorf("%s: voxel %d is %g, nnU-Net %g (relative difference %.2g > %.2g)", what, at, got[at], want[at], worst, tol)
	}
}
