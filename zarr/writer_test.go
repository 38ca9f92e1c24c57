package zarr

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// TestWriterRoundTrip writes uint8 labels and float32 probabilities
// (with a channel axis, edge chunks cut by the shape) with each
// compressor, block by block from several goroutines, and reads them back
// through Open: the values, spacing and origin written.
func TestWriterRoundTrip(t *testing.T) {
	shape := [3]int{9, 14, 11} // not multiples of the chunks: edge chunks
	chunks := [3]int{4, 8, 5}
	n := shape[0] * shape[1] * shape[2]
	for _, comp := range []string{"blosc-zstd", "zlib"} {
		for _, ch := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/c%d", comp, ch), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "out.ome.zarr")
				dt := "uint8"
				if ch > 0 {
					dt = "float32"
				}
				spec := ImageSpec{Name: "x", Shape: shape, Chunks: chunks, Channels: ch, DType: dt,
					Spacing: [3]float64{2, 0.5, 0.75}, Origin: [3]float64{-10, 3, 4.5}, Unit: "millimeter", Compressor: comp}
				w, err := CreateImage(dir, spec)
				if err != nil {
					t.Fatal(err)
				}
				nc := max(ch, 1)
				val := func(c, z, y, x int) float32 { return float32((c*7+z*3+y*5+x)%251) / 4 }
				if ch == 0 {
					val = func(c, z, y, x int) float32 { return float32((z*3 + y*5 + x) % 251) }
				}
				// Blocks of 2×1×2 chunks, written concurrently.
				var wg sync.WaitGroup
				errs := make(chan error, 100)
				for z0 := 0; z0 < shape[0]; z0 += 2 * chunks[0] {
					for y0 := 0; y0 < shape[1]; y0 += chunks[1] {
						for x0 := 0; x0 < shape[2]; x0 += 2 * chunks[2] {
							box := volume.Box{Lo: [3]int{z0, y0, x0},
								Hi: [3]int{min(z0+2*chunks[0], shape[0]), min(y0+chunks[1], shape[1]), min(x0+2*chunks[2], shape[2])}}
							wg.Add(1)
							go func() {
								defer wg.Done()
								s := box.Size()
								u8, f32 := make([]uint8, nc*box.Voxels()), make([]float32, nc*box.Voxels())
								i := 0
								for c := range nc {
									for z := range s[0] {
										for y := range s[1] {
											for x := range s[2] {
												v := val(c, box.Lo[0]+z, box.Lo[1]+y, box.Lo[2]+x)
												u8[i], f32[i] = uint8(v), v
												i++
											}
										}
									}
								}
								var src any = u8
								if dt == "float32" {
									src = f32
								}
								errs <- w.WriteBlock(box, src)
							}()
						}
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				f, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				h := f.Header()
				if h.Shape != shape || h.Channels != nc || h.Spacing != spec.Spacing {
					t.Fatalf("read shape %v, %d channels, spacing %v; wrote %v, %d, %v", h.Shape, h.Channels, h.Spacing, shape, nc, spec.Spacing)
				}
				if h.Affine[0][3] != 4.5 || h.Affine[1][3] != 3 || h.Affine[2][3] != -10 {
					t.Errorf("affine %v: want the origin (x, y, z) = (4.5, 3, -10)", h.Affine)
				}
				dst := make([][]float32, nc)
				for c := range dst {
					dst[c] = make([]float32, n)
				}
				if err := f.ReadRegion(volume.Whole(shape), dst); err != nil {
					t.Fatal(err)
				}
				for c := range nc {
					for i, got := range dst[c] {
						z, y, x := i/(shape[1]*shape[2]), i/shape[2]%shape[1], i%shape[2]
						if want := val(c, z, y, x); got != want {
							t.Fatalf("channel %d voxel (%d,%d,%d) = %v, want %v", c, z, y, x, got, want)
						}
					}
				}
				// No temporary file is left behind.
				ents, _ := os.ReadDir(w.Dir())
				for _, e := range ents {
					if strings.HasPrefix(e.Name(), ".tmp-") {
						t.Errorf("temporary file %s left", e.Name())
					}
				}
				// Reopening checks the spec.
				if _, err := OpenImage(dir, spec); err != nil {
					t.Errorf("OpenImage: %v", err)
				}
				other := spec
				other.Chunks = [3]int{8, 8, 8}
				if _, err := OpenImage(dir, other); err == nil {
					t.Error("OpenImage with other chunks: no error")
				}
			})
		}
	}
}

// TestWriterRejects: a block off the chunk grid, data of the wrong type
// or length, a bad spec, an existing non-empty directory.
func TestWriterRejects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a.ome.zarr")
	spec := ImageSpec{Shape: [3]int{8, 8, 8}, Chunks: [3]int{4, 4, 4}, DType: "uint8", Spacing: [3]float64{1, 1, 1}}
	w, err := CreateImage(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		box volume.Box
		src any
	}{
		{volume.Box{Lo: [3]int{2, 0, 0}, Hi: [3]int{6, 4, 4}}, make([]uint8, 64)},
		{volume.Box{Hi: [3]int{4, 4, 3}}, make([]uint8, 48)},
		{volume.Box{Hi: [3]int{4, 4, 4}}, make([]float32, 64)},
		{volume.Box{Hi: [3]int{4, 4, 4}}, make([]uint8, 63)},
		{volume.Box{Hi: [3]int{4, 4, 12}}, make([]uint8, 192)},
	} {
		if err := w.WriteBlock(c.box, c.src); err == nil {
			t.Errorf("WriteBlock(%v, %T of %d): no error", c.box, c.src, 0)
		}
	}
	if _, err := CreateImage(dir, spec); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("CreateImage over a store: %v", err)
	}
	for _, bad := range []func(*ImageSpec){
		func(s *ImageSpec) { s.DType = "int16" },
		func(s *ImageSpec) { s.Compressor = "lz4" },
		func(s *ImageSpec) { s.Chunks[1] = 0 },
		func(s *ImageSpec) { s.Spacing[2] = 0 },
		func(s *ImageSpec) { s.Shape[0] = 0 },
	} {
		s := spec
		bad(&s)
		if _, err := CreateImage(filepath.Join(t.TempDir(), "b.zarr"), s); err == nil {
			t.Errorf("CreateImage(%+v): no error", s)
		}
	}
}
