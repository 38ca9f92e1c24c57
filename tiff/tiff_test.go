package tiff

import (
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestConformance reads every fixture written by tifffile (stacks of each
// type, BigTIFF, strips, tiles, every codec and predictor, ImageJ and OME
// metadata, channels, folders of 2-D slices) and checks shape, channels,
// spacing, affine and the voxels against what tifffile read
// (testdata/expected.json).
func TestConformance(t *testing.T) {
	volumetest.Conformance(t, "testdata", Open, 33)
}
