package volume

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// A resampled volume is a volume read on another voxel grid than its
// file's. A label map is read by nearest neighbour: a dataset manifest's
// label crop annotated at another resolution than the raw volume it
// trains with (package data), as cellmap's crops at 4, 8 or 16 nm in a
// raw at 8 nm. An image is read by trilinear interpolation (Linear): a
// manifest's raw volume read at a target spacing none of its levels has
// (cellmap-data reads axis-aligned arrays by nearest neighbour; voxtrain
// interpolates intensities, as nnU-Net resamples images, so a non-integer
// scale does not duplicate and drop voxels). It is named by a path,
// "FILE#resample=shape=D,H,W&spacing=…&origin=…&at=…[&unit=U][&interp=linear]",
// so that everything that opens case files by path (Open, the chunk
// cache's handles, the verification, the caches' stat of FilePath) reads
// the resampled volume without knowing about resampling. FILE is any
// path Open reads, a masked label's (MaskedPath) too: masking and then
// resampling is resampling the label and its mask alike. A window of a
// resampled volume (WindowPath of a ResampledPath: a manifest crop's box
// of its raw read at the target spacing) has the window outermost.
//
// Positions are voxel centres, as NIfTI's affine and OME-NGFF's
// transformations put them: the target voxel i lies at Origin + i·Spacing
// and the source voxel j at At + j·(its spacing). By nearest neighbour it
// takes the source voxel whose centre is nearest, ties going to the
// larger index (as xarray's sel(method="nearest"), which cellmap-data
// reads its arrays with, breaks them). Linearly it takes, per axis, the
// two source voxels whose centres bracket its centre, weighted by
// distance; a centre within half a source voxel of the source's edge
// (past its first or last voxel's centre) takes that voxel's value, as
// if the edge voxel were repeated (clamped).

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
	// Linear reads by trilinear interpolation (an image's intensities)
	// instead of nearest neighbour (a label map's classes).
	Linear bool
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
	if r.Linear {
		// Likewise only when linear: nearest neighbour is the default.
		p += "&interp=linear"
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
	if strings.Contains(spec, windowTag) {
		// A window of the resampled volume: the window is the outermost
		// suffix (SplitWindow's), the resampling inside its file.
		return path, r, false, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: resample %q: %s (want shape=D,H,W&spacing=z,y,x&origin=z,y,x&at=z,y,x[&unit=U][&interp=linear])", path, spec, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(spec, "&") {
		k, v, found := strings.Cut(kv, "=")
		if k == "interp" && found {
			if seen[k] {
				return "", r, false, bad("%s twice", k)
			}
			seen[k] = true
			if v != "linear" {
				return "", r, false, bad("interp %q, want linear (nearest neighbour is the default)", v)
			}
			r.Linear = true
			continue
		}
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

// Resampled returns f read on r's grid, by nearest neighbour or, with
// r.Linear, by trilinear interpolation clamped at f's edges: a volume of
// r.Shape and r.Spacing (in r.Unit, f's spacing converted into it when
// both state units) whose affine is axis-aligned at r.Origin. Every
// target voxel's centre must lie within f's extent (its nearest voxel
// inside f; a grid that reaches past f's edge is an error). Reads are
// lazy: a box reads only the box of f its voxels map to (with linear
// interpolation, the voxels bracketing them: one more on each side at
// most). A linear resampling of a chunked f (Zarr, N5) is Chunked, its
// chunks f's scaled onto r's grid, so that readers stepping chunk by
// chunk read about one of f's chunks at a time. Closing the resampled
// file closes f.
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
	if ck, ok := f.(Chunked); ok && r.Linear {
		c := ck.ChunkShape()
		var chunk [3]int
		for a := range 3 {
			chunk[a] = max(1, int(math.Round(float64(c[a])/rs.scale[a])))
		}
		return &chunkedResampled{resampled: rs, chunk: chunk}, nil
	}
	return rs, nil
}

// chunkedResampled is a linear resampling of a chunked file (see
// Resampled): a manifest's raw read at its target spacing keeps a chunk
// shape, as the raw read at one of its levels does, for the readers that
// tile by it (the gz source's sampled fingerprint, its label reads).
type chunkedResampled struct {
	*resampled
	chunk [3]int
}

func (c *chunkedResampled) ChunkShape() [3]int { return c.chunk }

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
	if rs.r.Linear {
		return errors.New("resampling: a linearly interpolated volume (an image) holds no class indices; labels are resampled by nearest neighbour")
	}
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
	if rs.r.Linear {
		return rs.readLinear(box, dst)
	}
	idx, src, err := rs.plan(box)
	if err != nil {
		return err
	}
	bufs, err := rs.readSource(src, len(dst))
	if err != nil {
		return err
	}
	defer putSource(bufs)
	for c := range dst {
		gather(dst[c], bufs[c], idx, src)
	}
	return nil
}

func (rs *resampled) Close() error { return rs.f.Close() }

// sourcePool holds the buffers region reads decode their source box
// into: a patch read through a resampling (a manifest's interpolated raw,
// every training patch) would otherwise allocate — and the collector
// clear — megabytes per read.
var sourcePool sync.Pool // *[]float32

