package preprocess

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/voxtrain/voxtrain/volume"
)

// DefaultForegroundSamples is how many voxel positions nnU-Net keeps per
// class for foreground oversampling (DefaultPreprocessor.
// _sample_foreground_locations: min_num_samples 10000, and at least 1 % of
// the class's voxels, seeded with 1234).
const DefaultForegroundSamples = 10000

// foregroundSeed makes the index a pure function of the label (nnU-Net
// seeds its RandomState with 1234 too).
const foregroundSeed = 1234

// ForegroundIndex lists voxel positions of every foreground class present
// in one label volume, so a foreground-centred crop costs two random draws
// instead of a scan of the label. Build it once per case (it is a pure
// function of the label) and cache it next to the case.
type ForegroundIndex struct {
	// Shape is the label volume's (D, H, W).
	Shape [3]int
	// Classes are the foreground classes (> 0) present, ascending.
	Classes []uint8
	// Counts[k] is the number of voxels of Classes[k] in the label.
	Counts []int
	// Locations[k] are linear indices ((d·H + h)·W + w) of kept voxels of
	// Classes[k], ascending; never empty.
	Locations [][]int32
}

// Voxel converts a linear index into (D, H, W) coordinates.
func (f *ForegroundIndex) Voxel(lin int) [3]int {
	hw := f.Shape[1] * f.Shape[2]
	return [3]int{lin / hw, (lin % hw) / f.Shape[2], lin % f.Shape[2]}
}

// BuildForegroundIndex indexes label (D·H·W voxels, W fastest). Per class it
// keeps max(min(maxPerClass, n), ceil(n/100)) of the class's n voxels,
// drawn uniformly without replacement by a fixed-seed generator, as nnU-Net
// does; maxPerClass <= 0 keeps every voxel. Two passes over the label, no
// per-voxel allocation.
func BuildForegroundIndex(label []uint8, shape [3]int, maxPerClass int) (*ForegroundIndex, error) {
	if err := volume.CheckShape(shape); err != nil {
		return nil, fmt.Errorf("preprocess: foreground index: %w", err)
	}
	// Locations are int32 (half the memory of int over a label's
	// foreground): the label, decoded whole, must be indexable by them.
	if err := volume.CheckInMemory(shape, 1); err != nil {
		return nil, fmt.Errorf("preprocess: foreground index of a whole label: %w", err)
	}
	n := shape[0] * shape[1] * shape[2]
	if len(label) != n {
		return nil, fmt.Errorf("preprocess: foreground index: label has %d voxels, shape %v needs %d", len(label), shape, n)
	}
	var counts [256]int
	// Labels are mostly background: a whole word of zeros is counted at
	// once, which also spares the loop the store-to-load chain of
	// incrementing counts[0] for every voxel.
	zeros := 0
	for i := 0; i < n; {
		if i+8 <= n && binary.LittleEndian.Uint64(label[i:]) == 0 {
			zeros += 8
			i += 8
			continue
		}
		end := min(i+8, n)
		for _, v := range label[i:end] {
			counts[v]++
		}
		i = end
	}
	counts[0] += zeros
	f := &ForegroundIndex{Shape: shape}
	var slot [256]int // class -> index in f.Classes, -1 if absent
	var need, left [256]uint64
	for c := 1; c < 256; c++ {
		slot[c] = -1
		if counts[c] == 0 {
			continue
		}
		k := counts[c]
		if maxPerClass > 0 {
			k = max(min(maxPerClass, counts[c]), (counts[c]+99)/100)
		}
		slot[c] = len(f.Classes)
		f.Classes = append(f.Classes, uint8(c))
		f.Counts = append(f.Counts, counts[c])
		f.Locations = append(f.Locations, make([]int32, 0, k))
		need[c], left[c] = uint64(k), uint64(counts[c])
	}
	if len(f.Classes) == 0 {
		return f, nil
	}
	// Selection sampling (Knuth's Algorithm S): keep each voxel with
	// probability need/left, which keeps exactly `need` voxels, uniformly,
	// already in ascending order.
	rng := rand.New(rand.NewPCG(foregroundSeed, 0))
	for i := 0; i < n; i++ {
		if i&7 == 0 && i+8 <= n && binary.LittleEndian.Uint64(label[i:]) == 0 {
			i += 7 // with the loop's i++: the next word
			continue
		}
		v := label[i]
		if v == 0 || need[v] == 0 {
			continue
		}
		if need[v] == left[v] || rng.Uint64N(left[v]) < need[v] {
			k := slot[v]
			f.Locations[k] = append(f.Locations[k], int32(i))
			need[v]--
		}
		left[v]--
	}
	return f, nil
}
