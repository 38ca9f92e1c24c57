package volume

import (
	"strings"
	"testing"
)

// rampFile is a one-channel volume whose voxel i holds i.
type rampFile struct {
	shape [3]int
	last  Box
}

func (r *rampFile) Header() Header {
	h := Header{Shape: r.shape, Channels: 1, Spacing: [3]float64{3, 2, 1}}
	h.Affine = Affine{{1, 0, 0, 5}, {0, 2, 0, 6}, {0, 0, 3, 7}, {0, 0, 0, 1}}
	return h
}

func (r *rampFile) ReadRegion(b Box, dst [][]float32) error {
	r.last = b
	i := 0
	for z := b.Lo[0]; z < b.Hi[0]; z++ {
		for y := b.Lo[1]; y < b.Hi[1]; y++ {
			for x := b.Lo[2]; x < b.Hi[2]; x++ {
				dst[0][i] = float32((z*r.shape[1]+y)*r.shape[2] + x)
				i++
			}
		}
	}
	return nil
}

func (r *rampFile) ReadLabels(b Box, dst []uint8) error { return nil }
func (r *rampFile) Close() error                        { return nil }

func TestWindow(t *testing.T) {
	f := &rampFile{shape: [3]int{6, 7, 8}}
	box := Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{4, 6, 8}}
	w, err := Window(f, box)
	if err != nil {
		t.Fatal(err)
	}
	h := w.Header()
	// Voxel (0,0,0) of the window is (x, y, z) = (3, 2, 1) of the file.
	if h.Shape != [3]int{3, 4, 5} || h.Affine[0][3] != 5+3 || h.Affine[1][3] != 6+2*2 || h.Affine[2][3] != 7+3*1 {
		t.Fatalf("header %+v", h)
	}
	dst := [][]float32{make([]float32, 2)}
	if err := w.ReadRegion(Box{Lo: [3]int{2, 3, 3}, Hi: [3]int{3, 4, 5}}, dst); err != nil {
		t.Fatal(err)
	}
	if want := float32((3*7+5)*8 + 6); dst[0][0] != want || f.last.Lo != [3]int{3, 5, 6} {
		t.Errorf("read %v from %v, want %g from [3 5 6]", dst[0], f.last, want)
	}
	if err := w.ReadRegion(Box{Lo: [3]int{2, 3, 4}, Hi: [3]int{3, 4, 6}}, dst); err == nil {
		t.Error("a region past the window's edge was read")
	}
	if _, err := Window(f, Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{4, 6, 9}}); err == nil {
		t.Error("a window past the file's edge was made")
	}
}

func TestWindowPath(t *testing.T) {
	box := Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{4, 6, 8}}
	p := WindowPath("/d/raw.zarr", box)
	base, b, ok, err := SplitWindow(p)
	if err != nil || !ok || base != "/d/raw.zarr" || b != box || FilePath(p) != "/d/raw.zarr" {
		t.Fatalf("%s: %s %v %v %v", p, base, b, ok, err)
	}
	if base, _, ok, err := SplitWindow("/d/a.nii.gz"); ok || err != nil || base != "/d/a.nii.gz" {
		t.Errorf("plain path: %s %v %v", base, ok, err)
	}
	for _, bad := range []string{"a.zarr#window=1:2,3:4", "a.zarr#window=1:2,3:3,0:1", "a.zarr#window=x:2,3:4,0:1"} {
		if _, _, _, err := SplitWindow(bad); err == nil || !strings.Contains(err.Error(), "a.zarr") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
