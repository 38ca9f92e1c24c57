package volume

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// nearestIndex is the source voxel whose centre (at + j·spacing) is
// nearest pos, found by trying every j; ties go to the larger j.
func nearestIndex(pos, at, spacing float64, n int) int {
	best, bestD := -1, math.Inf(1)
	for j := range n {
		d := math.Abs(pos - (at + float64(j)*spacing))
		if d <= bestD+1e-9*spacing {
			best, bestD = j, math.Min(d, bestD)
		}
	}
	return best
}

// TestResampled: a volume read on a finer, a coarser and a non-integer
// grid reads, voxel for voxel, the source voxel nearest to each target
// voxel's centre, also for a box inside it, and reads no more of the
// source than the box maps to.
func TestResampled(t *testing.T) {
	src := &rampFile{shape: [3]int{6, 7, 8}} // spacing (3, 2, 1)
	at := [3]float64{10, 20, 30}
	for _, tc := range []struct {
		name    string
		spacing [3]float64
	}{
		{"2× finer", [3]float64{1.5, 1, 0.5}},
		{"2× coarser", [3]float64{6, 4, 2}},
		{"non-integer", [3]float64{2, 1.3, 0.75}},
	} {
		// The target grid: its voxel centres inside the source's extent
		// (voxel j covers at + (j ± ½)·spacing).
		r := Resampling{Spacing: tc.spacing, At: at}
		h := src.Header()
		for a := range 3 {
			lo := at[a] - h.Spacing[a]/2 + tc.spacing[a]/2
			r.Origin[a] = lo
			r.Shape[a] = int(math.Floor((float64(h.Shape[a])*h.Spacing[a]-tc.spacing[a])/tc.spacing[a] + 1 + 1e-9))
		}
		f, err := Resampled(src, r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g := f.Header(); g.Shape != r.Shape || g.Spacing != tc.spacing || g.Affine[0][3] != r.Origin[2] || g.Affine[2][2] != tc.spacing[0] {
			t.Fatalf("%s: header %+v", tc.name, g)
		}
		for _, box := range []Box{Whole(r.Shape), {Lo: [3]int{1, 2, 1}, Hi: [3]int{r.Shape[0] - 1, r.Shape[1], 4}}} {
			dst := [][]float32{make([]float32, box.Voxels())}
			if err := f.ReadRegion(box, dst); err != nil {
				t.Fatal(err)
			}
			i := 0
			var lo, hi [3]int
			for a := range 3 {
				lo[a], hi[a] = math.MaxInt, -1
			}
			for z := box.Lo[0]; z < box.Hi[0]; z++ {
				for y := box.Lo[1]; y < box.Hi[1]; y++ {
					for x := box.Lo[2]; x < box.Hi[2]; x++ {
						var j [3]int
						for a, p := range [3]int{z, y, x} {
							j[a] = nearestIndex(r.Origin[a]+float64(p)*r.Spacing[a], at[a], h.Spacing[a], h.Shape[a])
							lo[a], hi[a] = min(lo[a], j[a]), max(hi[a], j[a]+1)
						}
						if want := float32((j[0]*7+j[1])*8 + j[2]); dst[0][i] != want {
							t.Fatalf("%s: voxel (%d %d %d) reads %g, want source voxel %v (%g)", tc.name, z, y, x, dst[0][i], j, want)
						}
						i++
					}
				}
			}
			if src.last != (Box{Lo: lo, Hi: hi}) {
				t.Errorf("%s: box %v read the source's %v, want %v..%v", tc.name, box, src.last, lo, hi)
			}
		}
	}
	// A grid reaching past the source's edge is refused.
	r := Resampling{Shape: [3]int{2, 2, 20}, Spacing: [3]float64{3, 2, 1}, At: at, Origin: at}
	if _, err := Resampled(src, r); err == nil || !strings.Contains(err.Error(), "axis 2") {
		t.Errorf("a grid wider than the source: %v", err)
	}
}

func TestResampledPath(t *testing.T) {
	r := Resampling{Shape: [3]int{4, 5, 6}, Spacing: [3]float64{8, 8, 0.1}, Origin: [3]float64{-2, 0, 1e-7}, At: [3]float64{4, 4, 1.0 / 3}}
	for _, label := range []string{"crops/c1.zarr", MaskedPath("c.zarr", "m.zarr", 255)} {
		p := ResampledPath(label, r)
		base, got, ok, err := SplitResample(p)
		if err != nil || !ok || base != label || got != r {
			t.Fatalf("%s: split %q %+v %v %v", p, base, got, ok, err)
		}
		if FilePath(p) != "crops/c1.zarr" && FilePath(p) != "c.zarr" {
			t.Errorf("FilePath(%s) = %s", p, FilePath(p))
		}
	}
	if base, _, ok, err := SplitResample("a.zarr"); ok || err != nil || base != "a.zarr" {
		t.Errorf("a plain path: %q %v %v", base, ok, err)
	}
	for _, bad := range []string{
		"a.zarr#resample=shape=1,2&spacing=1,1,1&origin=0,0,0&at=0,0,0",
		"a.zarr#resample=shape=1,2,0&spacing=1,1,1&origin=0,0,0&at=0,0,0",
		"a.zarr#resample=shape=1,2,3&spacing=1,-1,1&origin=0,0,0&at=0,0,0",
		"a.zarr#resample=shape=1,2,3&spacing=1,1,1&origin=0,0,0",
		"a.zarr#resample=shape=1,2,3&spacing=1,1,1&origin=0,x,0&at=0,0,0",
	} {
		if _, _, _, err := SplitResample(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v", bad, err)
		}
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%s) succeeded", bad)
		}
	}
}

