package data

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
)

// interpLevels is the raw pyramid of the interpolation fixture: 4, 8 and
// 16 nm, each coarser level centred on the finer voxels it covers (its
// translation the finer's plus half their spacings' difference), all
// spanning 0..96 × 0..112 × 0..128 nm. Level k holds 100·k plus a linear
// ramp of the world position of its voxels' centres (interpRamp), which
// trilinear interpolation reproduces exactly: a read at a position shows
// both which level it came from and where.
var interpLevels = func() []pyramidLevel {
	var out []pyramidLevel
	for k, s := range []float64{4, 8, 16} {
		o := (s - 4) / 2
		sp, org := [3]float64{s, s, s}, [3]float64{o, o, o}
		out = append(out, pyramidLevel{path: fmt.Sprintf("s%d", k), spacing: sp, origin: org,
			shape: [3]int{96 / int(s), 112 / int(s), 128 / int(s)},
			value: func(z, y, x int) float32 {
				return float32(100*k) + interpRamp([3]float64{org[0] + float64(z)*s, org[1] + float64(y)*s, org[2] + float64(x)*s})
			}})
	}
	return out
}()

// interpRamp is the fixture's ramp at world position w (z, y, x), exact
// in float32 at every voxel centre of the levels.
func interpRamp(w [3]float64) float32 { return float32(0.5*w[0] + 0.25*w[1] + 0.125*w[2]) }

// interpAt is the value of level l at world position w, clamped to its
// first and last voxels' centres: what trilinear interpolation of its
// voxels (repeated past its edges) reads there, computed from the ramp.
func interpAt(k int, w [3]float64) float64 {
	l := interpLevels[k]
	var c [3]float64
	for a := range 3 {
		c[a] = math.Min(math.Max(w[a], l.origin[a]), l.origin[a]+float64(l.shape[a]-1)*l.spacing[a])
	}
	return float64(100*k) + 0.5*c[0] + 0.25*c[1] + 0.125*c[2]
}

// interpGrid is the grid the raw is read on at target spacing t from
// level k: its first voxel's face on the level's first voxel's face (the
// level's extent starts at origin − spacing/2), as many voxels of t as
// fit wholly in the extent.
func interpGrid(k int, t [3]float64) (origin [3]float64, shape [3]int) {
	l := interpLevels[k]
	for a := range 3 {
		lo := l.origin[a] - l.spacing[a]/2
		origin[a] = lo + t[a]/2
		for origin[a]+(float64(shape[a])+0.5)*t[a] <= lo+float64(l.shape[a])*l.spacing[a]+1e-9 {
			shape[a]++
		}
	}
	return origin, shape
}

// interpCrops are the fixture's crops for target spacing t on a grid of
// origin o: one at t, its voxel 0 on the grid's voxel (1, 1, 2), placed
// by translation; one at 4 nm (the finest level's spacing), placed by its
// own origin and resampled by nearest neighbour onto the grid.
func interpCrops(t, o [3]float64) []resCrop {
	var at [3]float64
	for a, i := range [3]int{1, 1, 2} {
		at[a] = o[a] + float64(i)*t[a]
	}
	return []resCrop{
		{id: "att", file: "crops/att.zarr", shape: [3]int{2, 3, 3}, spacing: t, origin: at},
		{id: "at4", file: "crops/at4.zarr", shape: [3]int{10, 12, 9}, spacing: [3]float64{4, 4, 4}, origin: [3]float64{30, 42, 50}},
	}
}

