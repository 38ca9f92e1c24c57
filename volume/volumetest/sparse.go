package volumetest

import (
	"os"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// SparseFile creates path as a file of size bytes that holds nothing but
// the given bytes at their offsets (a sparse file: a raw volume of 2^33
// voxels costs no disk), for tests of offsets past 2^31.
func SparseFile(t testing.TB, path string, size int64, at map[int64][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range at {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// HugeRaw is the check of a raw volume past 2^31 voxels: open opens
// header, a 2 × 65536 × 65536 uint8 volume (2^33 voxels) whose voxels
// live in the sparse file data; its header's shape is read, and regions
// at offsets past 2^31 and 2^32 and at its last voxel read the bytes
// written there — nothing decodes the whole volume.
func HugeRaw(t *testing.T, open func(string) (volume.File, error), header, data string) {
	t.Helper()
	const d, h, w = 2, 65536, 65536
	at := func(z, y, x int) int64 { return (int64(z)*h+int64(y))*w + int64(x) }
	SparseFile(t, data, at(d-1, h-1, w-1)+1, map[int64][]byte{
		at(0, 40000, 3):       {201},
		at(1, 0, 5):           {202},
		at(d-1, h-1, w-1):     {203},
		at(d-1, h-1, w-1) - 1: {204},
	})
	f, err := open(header)
	if err != nil {
		t.Fatalf("%s: %v", header, err)
	}
	defer f.Close()
	if s := f.Header().Shape; s != [3]int{d, h, w} {
		t.Fatalf("%s: shape %v, want %v", header, s, [3]int{d, h, w})
	}
	for _, c := range []struct {
		box  volume.Box
		want map[int]float32 // index in the box → value; others 0
	}{
		{volume.Box{Lo: [3]int{0, 40000, 0}, Hi: [3]int{1, 40001, 8}}, map[int]float32{3: 201}},
		{volume.Box{Lo: [3]int{1, 0, 4}, Hi: [3]int{2, 2, 7}}, map[int]float32{1: 202}},
		{volume.Box{Lo: [3]int{0, h - 2, w - 3}, Hi: [3]int{d, h, w}}, map[int]float32{10: 204, 11: 203}},
	} {
		dst := [][]float32{make([]float32, c.box.Voxels())}
		if err := f.ReadRegion(c.box, dst); err != nil {
			t.Fatalf("%s: region %v: %v", header, c.box, err)
		}
		for i, v := range dst[0] {
			if v != c.want[i] {
				t.Errorf("%s: region %v element %d = %g, want %g", header, c.box, i, v, c.want[i])
			}
		}
	}
}
