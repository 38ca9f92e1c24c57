package volume

import (
	"testing"
)

// FuzzDerivedPaths: the path suffixes that name derived volumes (a
// window, a masked, resampled, bit-packed or looked-up label) are parsed
// from case paths a manifest or dataset.json makes, so each parser must
// return an error or a result for any string, never panic, and a parsed
// path must name itself again when rebuilt.
func FuzzDerivedPaths(f *testing.F) {
	var lut [256]uint8
	lut[1], lut[2], lut[9] = 3, 1, IgnoreByte
	for _, p := range []string{
		WindowPath("raw.zarr", Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{4, 5, 6}}),
		MaskedPath("l.zarr", "m.zarr", 255),
		PackedPath(map[int]string{0: "a.zarr", 2: "c.zarr"}),
		LUTPath("seg.nii.gz", lut),
		ResampledPath(MaskedPath("l.zarr", "m.zarr", 255), Resampling{Shape: [3]int{4, 5, 6}, Spacing: [3]float64{8, 8, 8}, At: [3]float64{1, 2, 3}}),
		"plain.nii.gz", "x#window=", "x#bits=0", "x#lut=1:", "x#resample=shape=1,2",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		_ = FilePath(p)
		if base, box, ok, err := SplitWindow(p); ok && err == nil {
			if q := WindowPath(base, box); q != p {
				if b2, box2, ok2, err2 := SplitWindow(q); !ok2 || err2 != nil || b2 != base || box2 != box {
					t.Fatalf("window %q → %q %v → %q does not parse back", p, base, box, q)
				}
			}
		}
		if label, mask, v, ok, err := SplitMask(p); ok && err == nil {
			q := MaskedPath(label, mask, v)
			if l2, m2, v2, ok2, err2 := SplitMask(q); !ok2 || err2 != nil || l2 != label || m2 != mask || v2 != v {
				t.Fatalf("mask %q → %q does not parse back", p, q)
			}
		}
		if files, ok, err := SplitPacked(p); ok && err == nil {
			q := PackedPath(files)
			if f2, ok2, err2 := SplitPacked(q); !ok2 || err2 != nil || len(f2) != len(files) {
				t.Fatalf("packed %q → %q does not parse back", p, q)
			}
		}
		if base, l, ok, err := SplitLUT(p); ok && err == nil {
			q := LUTPath(base, l)
			if b2, l2, ok2, err2 := SplitLUT(q); !ok2 || err2 != nil || b2 != base || l2 != l {
				t.Fatalf("lut %q → %q does not parse back", p, q)
			}
		}
		if base, r, ok, err := SplitResample(p); ok && err == nil {
			q := ResampledPath(base, r)
			if b2, r2, ok2, err2 := SplitResample(q); !ok2 || err2 != nil || b2 != base || r2 != r {
				t.Fatalf("resample %q → %q (%+v) does not parse back: %q %+v %v", p, q, r, b2, r2, err2)
			}
		}
	})
}