// readSource reads box src of the source file, channels channels, into
// pooled buffers (give them back with putSource).
func (rs *resampled) readSource(src Box, channels int) ([][]float32, error) {
	n := src.Voxels()
	bufs := make([][]float32, channels)
	for c := range bufs {
		if p, ok := sourcePool.Get().(*[]float32); ok && cap(*p) >= n {
			bufs[c] = (*p)[:n]
		} else {
			bufs[c] = make([]float32, n) // a smaller pooled one is dropped, not piled up
		}
	}
	if err := rs.f.ReadRegion(src, bufs); err != nil {
		putSource(bufs)
		return nil, err
	}
	return bufs, nil
}

func putSource(bufs [][]float32) {
	for _, b := range bufs {
		sourcePool.Put(&b)
	}
}

// taps are, for one axis of a box, each target voxel's two bracketing
// source voxels (relative to the source box read) and the upper one's
// weight.
type taps struct {
	lo, hi []int
	w      []float64
}

// tap is target voxel i's bracketing source voxels j0 ≤ j1 (j1 = j0 + 1,
// or j0 on a one-voxel axis) on axis a and j1's weight: its centre's
// position in source voxels, clamped to the first and last voxels'
// centres, interpolated between j0 and j1.
func (rs *resampled) tap(a, i int) (j0, j1 int, w float64) {
	n := rs.src[a]
	p := min(max(float64(i)*rs.scale[a]+rs.shift[a], 0), float64(n-1))
	j0 = int(math.Floor(p))
	if j0 >= n-1 {
		// At (or clamped to) the last centre: interpolate from the
		// voxel before it, with weight 1 on the last.
		j0 = max(n-2, 0)
	}
	j1 = min(j0+1, n-1)
	if j1 == j0 {
		return j0, j1, 0
	}
	return j0, j1, p - float64(j0)
}

// planLinear maps box to the source for linear interpolation: per axis,
// the taps of each target voxel relative to src, the box of the source
// they fall in (the voxels needed and no more).
func (rs *resampled) planLinear(box Box) (t [3]taps, src Box, err error) {
	if box.Empty() || !Whole(rs.hdr.Shape).Contains(box) {
		return t, src, fmt.Errorf("region %v..%v outside the resampled volume's %v", box.Lo, box.Hi, rs.hdr.Shape)
	}
	for a := range 3 {
		n := box.Hi[a] - box.Lo[a]
		t[a] = taps{lo: make([]int, n), hi: make([]int, n), w: make([]float64, n)}
		for k := range n {
			t[a].lo[k], t[a].hi[k], t[a].w[k] = rs.tap(a, box.Lo[a]+k)
		}
		// The map is monotonic: the first and last voxels bound the
		// source box.
		src.Lo[a], src.Hi[a] = t[a].lo[0], t[a].hi[n-1]+1
		for k := range n {
			t[a].lo[k] -= src.Lo[a]
			t[a].hi[k] -= src.Lo[a]
		}
	}
	if err := CheckInMemory(src.Size(), rs.hdr.Channels); err != nil {
		return t, src, fmt.Errorf("resampling: region %v..%v reads the file's %v..%v: %w", box.Lo, box.Hi, src.Lo, src.Hi, err)
	}
	return t, src, nil
}

// readLinear reads box by trilinear interpolation of the source box its
// voxels fall in. Each step is a + w·(b − a), in float64: a constant
// region reads exactly its value, a linear ramp its value at each centre
// (up to rounding).
func (rs *resampled) readLinear(box Box, dst [][]float32) error {
	t, src, err := rs.planLinear(box)
	if err != nil {
		return err
	}
	bufs, err := rs.readSource(src, len(dst))
	if err != nil {
		return err
	}
	defer putSource(bufs)
	s := src.Size()
	for c, buf := range bufs {
		out := dst[c]
		i := 0
		for kz := range t[0].lo {
			z0, z1, wz := t[0].lo[kz], t[0].hi[kz], t[0].w[kz]
			for ky := range t[1].lo {
				y0, y1, wy := t[1].lo[ky], t[1].hi[ky], t[1].w[ky]
				r00 := buf[(z0*s[1]+y0)*s[2]:]
				r01 := buf[(z0*s[1]+y1)*s[2]:]
				r10 := buf[(z1*s[1]+y0)*s[2]:]
				r11 := buf[(z1*s[1]+y1)*s[2]:]
				for kx := range t[2].lo {
					x0, x1, wx := t[2].lo[kx], t[2].hi[kx], t[2].w[kx]
					lerp := func(r []float32) float64 {
						a := float64(r[x0])
						return a + wx*(float64(r[x1])-a)
					}
					a00, a01, a10, a11 := lerp(r00), lerp(r01), lerp(r10), lerp(r11)
					a0 := a00 + wy*(a01-a00)
					a1 := a10 + wy*(a11-a10)
					out[i] = float32(a0 + wz*(a1-a0))
					i++
				}
			}
		}
	}
	return nil
}
