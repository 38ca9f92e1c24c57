package nifti

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// writeVolume writes a (x, y, z[, t]) image of random int16 values (or
// class indices 0..4 when labels) and returns its path and voxels in file
// order.
func writeVolume(t *testing.T, name string, shape []int, dt Datatype, labels bool) (string, []float32) {
	t.Helper()
	h, err := NewHeader(shape, dt)
	if err != nil {
		t.Fatal(err)
	}
	h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 0.5, 0.75, 2
	n := 1
	for _, s := range shape {
		n *= s
	}
	r := rand.New(rand.NewPCG(1, uint64(n)))
	vals := make([]float32, n)
	for i := range vals {
		if labels {
			vals[i] = float32(r.IntN(5))
		} else {
			vals[i] = float32(r.IntN(2000) - 1000)
		}
	}
	p := filepath.Join(t.TempDir(), name)
	if err := WriteFloat32(p, h, vals); err != nil {
		t.Fatal(err)
	}
	return p, vals
}

// crop is the plain reference: box of channel c of a (D, H, W) volume.
func crop(vals []float32, shape [3]int, c int, box volume.Box) []float32 {
	vox := shape[0] * shape[1] * shape[2]
	var out []float32
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				out = append(out, vals[c*vox+(z*shape[1]+y)*shape[2]+x])
			}
		}
	}
	return out
}

func TestVolumeRegionsMatchAWholeRead(t *testing.T) {
	shape := [3]int{7, 5, 6} // (D, H, W) = (z, y, x)
	boxes := []volume.Box{volume.Whole(shape), {Hi: [3]int{3, 5, 6}}, {Lo: [3]int{2, 1, 0}, Hi: [3]int{6, 4, 5}}, {Lo: [3]int{6, 4, 5}, Hi: [3]int{7, 5, 6}}}
	for _, name := range []string{"a.nii", "a.nii.gz", "a.hdr.gz"} {
		for _, channels := range []int{1, 3} {
			dims := []int{6, 5, 7}
			if channels > 1 {
				dims = append(dims, channels)
			}
			p, vals := writeVolume(t, name, dims, Int16, false)
			for _, box := range boxes {
				f, err := volume.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				h := f.Header()
				if h.Shape != shape || h.Channels != channels || h.Spacing != [3]float64{2, 0.75, 0.5} {
					t.Fatalf("%s: header %+v", name, h)
				}
				dst := make([][]float32, channels)
				for c := range dst {
					dst[c] = make([]float32, box.Voxels())
				}
				if err := f.ReadRegion(box, dst); err != nil {
					t.Fatalf("%s %d channels %v: %v", name, channels, box, err)
				}
				f.Close()
				for c := range dst {
					if !slices.Equal(dst[c], crop(vals, shape, c, box)) {
						t.Fatalf("%s %d channels, box %v, channel %d differs from the whole read's crop", name, channels, box, c)
					}
				}
			}
		}
	}
}

func TestVolumeLabels(t *testing.T) {
	shape := [3]int{4, 3, 5}
	for _, dt := range []Datatype{Uint8, Int16, Float32} {
		p, vals := writeVolume(t, "l.nii.gz", []int{5, 3, 4}, dt, true)
		for _, box := range []volume.Box{volume.Whole(shape), {Hi: [3]int{2, 3, 5}}, {Lo: [3]int{1, 1, 1}, Hi: [3]int{3, 3, 4}}} {
			f, err := volume.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]uint8, box.Voxels())
			if err := f.ReadLabels(box, got); err != nil {
				t.Fatalf("%v %v: %v", dt, box, err)
			}
			f.Close()
			for i, w := range crop(vals, shape, 0, box) {
				if got[i] != uint8(w) {
					t.Fatalf("%v box %v: label %d is %d, want %v", dt, box, i, got[i], w)
				}
			}
		}
	}
	// Not class indices: an error naming the file and the voxel.
	h, _ := NewHeader([]int{2, 2, 2}, Float32)
	bad := filepath.Join(t.TempDir(), "bad.nii")
	WriteFloat32(bad, h, []float32{0, 1, 2, 0.5, 0, 0, 0, 0})
	f, err := volume.Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = f.ReadLabels(volume.Whole([3]int{2, 2, 2}), make([]uint8, 8))
	if err == nil || !strings.Contains(err.Error(), "bad.nii") || !strings.Contains(err.Error(), "voxel 3") {
		t.Errorf("non-integer label: %v", err)
	}
}

func TestVolumeRejectsBadRegions(t *testing.T) {
	p, _ := writeVolume(t, "a.nii", []int{4, 4, 4}, Int16, false)
	f, err := volume.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.ReadRegion(volume.Box{Hi: [3]int{5, 4, 4}}, [][]float32{make([]float32, 80)}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("box past the volume: %v", err)
	}
	if err := f.ReadRegion(volume.Whole([3]int{4, 4, 4}), [][]float32{make([]float32, 10)}); err == nil {
		t.Error("short destination accepted")
	}
	if _, err := volume.Open(filepath.Join(t.TempDir(), "x.mha")); err == nil || !strings.Contains(err.Error(), "nifti") {
		t.Errorf("a name no format reads: %v", err)
	}
}
