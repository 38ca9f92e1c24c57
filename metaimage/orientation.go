package metaimage

import "math"

// orientationLetters are MetaIO's letters for each LPS world axis: the
// side an image axis comes from when it runs towards +L, +P, +S (first)
// or the other way (second). An identity direction is "RAI".
var orientationLetters = [3][2]byte{{'R', 'L'}, {'A', 'P'}, {'I', 'S'}}

// anatomicalOrientation derives MetaIO's AnatomicalOrientation from
// direction cosines (dir[k] is voxel axis k's LPS unit vector) as ITK's
// MetaImageIO does (itk::AnatomicalOrientation): the largest |cosine|
// left pairs its voxel axis with its world axis, and both are taken out
// of the running; three rounds give each voxel axis a distinct world
// axis, also for an oblique direction whose axes lean towards the same
// world axis. Among equal cosines the last in (world axis, voxel axis)
// order wins, as in ITK, so a 45° rotation gets ITK's letters too.
func anatomicalOrientation(dir [3][3]float64) string {
	var out [3]byte
	var worldUsed, voxelUsed [3]bool
	for range 3 {
		bw, bv, best := -1, -1, -1.0
		for w := range 3 {
			for v := range 3 {
				if worldUsed[w] || voxelUsed[v] {
					continue
				}
				if c := math.Abs(dir[v][w]); c >= best {
					bw, bv, best = w, v, c
				}
			}
		}
		worldUsed[bw], voxelUsed[bv] = true, true
		side := 1
		if dir[bv][bw] > 0 {
			side = 0
		}
		out[bv] = orientationLetters[bw][side]
	}
	return string(out[:])
}
