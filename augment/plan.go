package augment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/voxtrain/voxtrain/preprocess"

	"github.com/voxtrain/voxtrain/volume"
)

// SpatialParams are the drawn parameters of the spatial transform. The
// output voxel o (D, H, W indices) is read from the source at
//
//	C + R·S·M·Q·(o − h + e(o))
//
// where h = (patch−1)/2, C is the crop centre, R the rotations (about D,
// then H, then W), S the scaling, M the mirroring, Q the quarter turns and
// e the elastic field.
type SpatialParams struct {
	// Angles are the rotations about the D, H and W axes, in radians.
	Angles [3]float64
	// Scale is the per-axis scale factor; 0 means 1.
	Scale [3]float64
	// Mirror flips the output along each axis.
	Mirror [3]bool
	// Rot90K quarter turns (0..3) in the plane of Rot90Axes.
	Rot90K    int
	Rot90Axes [2]int
	// ElasticMagnitude is the largest displacement (output voxels); 0 = no field.
	ElasticMagnitude float64
	// ElasticScale is the control-point spacing (output voxels).
	ElasticScale float64
	// Elastic reports whether an elastic field was drawn (it may have
	// magnitude 0).
	Elastic bool
}

// channelParams holds the intensity parameters drawn for one channel; a
// zero value field means "not applied".
type channelParams struct {
	noise      float32    // noise standard deviation
	blur       [3]float32 // sigma per axis
	brightness float32    // multiplier
	contrast   float32    // factor
	lowRes     float32    // scale
	gammaInv   float32    // gamma on the inverted image
	gamma      float32
}

// Plan is what one augmented sample will be: everything drawn from the
// rng, and where in the source it will read. Draw (or PlanWith) fills it;
// Apply executes it. Reuse one per worker goroutine: planning into a used Plan
// allocates nothing once its buffers have grown.
type Plan struct {
	// Shape is the full volume's shape (D, H, W) the plan is for.
	Shape [3]int
	// Patch is the output patch size.
	Patch [3]int
	// Corner is the source voxel that output voxel (0, 0, 0) shows when no
	// spatial transform is drawn: the crop's lower corner, which may lie
	// outside the volume when the volume is smaller than the patch.
	Corner [3]int
	// Box holds every source voxel the sample can read, clipped to the
	// volume. A caller that reads from a store may load only this region.
	Box volume.Box
	// Spatial are the drawn spatial parameters.
	Spatial SpatialParams

	lin    [3][3]float64 // R·S·M·Q
	center [3]float64    // C
	// exact: lin is a signed permutation and there is no field, so every
	// output voxel reads one source voxel exactly (crop, flips, rot90).
	exact bool
	grid  elasticGrid
	ch    []channelParams
	// noiseSeed seeds the per-plane noise streams.
	noiseSeed [2]uint64
}

