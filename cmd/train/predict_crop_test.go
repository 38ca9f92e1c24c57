package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/npy"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
)

// TestPredictCroppedCasePastedBack: with data.crop_to_nonzero (and the
// masked z-score) a case is predicted inside its nonzero box and pasted
// back: the label file has the input's header, every voxel outside the
// box is background, and the probabilities there are (1, 0, 0).
func TestPredictCroppedCasePastedBack(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	ck := tinyCheckpoint(t, runs, 0, 5, func(c *config.Config) {
		c.Data.CropToNonzero = true
		c.Data.UseMaskForNorm = config.BoolList{true}
	})
	// A demo image inside a zero border of 6 voxels on every side.
	h, img, err := nifti.ReadFloat32(filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	const b = 6
	nx, ny, nz := int(h.Dim[1]), int(h.Dim[2]), int(h.Dim[3])
	X, Y, Z := nx+2*b, ny+2*b, nz+2*b
	padded := make([]float32, X*Y*Z)
	for z := 0; z < nz; z++ {
		for y := 0; y < ny; y++ {
			for x := 0; x < nx; x++ {
				v := img[(z*ny+y)*nx+x]
				if v == 0 {
					v = 1 // keep the box exactly the inner image
				}
				padded[((z+b)*Y+y+b)*X+x+b] = v
			}
		}
	}
	h.Dim[1], h.Dim[2], h.Dim[3] = int64(X), int64(Y), int64(Z)
	h.Datatype, h.Bitpix, h.SclSlope, h.SclInter = nifti.Float32, 32, 0, 0
	in := filepath.Join(t.TempDir(), "imagesTs")
	os.Mkdir(in, 0o755)
	src := filepath.Join(in, "padded_0000.nii.gz")
	if err := nifti.WriteFloat32(src, h, padded); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if o, errb, err := runCmd(t, "predict", "--checkpoint", ck, "-i", in, "-o", out, "--disable-tta", "--save-probabilities", "--threads", "2"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, errb)
	}
	oh, labels, err := nifti.ReadFloat32(filepath.Join(out, "padded.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if oh.Dim != h.Dim || oh.Pixdim != h.Pixdim {
		t.Fatalf("label dims %v pixdim %v, input %v %v", oh.Dim, oh.Pixdim, h.Dim, h.Pixdim)
	}
	raw, err := os.ReadFile(filepath.Join(out, "padded.npz"))
	if err != nil {
		t.Fatal(err)
	}
	arrs, err := npy.ReadNPZ(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	p := arrs["probabilities"]
	n := X * Y * Z
	fg := 0
	for z := 0; z < Z; z++ {
		for y := 0; y < Y; y++ {
			for x := 0; x < X; x++ {
				i := (z*Y+y)*X + x
				in := z >= b && z < b+nz && y >= b && y < b+ny && x >= b && x < b+nx
				if in {
					if labels[i] != 0 {
						fg++
					}
					continue
				}
				if labels[i] != 0 || p.Data[i] != 1 || p.Data[n+i] != 0 || p.Data[2*n+i] != 0 {
					t.Fatalf("voxel (%d,%d,%d) outside the box: label %v, probabilities %v %v %v", x, y, z, labels[i], p.Data[i], p.Data[n+i], p.Data[2*n+i])
				}
			}
		}
	}
	if fg == 0 {
		t.Error("no foreground predicted inside the box: the test cannot tell a paste from an empty map")
	}
	for i := 0; i < n; i++ {
		if s := p.Data[i] + p.Data[n+i] + p.Data[2*n+i]; math.Abs(float64(s)-1) > 1e-5 {
			t.Fatalf("probabilities at %d sum to %v", i, s)
		}
	}
}