// TestResampledHuge: a 2^36-voxel file resampled onto a grid 8 times
// coarser is read lazily: a box near its far corner reads the nearest
// source voxels (at flat offsets past 2^31) from a small source box, and
// a box whose source box is past what memory takes is refused before the
// file is read, though the box itself would fit.
func TestResampledHuge(t *testing.T) {
	src := &rampFile{shape: [3]int{4096, 4096, 4096}} // spacing (3, 2, 1)
	r := Resampling{Shape: [3]int{512, 512, 512}, Spacing: [3]float64{24, 16, 8}, At: [3]float64{0, 0, 0}}
	f, err := Resampled(src, r)
	if err != nil {
		t.Fatal(err)
	}
	box := Box{Lo: [3]int{510, 510, 510}, Hi: [3]int{512, 512, 512}}
	dst := [][]float32{make([]float32, 8)}
	if err := f.ReadRegion(box, dst); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst[0] {
		p := [3]int{box.Lo[0] + i/4, box.Lo[1] + i/2%2, box.Lo[2] + i%2}
		var j [3]int
		for a := range 3 {
			j[a] = nearestIndex(float64(p[a])*r.Spacing[a], 0, src.Header().Spacing[a], 4096)
		}
		if want := float32((j[0]*4096+j[1])*4096 + j[2]); v != want {
			t.Fatalf("voxel %v: %g, want the source's %v, %g", p, v, j, want)
		}
	}
	if s := src.last.Size(); s[0]*s[1]*s[2] > 9*9*9 {
		t.Errorf("read the source's %v for 2³ voxels", src.last)
	}
	read := src.last
	big := Box{Hi: [3]int{256, 256, 256}}
	err = f.ReadRegion(big, [][]float32{nil}) // refused before dst is looked at
	if !errors.Is(err, ErrTooLarge) || src.last != read {
		t.Errorf("a box whose source box is 2048³: %v (source read %v), want ErrTooLarge before reading", err, src.last)
	}
}

// chunkedRamp is a rampFile stored in chunks.
type chunkedRamp struct{ *rampFile }

func (chunkedRamp) ChunkShape() [3]int { return [3]int{4, 4, 4} }

