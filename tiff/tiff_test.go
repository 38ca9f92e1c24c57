package tiff

import (
	"fmt"
	"sync"
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

// TestConcurrentReads reads one open stack (zstd: the shared decoder) and
// one folder from several goroutines at once (run it with -race): every
// read equals the whole read made before.
func TestConcurrentReads(t *testing.T) {
	for _, path := range []string{"testdata/comp_zstd_uint16.tif", "testdata/comp_deflate_uint16.tif", "testdata/slices_imagej_float32"} {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		all, err := volumetest.ReadWhole(f)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := volumetest.Checksum(all)
		var wg sync.WaitGroup
		errs := make(chan error, 4*8)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					got, err := volumetest.ReadWhole(f)
					if err == nil {
						if sum, _ := volumetest.Checksum(got); sum != want {
							err = fmt.Errorf("%s: a concurrent read differs from the whole read", path)
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		f.Close()
	}
}
