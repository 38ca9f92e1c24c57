package metaimage

import (
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// TestNoUnit: MetaIO has no unit field, so a MetaImage states none,
// whatever its ElementSpacing.
func TestNoUnit(t *testing.T) {
	for _, f := range []string{"float32.mha", "uint16.mhd"} {
		v, err := volume.Open(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if u := v.Header().Unit; u != "" {
			t.Errorf("%s: unit %q, want none", f, u)
		}
		v.Close()
	}
}
