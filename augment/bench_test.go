package augment

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// The benchmarks mirror /work/shared/bench/scipy_augment.py: one 128³ patch
// from a 160×192×160 float32 volume and its uint8 label, through one
// coordinate map composing rotation (±15° about each axis), isotropic
// scaling (0.85–1.15) and an elastic field; image trilinear, label nearest;
// random crop centre. Each iteration is Plan + Apply (the scipy timing
// includes building the coordinates). Run on one core:
//
//	GOMAXPROCS=1 go test ./augment -run '^$' -bench 'Spatial|Preset' -cpu 1

var benchVolume = sync.OnceValues(func() ([]float32, []uint8) { return testutil.MRILike([3]int{160, 192, 160}) })

func benchConfig(elastic bool) config.Augment {
	c, _ := config.AugmentPreset(config.PresetNone)
	c.Rotation = config.Rotation{P: 1, Degrees: [2]float64{-15, 15}, Axes: []int{0, 1, 2}}
	c.Scaling = config.Scaling{P: 1, Range: [2]float64{0.85, 1.15}}
	if elastic {
		// Comparable to the script's alpha (0, 900), sigma (9, 13):
		// displacements of a few voxels, correlated over ~20 voxels.
		c.Elastic = config.Elastic{P: 1, Magnitude: [2]float64{0, 6}, Scale: [2]float64{18, 26}}
	}
	return c
}

func runBench(b *testing.B, cfg config.Augment, workers int) {
	img, lab := benchVolume()
	shape := [3]int{160, 192, 160}
	patch := [3]int{128, 128, 128}
	a := mustNew(b, cfg, patch, 1)
	src := Input{Image: [][]float32{img}, Label: lab, Shape: shape}
	d := newDest(a, true)
	ws := Workspace{Workers: workers}
	rng := rand.New(rand.NewPCG(0, 0))
	var s Plan
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := a.Draw(&s, rng, shape, nil, false); err != nil {
			b.Fatal(err)
		}
		if err := a.Apply(&s, src, d, &ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sample")
}

// BenchmarkSpatialScipyEquivalent is the side-by-side number against
// scipy_augment.py.
func BenchmarkSpatialScipyEquivalent(b *testing.B) { runBench(b, benchConfig(true), 1) }

// BenchmarkSpatialAffine is the same without the elastic field.
func BenchmarkSpatialAffine(b *testing.B) { runBench(b, benchConfig(false), 1) }

// BenchmarkSpatialCubic is the scipy-equivalent map with cubic image
// interpolation.
func BenchmarkSpatialCubic(b *testing.B) {
	c := benchConfig(true)
	c.Interpolation = "cubic"
	runBench(b, c, 1)
}

// BenchmarkSpatialScipyEquivalentWorkers2 splits each sample over two
// goroutines.
func BenchmarkSpatialScipyEquivalentWorkers2(b *testing.B) { runBench(b, benchConfig(true), 2) }

// BenchmarkPresetNNUNet is nnU-Net's default preset per sample (each
// transform with its own probability, averaged over samples).
func BenchmarkPresetNNUNet(b *testing.B) { runBench(b, mustPreset(b, config.PresetNNUNet), 1) }

// BenchmarkPresetNNUNetAllOn applies every transform of the preset (plus
// elastic) to every sample: the worst case.
func BenchmarkPresetNNUNetAllOn(b *testing.B) {
	c := allOn(b)
	c.Rot90.P = 0
	runBench(b, c, 1)
}

// BenchmarkCropOnly is the light preset (crop + flips): exact copies.
func BenchmarkCropOnly(b *testing.B) { runBench(b, mustPreset(b, config.PresetLight), 1) }

// BenchmarkSpatialScaleOnly is scaling (0.85–1.15) and flips without
// rotation: the axis-aligned sampler (sampleRowAligned).
func BenchmarkSpatialScaleOnly(b *testing.B) {
	c, _ := config.AugmentPreset(config.PresetNone)
	c.Scaling = config.Scaling{P: 1, Range: [2]float64{0.85, 1.15}}
	c.Mirror = config.Mirror{P: 0.5, Axes: []int{0, 1, 2}}
	runBench(b, c, 1)
}
