package volume

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A resampled volume is a label map read on another voxel grid than its
// file's, by nearest neighbour: a dataset manifest's label crop annotated
// at another resolution than the raw volume it trains with (package
// data), as cellmap's crops at 4, 8 or 16 nm in a raw at 8 nm. It is named
// by a path, "FILE#resample=shape=D,H,W&spacing=…&origin=…&at=…[&unit=U]", so that
// everything that opens case files by path (Open, the chunk cache's
// handles, the verification, the caches' stat of FilePath) reads the
// resampled labels without knowing about resampling. FILE is any path
// Open reads, a masked label's (MaskedPath) too: masking and then
// resampling is resampling the label and its mask alike.
//
// Positions are voxel centres, as NIfTI's affine and OME-NGFF's
// transformations put them: the target voxel i lies at Origin + i·Spacing
// and takes the source voxel whose centre is nearest, ties going to the
// larger index (as xarray's sel(method="nearest"), which cellmap-data
// reads its arrays with, breaks them).

// resampleTag separates a file's path from its resampling.
const resampleTag = "#resample="

// Resampling is the grid a file is read on (see Resampled); vectors are
// (D, H, W).
type Resampling struct {
	// Shape, Spacing and Origin are the target grid: its voxel i lies at
	// world position Origin + i·Spacing.
	Shape           [3]int
	Spacing, Origin [3]float64
	// At is the world position of the source file's voxel (0, 0, 0)
	// (where a manifest placed the crop); the source's spacing is its
	// header's, converted into Unit.
	At [3]float64
	// Unit is the length unit of Spacing, Origin and At (Header.Unit's
	// spelling; "": unstated, the source's numbers are taken as they
	// are). A source whose header states another unit has its spacing
	// converted into this one: a label crop in micrometres read on a raw
	// volume's grid in nanometres.
	Unit string
}

// ResampledPath names the file at path read on r's grid (see Resampled).
func ResampledPath(path string, r Resampling) string {
	f := func(v [3]float64) string {
		s := make([]string, 3)
		for i, x := range v {
			s[i] = strconv.FormatFloat(x, 'g', -1, 64)
		}
		return strings.Join(s, ",")
	}
	p := fmt.Sprintf("%s%sshape=%d,%d,%d&spacing=%s&origin=%s&at=%s", path, resampleTag,
		r.Shape[0], r.Shape[1], r.Shape[2], f(r.Spacing), f(r.Origin), f(r.At))
	if r.Unit != "" {
		// Last and only when stated: the paths of resamplings without a
		// unit (and the caches keyed by them) stay as they were.
		p += "&unit=" + r.Unit
	}
	return p
}

// SplitResample splits a resampled file's path into its file's path and
// the resampling; ok is false (and base the path itself) for a path that
// names none. A malformed one is an error naming the path.
func SplitResample(path string) (base string, r Resampling, ok bool, err error) {
	i := strings.LastIndex(path, resampleTag)
	if i < 0 {
		return path, r, false, nil
	}
	base, spec := path[:i], path[i+len(resampleTag):]
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: resample %q: %s (want shape=D,H,W&spacing=z,y,x&origin=z,y,x&at=z,y,x[&unit=U])", path, spec, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(spec, "&") {
		k, v, found := strings.Cut(kv, "=")
		if k == "unit" && found {
			if seen[k] {
				return "", r, false, bad("%s twice", k)
			}
			seen[k] = true
			if _, ok := UnitMeters(v); !ok {
				return "", r, false, bad("unit %q is not a length unit", v)
			}
			r.Unit = v
			continue
		}
		parts := strings.Split(v, ",")
		if !found || len(parts) != 3 {
			return "", r, false, bad("%q is not key=a,b,c", kv)
		}
		if seen[k] {
			return "", r, false, bad("%s twice", k)
		}
		seen[k] = true
		var fs [3]float64
		for a, p := range parts {
			x, err := strconv.ParseFloat(p, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return "", r, false, bad("%s: %q is not a finite number", k, p)
			}
			fs[a] = x
		}
		switch k {
		case "shape":
			for a, x := range fs {
				if x != math.Trunc(x) || x < 1 || x > math.MaxInt32 {
					return "", r, false, bad("shape axis %d is %g, want a whole number ≥ 1", a, x)
				}
				r.Shape[a] = int(x)
			}
		case "spacing":
			for a, x := range fs {
				if !(x > 0) {
					return "", r, false, bad("spacing axis %d is %g, want > 0", a, x)
				}
			}
			r.Spacing = fs
		case "origin":
			r.Origin = fs
		case "at":
			r.At = fs
		default:
			return "", r, false, bad("unknown key %q", k)
		}
	}
	for _, k := range []string{"shape", "spacing", "origin", "at"} {
		if !seen[k] {
			return "", r, false, bad("%s missing", k)
		}
	}
	if base == "" {
		return "", r, false, bad("no file before it")
	}
	return base, r, true, nil
}

