package augment

import "math"

// InitialPatchSize is nnU-Net's get_patch_size
// (nnunetv2/training/data_augmentation/compute_initial_patch_size.py): the
// size of the larger region nnU-Net crops before its spatial transform, so
// that rotating by up to maxDegrees about each axis and scaling down to
// minScale does not pull in empty borders. This package samples the output
// patch straight from the volume, so it does not need that region; Plan
// reports the exact region each sample reads in Plan.Box. It is here for
// callers that size buffers the way nnU-Net does. (nnU-Net v2 calls it with
// its rotation and a scale range of (0.85, 1.25), not its training scale
// range, and rotates by +angle only; this takes both signs, which matters
// for non-cubic patches.)
func InitialPatchSize(patch [3]int, maxDegrees [3]float64, minScale float64) [3]int {
	size := [3]float64{float64(patch[0]), float64(patch[1]), float64(patch[2])}
	out := size
	for ax := range 3 {
		theta := math.Min(math.Abs(maxDegrees[ax]), 90) * math.Pi / 180
		for _, t := range [2]float64{theta, -theta} {
			r := rotation(ax, t)
			for i := range 3 {
				v := float64(r[i][0]*size[0]) + float64(r[i][1]*size[1]) + float64(r[i][2]*size[2])
				out[i] = math.Max(out[i], math.Abs(v))
			}
		}
	}
	var res [3]int
	for i := range 3 {
		res[i] = int(out[i] / minScale)
	}
	return res
}

// MaxBoxSize bounds Plan.Box's size for any sample this Augmenter can
// plan on a volume of the given shape, for sizing a region buffer once.
func (a *Augmenter) MaxBoxSize(shape [3]int) [3]int {
	c := &a.cfg
	maxScale := 1.0
	if c.Scaling.P > 0 {
		maxScale = math.Max(1, c.Scaling.Range[1])
	}
	mag := 0.0
	if c.Elastic.P > 0 {
		mag = c.Elastic.Magnitude[1]
	}
	var half [3]float64
	norm := 0.0
	for i := range 3 {
		half[i] = float64(float64(a.patch[i]-1)/2) + mag
		norm += float64(half[i] * half[i])
	}
	norm = math.Sqrt(norm)
	rotates := c.Rotation.P > 0 && len(a.rotAxes) > 0 && (c.Rotation.Degrees[0] != 0 || c.Rotation.Degrees[1] != 0)
	quarterTurns := c.Rot90.P > 0
	var out [3]int
	for i := range 3 {
		ext := half[i]
		if rotates {
			ext = norm // each row of a rotation is a unit vector
		} else if quarterTurns {
			ext = math.Max(half[0], math.Max(half[1], half[2]))
		}
		n := int(math.Floor(2*maxScale*ext)) + 6
		out[i] = min(n, shape[i])
	}
	return out
}
