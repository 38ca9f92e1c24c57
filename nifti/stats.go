package nifti

import (
	"fmt"
	"math"
)

// Summary holds statistics of an image's scaled voxel values.
type Summary struct {
	Min, Max, Mean, Sum float64
}

// Summarize computes min, max, mean and sum of the scaled values of raw
// voxel bytes (little-endian, as ReadRaw returns them) in float64, the way
// numpy does on nibabel's get_fdata(): any NaN makes all four NaN. RGB types
// are summarised over all components; complex types are an error.
func Summarize(h *Header, raw []byte) (Summary, error) {
	info, ok := dtTable[h.Datatype]
	if !ok {
		return Summary{}, fmt.Errorf("unsupported datatype %v", h.Datatype)
	}
	if h.Datatype == Complex64 || h.Datatype == Complex128 {
		return Summary{}, fmt.Errorf("no real-valued statistics for %v data", h.Datatype)
	}
	slope, inter, err := h.Scaling()
	if err != nil {
		return Summary{}, err
	}
	n := len(raw) / info.size * info.ncomp
	if n == 0 {
		return Summary{}, fmt.Errorf("no voxels")
	}
	at := scalarAt(h.Datatype, true, raw) // raw is little-endian
	s := Summary{Min: math.Inf(1), Max: math.Inf(-1)}
	// Pairwise-style blocked summation keeps the float64 sum close to numpy's.
	const block = 4096
	for b := 0; b < n; b += block {
		var part float64
		for i := b; i < min(b+block, n); i++ {
			v := at(i)*slope + inter
			if v < s.Min {
				s.Min = v
			}
			if v > s.Max {
				s.Max = v
			}
			if math.IsNaN(v) {
				s.Min, s.Max = math.NaN(), math.NaN()
			}
			part += v
		}
		s.Sum += part
	}
	if math.IsNaN(s.Sum) {
		s.Min, s.Max = math.NaN(), math.NaN()
	}
	s.Mean = s.Sum / float64(n)
	return s, nil
}
