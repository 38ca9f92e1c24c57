package data

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/nifti"
)

// TestPrefixReaderMatchesNIfTIReader holds the prefix reader to
// nifti.ReadFloat32 for every datatype it handles, both byte orders,
// scaled and not, compressed and not.
func TestPrefixReaderMatchesNIfTIReader(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	shape := []int{7, 5, 6} // x, y, z: 6 planes of 5×7
	dts := []nifti.Datatype{nifti.Uint8, nifti.Int8, nifti.Int16, nifti.Uint16, nifti.Int32, nifti.Uint32, nifti.Float32, nifti.Float64}
	var pr prefixReader
	for _, dt := range dts {
		for _, big := range []bool{false, true} {
			for _, scaled := range []bool{false, true} {
				for _, ext := range []string{".nii", ".nii.gz"} {
					name := fmt.Sprintf("%v-%v-%v%s", dt, big, scaled, ext)
					h, err := nifti.NewHeader(shape, dt)
					if err != nil {
						t.Fatal(err)
					}
					if big {
						h.ByteOrder = binary.BigEndian
					}
					if scaled {
						h.SclSlope, h.SclInter = 0.5, -3
					}
					data := make([]float32, 7*5*6)
					for i := range data {
						v := float32(r.IntN(100))
						if scaled {
							v = v*0.5 - 3
						}
						data[i] = v
					}
					path := filepath.Join(dir, name)
					if err := nifti.WriteFloat32(path, h, data); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					hr, full, err := nifti.ReadFloat32(path)
					if err != nil {
						t.Fatal(err)
					}
					if !prefixOK(hr) {
						t.Fatalf("%s: prefix reader declines", name)
					}
					for planes := 1; planes <= 6; planes++ {
						got := make([]float32, planes*35)
						if err := pr.read(path, hr, got); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for i := range got {
							if got[i] != full[i] {
								t.Fatalf("%s, %d planes: voxel %d = %v, want %v", name, planes, i, got[i], full[i])
							}
						}
					}
				}
			}
		}
	}
}