// Draw draws every random parameter of one sample from rng into s: the
// crop, the spatial transform, the elastic field and the intensity
// transforms. shape is the full volume's (D, H, W). After Draw, s.Box says
// which source
// voxels Apply will read.
//
// The crop is uniform over the positions that keep the (untransformed)
// patch inside the volume, and centred when the volume is smaller than the
// patch. With forceFG and a foreground index (fg may be nil), a random
// voxel of a random present class becomes the patch centre, moved only as
// far as needed to keep the patch inside the volume (nnU-Net clamps the low
// side only and pads on the high side); without foreground it falls back to
// a uniform crop, as nnU-Net does.
func (a *Augmenter) Draw(s *Plan, rng *rand.Rand, shape [3]int, fg *preprocess.ForegroundIndex, forceFG bool) error {
	if rng == nil {
		return errors.New("augment: Draw: nil rng")
	}
	if err := checkShape(shape); err != nil {
		return err
	}
	if fg != nil && fg.Shape != shape {
		return fmt.Errorf("augment: Plan: foreground index is for shape %v, volume is %v", fg.Shape, shape)
	}
	c := &a.cfg
	s.reset(a, shape)
	s.Corner = a.drawCorner(rng, shape, fg, forceFG)

	sp := &s.Spatial
	if c.Rotation.P > 0 && rng.Float64() < c.Rotation.P {
		for _, ax := range a.rotAxes {
			sp.Angles[ax] = uniform(rng, c.Rotation.Degrees[0], c.Rotation.Degrees[1]) * (math.Pi / 180)
		}
	}
	if c.Scaling.P > 0 && rng.Float64() < c.Scaling.P {
		if c.Scaling.PerAxis {
			for i := range sp.Scale {
				sp.Scale[i] = uniform(rng, c.Scaling.Range[0], c.Scaling.Range[1])
			}
		} else {
			f := uniform(rng, c.Scaling.Range[0], c.Scaling.Range[1])
			sp.Scale = [3]float64{f, f, f}
		}
	}
	if c.Elastic.P > 0 && rng.Float64() < c.Elastic.P {
		sp.Elastic = true
		sp.ElasticMagnitude = uniform(rng, c.Elastic.Magnitude[0], c.Elastic.Magnitude[1])
		sp.ElasticScale = uniform(rng, c.Elastic.Scale[0], c.Elastic.Scale[1])
		s.grid.draw(rng, s.Patch, sp.ElasticMagnitude, sp.ElasticScale)
	}
	if c.Rot90.P > 0 && rng.Float64() < c.Rot90.P {
		sp.Rot90K = 1 + rng.IntN(3)
		n := len(a.r90Axes)
		i := rng.IntN(n)
		j := rng.IntN(n - 1)
		if j >= i {
			j++
		}
		sp.Rot90Axes = [2]int{a.r90Axes[min(i, j)], a.r90Axes[max(i, j)]}
	}
	if c.Mirror.P > 0 {
		for _, ax := range a.mirAxes {
			sp.Mirror[ax] = rng.Float64() < c.Mirror.P
		}
	}
	a.drawIntensity(s, rng)
	s.compose(a.cubic)
	return nil
}

// PlanWith plans a sample with explicit spatial parameters and no intensity
// transform, for test-time augmentation (flips) and tests. corner is the
// crop's lower corner (see Plan.Corner). An elastic field needs
// randomness: sp.Elastic must be false.
func (a *Augmenter) PlanWith(s *Plan, shape, corner [3]int, sp SpatialParams) error {
	if err := checkShape(shape); err != nil {
		return err
	}
	if sp.Elastic || sp.ElasticMagnitude != 0 {
		return errors.New("augment: PlanWith: an elastic field needs an rng; use Plan")
	}
	if sp.Rot90K != 0 && (sp.Rot90Axes[0] == sp.Rot90Axes[1] || !validAxis(sp.Rot90Axes[0]) || !validAxis(sp.Rot90Axes[1])) {
		return fmt.Errorf("augment: PlanWith: rot90 plane %v is not two distinct axes", sp.Rot90Axes)
	}
	for i, f := range sp.Scale {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("augment: PlanWith: scale %v on axis %d", f, i)
		}
	}
	s.reset(a, shape)
	s.Corner = corner
	s.Spatial = sp
	for i := range s.ch {
		s.ch[i] = channelParams{}
	}
	s.compose(a.cubic)
	return nil
}

func validAxis(a int) bool { return a >= 0 && a < 3 }

// checkShape checks the shape of the volume a plan is for: only that it
// is addressable. The volume need not be in memory: Apply reads a source
// region of it (Input.Origin, Input.Shape), whose size it checks.
func checkShape(shape [3]int) error {
	if err := volume.CheckShape(shape); err != nil {
		return fmt.Errorf("augment: %w", err)
	}
	return nil
}

func (s *Plan) reset(a *Augmenter, shape [3]int) {
	s.Shape = shape
	s.Patch = a.patch
	s.Spatial = SpatialParams{}
	s.grid.active = false
	s.grid.maxAbs = [3]float32{}
	if cap(s.ch) < a.channels {
		s.ch = make([]channelParams, a.channels)
	}
	s.ch = s.ch[:a.channels]
	for i := range s.ch {
		s.ch[i] = channelParams{}
	}
	s.noiseSeed = [2]uint64{}
}

