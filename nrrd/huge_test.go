package nrrd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestHugeGzip: a gzip NRRD whose header says 7×65536×65536 voxels (2^34,
// past 2^31) opens; a region near its start decodes only the stream's
// prefix, as for a small file; a region near its end, which would decode
// 3·10^10 samples from the start, is refused naming the file and saying
// to store the volume raw.
func TestHugeGzip(t *testing.T) {
	gz := volumetest.MustRead(t, "testdata/uint8_gzip.nrrd")
	small, err := Open("testdata/uint8_gzip.nrrd")
	if err != nil {
		t.Fatal(err)
	}
	first := [][]float32{make([]float32, 7)}
	row := volume.Box{Hi: [3]int{1, 1, 7}}
	if err := small.ReadRegion(row, first); err != nil {
		t.Fatal(err)
	}
	small.Close()

	path := filepath.Join(t.TempDir(), "a.nrrd")
	if err := os.WriteFile(path, replace(t, gz, "sizes: 7 6 5", "sizes: 7 65536 65536"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h := f.Header(); h.Shape != [3]int{65536, 65536, 7} {
		t.Fatalf("shape %v", h.Shape)
	}
	got := [][]float32{make([]float32, 7)}
	if err := f.ReadRegion(row, got); err != nil {
		t.Fatal(err)
	}
	for i := range got[0] {
		if got[0][i] != first[0][i] {
			t.Fatalf("voxel %d: %g, the small file's %g", i, got[0][i], first[0][i])
		}
	}
	far := volume.Box{Lo: [3]int{65535, 65535, 0}, Hi: [3]int{65536, 65536, 7}}
	err = f.ReadRegion(far, [][]float32{make([]float32, 7)})
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "raw") {
		t.Errorf("far region: %v, want ErrTooLarge naming %s", err, path)
	}
}

// TestHugeRaw: a raw detached NRRD of 2^33 voxels opens, and regions past
// 2^31 and 2^32 voxels read the bytes stored there.
func TestHugeRaw(t *testing.T) {
	dir := t.TempDir()
	hdr := filepath.Join(dir, "huge.nhdr")
	if err := os.WriteFile(hdr, []byte("NRRD0004\ntype: uint8\ndimension: 3\nsizes: 65536 65536 2\nencoding: raw\ndata file: huge.raw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	volumetest.HugeRaw(t, Open, hdr, filepath.Join(dir, "huge.raw"))
}