// Resampled returns f read on r's grid by nearest neighbour: a volume of
// r.Shape and r.Spacing (in r.Unit, f's spacing converted into it when
// both state units) whose affine is axis-aligned at r.Origin, whose
// voxel i reads f's voxel nearest to it. Every target voxel must map
// inside f (a grid that reaches past f's edge is an error). Reads are
// lazy: a box reads only the box of f its voxels map to. Closing the
// resampled file closes f.
func Resampled(f File, r Resampling) (File, error) {
	h, err := f.Header().InUnit(r.Unit)
	if err != nil {
		return nil, fmt.Errorf("resampling: %w", err)
	}
	// Read lazily: only the grid's addressing is bounded here; plan
	// bounds the source box a read decodes.
	if err := CheckShape(r.Shape); err != nil {
		return nil, fmt.Errorf("resampling: %w", err)
	}
	rs := &resampled{f: f, r: r, src: h.Shape}
	for a := range 3 {
		if !(h.Spacing[a] > 0) || !(r.Spacing[a] > 0) {
			return nil, fmt.Errorf("resampling: spacing %v onto %v: want > 0 on every axis", h.Spacing, r.Spacing)
		}
		rs.scale[a] = r.Spacing[a] / h.Spacing[a]
		rs.shift[a] = (r.Origin[a] - r.At[a]) / h.Spacing[a]
		// The map is monotonic: its ends bound every voxel's.
		for _, i := range []int{0, r.Shape[a] - 1} {
			if j := rs.index(a, i); j < 0 || j >= h.Shape[a] {
				return nil, fmt.Errorf("resampling: voxel %d of %d on axis %d (at %g) maps to the file's voxel %d, outside its 0..%d (spacing %g, voxel 0 at %g)",
					i, r.Shape[a], a, r.Origin[a]+float64(i)*r.Spacing[a], j, h.Shape[a]-1, h.Spacing[a], r.At[a])
			}
		}
	}
	rs.hdr = Header{Shape: r.Shape, Channels: h.Channels, Spacing: r.Spacing, Unit: h.Unit}
	for i := range 3 {
		rs.hdr.Affine[i][i] = r.Spacing[2-i]
		rs.hdr.Affine[i][3] = r.Origin[2-i]
	}
	rs.hdr.Affine[3][3] = 1
	return rs, nil
}

type resampled struct {
	f            File
	r            Resampling
	src          [3]int
	scale, shift [3]float64
	hdr          Header
}

// index is the source voxel nearest target voxel i on axis a. The nudge
// makes a tie (a target centre halfway between two source centres, as
// every voxel is when a level of half the spacing is centred on its
// parent's) go to the larger index whatever the rounding of the terms.
func (rs *resampled) index(a, i int) int {
	return int(math.Floor(float64(i)*rs.scale[a] + rs.shift[a] + 0.5 + 1e-6))
}

func (rs *resampled) Header() Header { return rs.hdr }

// plan maps box to the source: per axis, the source index of each target
// voxel relative to src, the box of the source they fall in.
func (rs *resampled) plan(box Box) (idx [3][]int, src Box, err error) {
	if box.Empty() || !Whole(rs.hdr.Shape).Contains(box) {
		return idx, src, fmt.Errorf("region %v..%v outside the resampled volume's %v", box.Lo, box.Hi, rs.hdr.Shape)
	}
	for a := range 3 {
		idx[a] = make([]int, box.Hi[a]-box.Lo[a])
		for k := range idx[a] {
			idx[a][k] = rs.index(a, box.Lo[a]+k)
		}
		src.Lo[a], src.Hi[a] = idx[a][0], idx[a][len(idx[a])-1]+1
		for k := range idx[a] {
			idx[a][k] -= src.Lo[a]
		}
	}
	// The source box is decoded whole (a coarser grid's box reads more
	// voxels of the file than it has).
	if err := CheckInMemory(src.Size(), rs.hdr.Channels); err != nil {
		return idx, src, fmt.Errorf("resampling: region %v..%v reads the file's %v..%v: %w", box.Lo, box.Hi, src.Lo, src.Hi, err)
	}
	return idx, src, nil
}

// gather copies the source values of idx's voxels from buf (src's
// voxels) into dst.
func gather[T any](dst, buf []T, idx [3][]int, src Box) {
	s := src.Size()
	i := 0
	for _, z := range idx[0] {
		for _, y := range idx[1] {
			row := buf[(z*s[1]+y)*s[2]:]
			for _, x := range idx[2] {
				dst[i] = row[x]
				i++
			}
		}
	}
}

func (rs *resampled) ReadLabels(box Box, dst []uint8) error {
	idx, src, err := rs.plan(box)
	if err != nil {
		return err
	}
	buf := make([]uint8, src.Voxels())
	if err := rs.f.ReadLabels(src, buf); err != nil {
		return err
	}
	gather(dst, buf, idx, src)
	return nil
}

func (rs *resampled) ReadRegion(box Box, dst [][]float32) error {
	idx, src, err := rs.plan(box)
	if err != nil {
		return err
	}
	bufs := make([][]float32, len(dst))
	for c := range bufs {
		bufs[c] = make([]float32, src.Voxels())
	}
	if err := rs.f.ReadRegion(src, bufs); err != nil {
		return err
	}
	for c := range dst {
		gather(dst[c], bufs[c], idx, src)
	}
	return nil
}

func (rs *resampled) Close() error { return rs.f.Close() }
