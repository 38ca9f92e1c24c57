package metaimage

import (
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestConformance reads every fixture written by SimpleITK and checks
// shape, channels, spacing, the RAS+ affine and the voxels against what
// SimpleITK read (testdata/expected.json, made by make_fixtures.py).
func TestConformance(t *testing.T) {
	volumetest.Conformance(t, "testdata", Open, 24)
}