// writeInterpFixture writes the pyramid and crops for target spacing t
// read from level k, and the manifest (its raw the pyramid's group, or
// raw, a path inside it); it returns the manifest's path and the crops.
func writeInterpFixture(t *testing.T, k int, target [3]float64, raw string) (dir, manifest string, crops []resCrop) {
	t.Helper()
	dir = t.TempDir()
	writePyramid(t, filepath.Join(dir, "raw.zarr"), interpLevels)
	o, _ := interpGrid(k, target)
	crops = interpCrops(target, o)
	for _, c := range crops {
		writeGrid(t, filepath.Join(dir, c.file), c.shape, c.spacing, c.origin, true, resClass)
	}
	a := crops[0].origin
	m := fmt.Sprintf(`classes: {background: 0, a: 1, b: 2}
spacing: [%g, %g, %g]
volumes:
  - raw: %s
    crops:
      - {id: att, label: crops/att.zarr, translation: [%g, %g, %g]}
      - {id: at4, label: crops/at4.zarr}
`, target[0], target[1], target[2], cmp.Or(raw, "raw.zarr"), a[0], a[1], a[2])
	manifest = filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(manifest, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, manifest, crops
}

// TestManifestInterpolatedRaw: with a manifest spacing no level of the
// raw is at, each crop's image is the raw read at that spacing by
// trilinear interpolation from the level cellmap-data's find_level picks
// (the coarsest no coarser than the target on any axis, else the
// finest): every voxel reads that level's ramp at the voxel's centre
// (clamped at the level's edge centres), on a grid whose first voxel
// starts at the level's first face; a crop at the target spacing lands
// on the grid voxels under it, a crop at 4 nm has its labels resampled
// onto them by nearest neighbour; ReadCase, both sources and Verify
// agree. A raw that is an array (a level named by its path) is read
// the same way from its one level.
func TestManifestInterpolatedRaw(t *testing.T) {
	for _, tc := range []struct {
		target [3]float64
		level  int
		raw    string
	}{
		{target: [3]float64{6, 6, 6}, level: 0},    // between s0 and s1: from s0
		{target: [3]float64{12, 12, 12}, level: 1}, // between s1 and s2: from s1
		{target: [3]float64{20, 20, 20}, level: 2}, // past the coarsest: from s2
		{target: [3]float64{3, 3, 3}, level: 0},    // finer than the finest: from s0, clamped at its edges
		{target: [3]float64{6, 12, 12}, level: 0},  // s1 is coarser on z: from s0
		{target: [3]float64{12, 12, 12}, level: 0, raw: "raw.zarr/s0"},
	} {
		t.Run(fmt.Sprint(tc.target, tc.raw), func(t *testing.T) {
			dir, p, crops := writeInterpFixture(t, tc.level, tc.target, tc.raw)
			o, shape := interpGrid(tc.level, tc.target)
			cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
			ds, err := OpenDataset(cfg)
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, "raw.zarr")
			if tc.raw != "" {
				src = filepath.Join(dir, tc.raw)
			} else if tc.level > 0 {
				src = filepath.Join(src, interpLevels[tc.level].path)
			}
			for k, c := range crops {
				box, lbl := expectPlacement(c, tc.target, o, shape, resClass)
				cs := ds.Cases[k]
				base, b, ok, err := volume.SplitWindow(cs.Images[0])
				if !ok || err != nil || b != box || !strings.HasPrefix(base, src+"#resample=") || !strings.HasSuffix(base, "&interp=linear") {
					t.Fatalf("crop %s: image %s, want the box %v of %s interpolated (%v)", c.id, cs.Images[0], box, src, err)
				}
				v, err := ReadCase(cfg, cs, 1)
				if err != nil {
					t.Fatalf("crop %s: %v", c.id, err)
				}
				if v.Shape != box.Size() || v.Spacing != tc.target {
					t.Fatalf("crop %s: shape %v spacing %v, want %v and %v", c.id, v.Shape, v.Spacing, box.Size(), tc.target)
				}
				i := 0
				for z := box.Lo[0]; z < box.Hi[0]; z++ {
					for y := box.Lo[1]; y < box.Hi[1]; y++ {
						for x := box.Lo[2]; x < box.Hi[2]; x++ {
							var w [3]float64
							for a, j := range [3]int{z, y, x} {
								w[a] = o[a] + float64(j)*tc.target[a]
							}
							want := interpAt(tc.level, w)
							if math.Abs(float64(v.Image[0][i])-want) > 1e-4 || v.Label[i] != lbl[i] {
								t.Fatalf("crop %s, grid voxel (%d %d %d) at %v: image %g label %d, want %g and %d", c.id, z, y, x, w, v.Image[0][i], v.Label[i], want, lbl[i])
							}
							i++
						}
					}
				}
				// The sources read what ReadCase reads.
				for _, s := range []string{"gz", "cache"} {
					c2 := cfg
					c2.Source = s
					l, err := Open(c2, Options{Seed: 1, Iterations: 1, Patch: [3]int{2, 2, 2}, Batch: 1, Logger: discard()})
					if err != nil {
						t.Fatal(err)
					}
					g, err := l.LoadCase(context.Background(), k)
					l.Close()
					if err != nil {
						t.Fatalf("%s source, crop %s: %v", s, c.id, err)
					}
					if string(g.Label) != string(v.Label) || fmt.Sprint(g.Image[0]) != fmt.Sprint(v.Image[0]) {
						t.Errorf("%s source, crop %s: differs from ReadCase", s, c.id)
					}
				}
			}
			// The raw itself at the target spacing (the crops' windows'
			// file): the grid's shape and origin, and every voxel the
			// level's ramp at its centre, clamped at the edges only
			// where the target is finer than the level.
			base, _, _, _ := volume.SplitWindow(ds.Cases[0].Images[0])
			f, err := volume.Open(base)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h := f.Header()
			if h.Shape != shape || h.Spacing != tc.target || origin(h.Affine) != o || h.Unit != "nanometer" {
				t.Fatalf("the raw at %v: shape %v spacing %v origin %v unit %q, want %v, %v, %v, nanometer", tc.target, h.Shape, h.Spacing, origin(h.Affine), h.Unit, shape, tc.target, o)
			}
			if _, ok := f.(volume.Chunked); !ok {
				t.Errorf("the raw at %v is not chunked", tc.target)
			}
			all := make([]float32, volume.Whole(shape).Voxels())
			if err := f.ReadRegion(volume.Whole(shape), [][]float32{all}); err != nil {
				t.Fatal(err)
			}
			i, clamped := 0, 0
			for z := range shape[0] {
				for y := range shape[1] {
					for x := range shape[2] {
						var w [3]float64
						for a, j := range [3]int{z, y, x} {
							w[a] = o[a] + float64(j)*tc.target[a]
						}
						want := interpAt(tc.level, w)
						if math.Abs(float64(all[i])-want) > 1e-4 {
							t.Fatalf("the raw at %v, voxel (%d %d %d) at %v: %g, want %g", tc.target, z, y, x, w, all[i], want)
						}
						if want != float64(100*tc.level)+float64(interpRamp(w)) {
							clamped++
						}
						i++
					}
				}
			}
			if finer := tc.target[0] < interpLevels[tc.level].spacing[0]; finer != (clamped > 0) {
				t.Errorf("the raw at %v: %d voxels clamped at the level's edges", tc.target, clamped)
			}
			if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{2, 2, 2}, Logger: discard()}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestManifestInterpolatedRawSameBatches: crops on the raw read at an
// interpolated spacing (its z-score statistics sampled from the
// interpolated grid, its labels resampled) give the same batches for 1
// and 3 workers, through both sources.
func TestManifestInterpolatedRawSameBatches(t *testing.T) {
	_, p, _ := writeInterpFixture(t, 0, [3]float64{6, 6, 6}, "")
	base := filled(config.Data{Manifest: p, Fold: -1})
	opt := Options{Seed: 3, Iterations: 2, Patch: [3]int{2, 3, 3}, Batch: 2, Augment: nnunetAug(t)}
	sameBatchesEverywhere(t, base, opt, []string{"gz", "cache"}, []int{1, 3}, 2, 4, nil)
}

// TestManifestInterpolatedRawLazy: a crop's image on the interpolated
// raw decodes only the level's chunks its voxels need: with every other
// chunk of the level corrupt, the manifest opens, ReadCase and the gz
// source read the crop (its values the ramp's), and only a read that
// reaches a corrupt chunk fails.
func TestManifestInterpolatedRawLazy(t *testing.T) {
	target := [3]float64{6, 6, 6}
	dir, _, crops := writeInterpFixture(t, 0, target, "")
	o, shape := interpGrid(0, target)
	c := crops[0] // at 6 nm, near the raw's low corner
	box, _ := expectPlacement(c, target, o, shape, resClass)
	// The s0 voxels the crop's centres fall between, and their chunks
	// (8³): the only ones left whole.
	l := interpLevels[0]
	var need [3][2]int
	for a := range 3 {
		lo := (o[a] + float64(box.Lo[a])*target[a] - l.origin[a]) / l.spacing[a]
		hi := (o[a] + float64(box.Hi[a]-1)*target[a] - l.origin[a]) / l.spacing[a]
		need[a] = [2]int{int(math.Floor(lo)) / 8, int(math.Ceil(hi)) / 8}
	}
	corrupt := 0
	for z := 0; z*8 < l.shape[0]; z++ {
		for y := 0; y*8 < l.shape[1]; y++ {
			for x := 0; x*8 < l.shape[2]; x++ {
				if z >= need[0][0] && z <= need[0][1] && y >= need[1][0] && y <= need[1][1] && x >= need[2][0] && x <= need[2][1] {
					continue
				}
				chunk := filepath.Join(dir, "raw.zarr", "s0", fmt.Sprintf("%d.%d.%d", z, y, x))
				if _, err := os.Stat(chunk); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(chunk, []byte("not a zlib stream"), 0o644); err != nil {
					t.Fatal(err)
				}
				corrupt++
			}
		}
	}
	if corrupt < 40 {
		t.Fatalf("%d of 48 chunks corrupt: the fixture reads most of the level", corrupt)
	}
	m := fmt.Sprintf("spacing: [6, 6, 6]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - {label: crops/att.zarr, translation: [%g, %g, %g]}\n", c.origin[0], c.origin[1], c.origin[2])
	p := filepath.Join(dir, "lazy.yaml")
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ReadCase(cfg, ds.Cases[0], 1)
	if err != nil {
		t.Fatalf("reading the crop: %v", err)
	}
	for i, x := range v.Image[0] {
		if z, y, xx := box.Lo[0]+i/(box.Size()[1]*box.Size()[2]), box.Lo[1]+i/box.Size()[2]%box.Size()[1], box.Lo[2]+i%box.Size()[2]; math.Abs(float64(x)-interpAt(0, [3]float64{o[0] + float64(z)*6, o[1] + float64(y)*6, o[2] + float64(xx)*6})) > 1e-4 {
			t.Fatalf("voxel %d: %g", i, x)
		}
	}
	cfg.Source = "gz"
	ld, err := Open(cfg, Options{Seed: 1, Iterations: 1, Patch: [3]int{2, 2, 2}, Batch: 1, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ld.LoadCase(context.Background(), 0); err != nil {
		t.Errorf("gz source: %v", err)
	}
	ld.Close()
	// The raw's far corner is in corrupt chunks.
	base, _, _, _ := volume.SplitWindow(ds.Cases[0].Images[0])
	f, err := volume.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	far := volume.Box{Lo: [3]int{shape[0] - 2, shape[1] - 2, shape[2] - 2}, Hi: shape}
	if err := f.ReadRegion(far, [][]float32{make([]float32, far.Voxels())}); err == nil {
		t.Errorf("reading the raw's far corner through corrupt chunks succeeded: the test would not see a chunk read it needs not")
	}
}

// TestManifestTargetSpacingOnLevel: a manifest spacing a level is at
// reads that level itself (its window, no resampling), voxel for voxel.
func TestManifestTargetSpacingOnLevel(t *testing.T) {
	dir, p, crops := writeInterpFixture(t, 1, [3]float64{8, 8, 8}, "")
	l := interpLevels[1]
	cfg := filled(config.Data{Manifest: p, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, c := range crops {
		box, _ := expectPlacement(c, l.spacing, l.origin, l.shape, resClass)
		if want := volume.WindowPath(filepath.Join(dir, "raw.zarr", "s1"), box); ds.Cases[k].Images[0] != want {
			t.Fatalf("crop %s: image %s, want %s", c.id, ds.Cases[k].Images[0], want)
		}
		v, err := ReadCase(cfg, ds.Cases[k], 1)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for z := box.Lo[0]; z < box.Hi[0]; z++ {
			for y := box.Lo[1]; y < box.Hi[1]; y++ {
				for x := box.Lo[2]; x < box.Hi[2]; x++ {
					if v.Image[0][i] != l.value(z, y, x) {
						t.Fatalf("crop %s, s1 voxel (%d %d %d): %g, want %g", c.id, z, y, x, v.Image[0][i], l.value(z, y, x))
					}
					i++
				}
			}
		}
	}
}

// TestManifestInterpolatedRawMask: a crop's mask on the interpolated raw
// is resampled onto its grid with its label: the ignore label wherever
// the mask voxel nearest a grid voxel is 0, through ReadCase and the gz
// source.
func TestManifestInterpolatedRawMask(t *testing.T) {
	const ignore = 200
	target := [3]float64{6, 6, 6}
	dir, _, crops := writeInterpFixture(t, 0, target, "")
	c := crops[1] // at 4 nm
	keep := func(z, y, x int) float32 { return map[bool]float32{true: 1}[x >= 4] }
	writeGrid(t, filepath.Join(dir, "crops/mask.zarr"), c.shape, c.spacing, c.origin, true, keep)
	p := filepath.Join(dir, "mask.yaml")
	m := "spacing: [6, 6, 6]\nvolumes:\n  - raw: raw.zarr\n    crops:\n      - {id: at4, label: crops/at4.zarr, mask: crops/mask.zarr}\n"
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	masked := func(z, y, x int) float32 {
		if keep(z, y, x) == 0 {
			return ignore
		}
		return resClass(z, y, x)
	}
	o, shape := interpGrid(0, target)
	_, want := expectPlacement(c, target, o, shape, masked)
	checkMaskedCase(t, p, want, ignore, [3]int{2, 2, 2})
}