// cropRange returns the range of the crop's lower corner on one axis, as
// nnU-Net's data loader computes it (get_bbox with the final patch inside
// the larger initial one): the patch stays inside the volume, and a volume
// smaller than the patch is centred in it (padded on both sides).
func cropRange(n, p int) (lo, hi int) {
	if n >= p {
		return 0, n - p
	}
	lo = -((p - n) / 2)
	return lo, lo
}

// drawCorner picks the crop: with forceFG and foreground present, a random
// voxel of a random present class becomes the patch centre (clamped so the
// patch stays within the crop range); otherwise a uniform random corner.
func (a *Augmenter) drawCorner(rng *rand.Rand, shape [3]int, fg *preprocess.ForegroundIndex, forceFG bool) [3]int {
	var corner [3]int
	// Without the ignore label among the classes the draws are those of a
	// run without one, so existing runs' batches do not change.
	classes, skip := 0, -1
	if fg != nil {
		classes = len(fg.Classes)
		for k, c := range fg.Classes {
			if a.ignore > 0 && int(c) == a.ignore {
				skip, classes = k, classes-1
			}
		}
	}
	if forceFG && classes > 0 {
		k := rng.IntN(classes)
		if skip >= 0 && k >= skip {
			k++ // the classes after the ignore label
		}
		locs := fg.Locations[k]
		v := fg.Voxel(int(locs[rng.IntN(len(locs))]))
		for i := range corner {
			lo, hi := cropRange(shape[i], a.patch[i])
			corner[i] = min(max(v[i]-a.patch[i]/2, lo), hi)
		}
		return corner
	}
	for i := range corner {
		lo, hi := cropRange(shape[i], a.patch[i])
		corner[i] = lo + rng.IntN(hi-lo+1)
	}
	return corner
}

// bgContrast draws a factor as batchgeneratorsv2's BGContrast: with
// probability 1/2 from [lo, 1), otherwise from [max(lo, 1), hi]; ranges
// entirely on one side of 1 are drawn uniformly.
func bgContrast(rng *rand.Rand, r [2]float64) float64 {
	if r[1] <= 1 || r[0] >= 1 {
		return uniform(rng, r[0], r[1])
	}
	if rng.Float64() < 0.5 {
		return uniform(rng, r[0], 1)
	}
	return uniform(rng, 1, r[1])
}

func (a *Augmenter) drawIntensity(s *Plan, rng *rand.Rand) {
	c := &a.cfg
	if c.Noise.P > 0 && rng.Float64() < c.Noise.P {
		std := float32(uniform(rng, c.Noise.Std[0], c.Noise.Std[1]))
		for i := range s.ch {
			s.ch[i].noise = std
		}
		s.noiseSeed = [2]uint64{rng.Uint64(), rng.Uint64()}
	}
	if c.Blur.P > 0 && rng.Float64() < c.Blur.P {
		for i := range s.ch {
			if rng.Float64() < c.Blur.PPerChannel {
				for ax := range 3 {
					s.ch[i].blur[ax] = float32(uniform(rng, c.Blur.Sigma[0], c.Blur.Sigma[1]))
				}
			}
		}
	}
	if c.Brightness.P > 0 && rng.Float64() < c.Brightness.P {
		for i := range s.ch {
			s.ch[i].brightness = float32(bgContrast(rng, c.Brightness.Range))
		}
	}
	if c.Contrast.P > 0 && rng.Float64() < c.Contrast.P {
		for i := range s.ch {
			s.ch[i].contrast = float32(bgContrast(rng, c.Contrast.Range))
		}
	}
	if c.LowRes.P > 0 && rng.Float64() < c.LowRes.P {
		for i := range s.ch {
			if rng.Float64() < c.LowRes.PPerChannel {
				s.ch[i].lowRes = float32(uniform(rng, c.LowRes.Scale[0], c.LowRes.Scale[1]))
			}
		}
	}
	if c.GammaInverted.P > 0 && rng.Float64() < c.GammaInverted.P {
		for i := range s.ch {
			s.ch[i].gammaInv = float32(bgContrast(rng, c.GammaInverted.Range))
		}
	}
	if c.Gamma.P > 0 && rng.Float64() < c.Gamma.P {
		for i := range s.ch {
			s.ch[i].gamma = float32(bgContrast(rng, c.Gamma.Range))
		}
	}
}
