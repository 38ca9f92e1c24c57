package data

import (
	"math"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

func apply(m volume.Affine, i, j, k float64) [3]float64 {
	var w [3]float64
	for r := range 3 {
		w[r] = m[r][0]*i + m[r][1]*j + m[r][2]*k + m[r][3]
	}
	return w
}

// TestResampleCaseGrid: the resampled case's affine maps each new voxel
// centre to the world point of the source coordinate it was sampled at,
// the grids' outer corners coincide, and spacing follows the shape.
func TestResampleCaseGrid(t *testing.T) {
	// An oblique affine: rotation about z, voxel sizes (x, y, z) = (0.8, 0.8, 3).
	th := 0.3
	aff := volume.Affine{
		{0.8 * math.Cos(th), -0.8 * math.Sin(th), 0, -50},
		{0.8 * math.Sin(th), 0.8 * math.Cos(th), 0, 20},
		{0, 0, 3, 100},
		{0, 0, 0, 1},
	}
	sh := [3]int{7, 20, 25} // (D, H, W)
	n := sh[0] * sh[1] * sh[2]
	src := &Volume{Shape: sh, SourceShape: sh, Image: [][]float32{make([]float32, n), make([]float32, n)}, Label: make([]uint8, n),
		Spacing: [3]float64{3, 0.8, 0.8}, Affine: aff}
	for i := range n {
		src.Image[0][i], src.Image[1][i] = float32(i), float32(-i)
		src.Label[i] = uint8(i % 3)
	}
	target := [3]float64{1, 1.1, 1.3}
	var dst Volume
	if err := resampleCase(&dst, src, target, ""); err != nil {
		t.Fatal(err)
	}
	to := preprocess.ResampledShape(sh, src.Spacing, target)
	if dst.Shape != to || dst.SourceShape != sh || len(dst.Image) != 2 || len(dst.Image[1]) != to[0]*to[1]*to[2] || len(dst.Label) != len(dst.Image[1]) {
		t.Fatalf("resampled grid %v (source %v), %d channels; want %v", dst.Shape, dst.SourceShape, len(dst.Image), to)
	}
	for a := range 3 {
		want := src.Spacing[a] * float64(sh[a]) / float64(to[a])
		if math.Abs(dst.Spacing[a]-want) > 1e-12 || math.Abs(dst.Spacing[a]-target[a]) > 0.5*target[a]/float64(to[a])+1e-12 {
			t.Errorf("axis %d spacing %v, want %v (target %v)", a, dst.Spacing[a], want, target[a])
		}
	}
	// Voxel centres: new (d, h, w) ↦ source (srcCoord...) in world space.
	// (NIfTI index order in the affine is (x, y, z) = (w, h, d).)
	for _, p := range [][3]int{{0, 0, 0}, {to[0] - 1, to[1] - 1, to[2] - 1}, {2, 5, 7}} {
		got := apply(dst.Affine, float64(p[2]), float64(p[1]), float64(p[0]))
		c := func(a int) float64 { return (float64(p[a])+0.5)*float64(sh[a])/float64(to[a]) - 0.5 }
		want := apply(aff, c(2), c(1), c(0))
		for r := range 3 {
			if math.Abs(got[r]-want[r]) > 1e-9 {
				t.Errorf("voxel %v: world %v, want %v", p, got, want)
				break
			}
		}
	}
	// Outer corners: index −0.5 and n−0.5 on both grids.
	lo := apply(dst.Affine, -0.5, -0.5, -0.5)
	wlo := apply(aff, -0.5, -0.5, -0.5)
	hi := apply(dst.Affine, float64(to[2])-0.5, float64(to[1])-0.5, float64(to[0])-0.5)
	whi := apply(aff, float64(sh[2])-0.5, float64(sh[1])-0.5, float64(sh[0])-0.5)
	for r := range 3 {
		if math.Abs(lo[r]-wlo[r]) > 1e-9 || math.Abs(hi[r]-whi[r]) > 1e-9 {
			t.Fatalf("outer corners moved: %v..%v, source %v..%v", lo, hi, wlo, whi)
		}
	}
	// The label back on the source grid (a prediction written beside the
	// input) has the source's shape and only its values.
	back, err := dst.LabelsOnSourceGrid(dst.Label)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != n {
		t.Fatalf("labels on the source grid: %d voxels, want %d", len(back), n)
	}
	for _, v := range back {
		if v > 2 {
			t.Fatalf("label value %d appeared", v)
		}
	}
	if _, err := dst.LabelsOnSourceGrid(make([]uint8, 3)); err == nil {
		t.Error("a label map of the wrong size was accepted")
	}
	// A header without voxel sizes cannot be resampled.
	src.Spacing[1] = 0
	if err := resampleCase(&dst, src, target, ""); err == nil || !strings.Contains(err.Error(), "voxel size") {
		t.Errorf("zero voxel size: %v", err)
	}
}

func TestPrepTargetSpacing(t *testing.T) {
	c := filled(config.Data{Dataset: "x", TargetSpacing: []float64{3, 0.8, 0.8}})
	if p := preprocess.SpecOf(c); p.Target == nil || *p.Target != [3]float64{3, 0.8, 0.8} {
		t.Errorf("prep target %v", p.Target)
	}
	// Without the key nothing changes: no target in the fingerprint.
	if p := preprocess.SpecOf(filled(config.Data{Dataset: "x"})); p.Target != nil || strings.Contains(string(fingerprint(p, 1)), "target") {
		t.Errorf("absent target_spacing: prep %+v, fingerprint %s", p, fingerprint(p, 1))
	}
}

// TestResampleCaseIdentity: a whole case whose spacing equals the target
// keeps its voxels, grid and affine.
func TestResampleCaseIdentity(t *testing.T) {
	sh := [3]int{4, 5, 6}
	img := testutil.NoiseVolume(sh, 1)
	lbl := testutil.LabelsOf(img)
	aff := volume.Affine{{0, 0, -2, 10}, {0, 1.5, 0, -4}, {0.5, 0, 0, 7}, {0, 0, 0, 1}}
	src := &Volume{Shape: sh, Image: [][]float32{img}, Label: lbl, Spacing: [3]float64{2, 1.5, 0.5}, Affine: aff}
	var dst Volume
	if err := resampleCase(&dst, src, src.Spacing, ""); err != nil {
		t.Fatal(err)
	}
	if dst.Shape != sh || dst.SourceShape != sh || dst.Spacing != src.Spacing || dst.Affine != aff {
		t.Errorf("identity resampling changed the grid: %+v", dst)
	}
	for i := range img {
		if dst.Image[0][i] != img[i] || dst.Label[i] != lbl[i] {
			t.Fatalf("identity resampling changed voxel %d", i)
		}
	}
}
