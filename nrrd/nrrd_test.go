package nrrd

import (
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestConformance reads every fixture written by pynrrd and SimpleITK and
// checks shape, channels, spacing, the RAS+ affine and the voxels against
// what the tool read (testdata/expected.json, made by make_fixtures.py).
func TestConformance(t *testing.T) {
	volumetest.Conformance(t, "testdata", Open, 17)
}
