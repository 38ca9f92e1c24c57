package metaimage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestHugeRaw: a .mhd with a raw data file of 2^33 voxels opens, and
// regions past 2^31 and 2^32 voxels read the bytes stored there.
func TestHugeRaw(t *testing.T) {
	dir := t.TempDir()
	hdr := filepath.Join(dir, "huge.mhd")
	if err := os.WriteFile(hdr, []byte("ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\nDimSize = 65536 65536 2\nElementType = MET_UCHAR\nElementDataFile = huge.raw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	volumetest.HugeRaw(t, Open, hdr, filepath.Join(dir, "huge.raw"))
}