// TestResampledLinear: a volume read by trilinear interpolation on a
// finer, a coarser and a non-integer grid covering its extent reads, at
// each target voxel's centre, the source's linear ramp there (trilinear
// interpolation is exact on a ramp), its value at the nearest edge
// centre where the target centre lies beyond the first or last source
// centre (clamped); a box reads from the source only the voxels that
// bracket its centres.
func TestResampledLinear(t *testing.T) {
	src := &rampFile{shape: [3]int{6, 7, 8}} // spacing (3, 2, 1)
	h := src.Header()
	at := [3]float64{10, 20, 30}
	for _, tc := range []struct {
		name    string
		spacing [3]float64
	}{
		{"2× finer", [3]float64{1.5, 1, 0.5}},
		{"coarser", [3]float64{4.5, 3, 1.7}},
		{"non-integer", [3]float64{2, 1.3, 0.75}},
	} {
		// The grid covering the source's extent: its first voxel's
		// face on the source's first voxel's face.
		r := Resampling{Spacing: tc.spacing, At: at, Linear: true}
		for a := range 3 {
			r.Origin[a] = at[a] - h.Spacing[a]/2 + tc.spacing[a]/2
			r.Shape[a] = int(math.Floor(float64(h.Shape[a])*h.Spacing[a]/tc.spacing[a] + 1e-9))
		}
		f, err := Resampled(src, r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g := f.Header(); g.Shape != r.Shape || g.Spacing != tc.spacing || g.Affine[0][3] != r.Origin[2] || g.Affine[1][1] != tc.spacing[1] {
			t.Fatalf("%s: header %+v", tc.name, g)
		}
		if _, ok := f.(Chunked); ok {
			t.Errorf("%s: a resampling of an unchunked file is Chunked", tc.name)
		}
		for _, box := range []Box{Whole(r.Shape), {Lo: [3]int{1, 2, 1}, Hi: [3]int{r.Shape[0] - 1, r.Shape[1], 4}}} {
			dst := [][]float32{make([]float32, box.Voxels())}
			if err := f.ReadRegion(box, dst); err != nil {
				t.Fatal(err)
			}
			// c[a]: a centre's position in source voxels, clamped.
			pos := func(a, i int) float64 {
				c := (r.Origin[a] + float64(i)*r.Spacing[a] - at[a]) / h.Spacing[a]
				return math.Min(math.Max(c, 0), float64(h.Shape[a]-1))
			}
			i, clamped := 0, 0
			for z := box.Lo[0]; z < box.Hi[0]; z++ {
				for y := box.Lo[1]; y < box.Hi[1]; y++ {
					for x := box.Lo[2]; x < box.Hi[2]; x++ {
						want := (pos(0, z)*7+pos(1, y))*8 + pos(2, x)
						if math.Abs(float64(dst[0][i])-want) > 1e-3 {
							t.Fatalf("%s: voxel (%d %d %d) reads %g, want the ramp's %g", tc.name, z, y, x, dst[0][i], want)
						}
						for a, p := range [3]int{z, y, x} {
							if c := pos(a, p); c == 0 || c == float64(h.Shape[a]-1) {
								clamped++
							}
						}
						i++
					}
				}
			}
			// A grid finer than the source on an axis has centres
			// beyond the first and last source centres there.
			if finer := tc.spacing[0] < h.Spacing[0] || tc.spacing[1] < h.Spacing[1] || tc.spacing[2] < h.Spacing[2]; finer && box == Whole(r.Shape) && clamped == 0 {
				t.Errorf("%s: no voxel clamped: the edges are untested", tc.name)
			}
			// The source read: the voxels bracketing the box's centres,
			// one more at most on each side.
			for a := range 3 {
				lo, hi := pos(a, box.Lo[a]), pos(a, box.Hi[a]-1)
				if got := src.last; got.Lo[a] > int(math.Floor(lo)) || got.Lo[a] < int(math.Floor(lo))-1 ||
					got.Hi[a] < int(math.Ceil(hi))+1 || got.Hi[a] > int(math.Floor(hi))+2 {
					t.Errorf("%s: box %v read the source's %v, want axis %d to span the centres %g..%g", tc.name, box, got, a, lo, hi)
				}
			}
		}
		if err := f.ReadLabels(Whole(r.Shape), make([]uint8, Whole(r.Shape).Voxels())); err == nil {
			t.Errorf("%s: a linear resampling read as labels", tc.name)
		}
	}
	// A chunked file's linear resampling is chunked, its chunks the
	// file's scaled onto the grid; nearest neighbour's is not.
	r := Resampling{Shape: [3]int{4, 4, 4}, Spacing: [3]float64{1.5, 4, 1}, At: at, Origin: at, Linear: true}
	f, err := Resampled(chunkedRamp{src}, r)
	if err != nil {
		t.Fatal(err)
	}
	if ck, ok := f.(Chunked); !ok || ck.ChunkShape() != [3]int{8, 2, 4} {
		t.Errorf("linear resampling of a chunked file: %T %v, want chunks [8 2 4]", f, f)
	}
	r.Linear = false
	if f, err := Resampled(chunkedRamp{src}, r); err != nil {
		t.Fatal(err)
	} else if _, ok := f.(Chunked); ok {
		t.Errorf("nearest resampling of a chunked file is Chunked")
	}
}

// TestResampledLinearPath: a linear resampling's path names it (and a
// nearest one's is as it was), and a window of a resampled volume splits
// as a window whose file is the resampled volume.
func TestResampledLinearPath(t *testing.T) {
	r := Resampling{Shape: [3]int{4, 5, 6}, Spacing: [3]float64{6, 6, 6}, Origin: [3]float64{1, 1, 1}, At: [3]float64{0, 0, 0}, Unit: "nanometer", Linear: true}
	p := ResampledPath("raw.zarr/s0", r)
	if !strings.HasSuffix(p, "&unit=nanometer&interp=linear") {
		t.Errorf("path %s", p)
	}
	if base, got, ok, err := SplitResample(p); err != nil || !ok || base != "raw.zarr/s0" || got != r {
		t.Fatalf("%s: split %q %+v %v %v", p, base, got, ok, err)
	}
	r.Linear = false
	if q := ResampledPath("raw.zarr/s0", r); strings.Contains(q, "interp") {
		t.Errorf("nearest: %s", q)
	}
	w := WindowPath(p, Box{Lo: [3]int{1, 1, 1}, Hi: [3]int{3, 4, 5}})
	if _, _, ok, err := SplitResample(w); ok || err != nil {
		t.Errorf("SplitResample(%s): ok %v, %v; want the window outermost", w, ok, err)
	}
	if base, box, ok, err := SplitWindow(w); !ok || err != nil || base != p || box.Hi != [3]int{3, 4, 5} {
		t.Errorf("SplitWindow(%s): %s %v %v %v", w, base, box, ok, err)
	}
	if FilePath(w) != "raw.zarr/s0" {
		t.Errorf("FilePath(%s) = %s", w, FilePath(w))
	}
	bad := strings.Replace(p, "interp=linear", "interp=cubic", 1)
	if _, _, _, err := SplitResample(bad); err == nil || !strings.Contains(err.Error(), "cubic") {
		t.Errorf("%s: %v", bad, err)
	}
}
