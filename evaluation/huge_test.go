package evaluation

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// TestReadLabelFileTooLarge: a label map is read whole, so one of 2^36
// voxels (a Zarr store holding its metadata alone) is refused naming it,
// not allocated.
func TestReadLabelFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.zarr")
	if _, err := zarr.CreateImage(path, zarr.ImageSpec{Shape: [3]int{4096, 4096, 4096}, Chunks: [3]int{64, 64, 64}, DType: "uint8", Spacing: [3]float64{1, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := ReadLabelFile(path)
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadLabelFile: %v, want ErrTooLarge naming %s", err, path)
	}
}
