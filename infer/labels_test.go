package infer

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
)

// TestCheckOutput: a prediction's output is refused, with the reason,
// when it is not a NIfTI name, is one of the input's files (by name, by
// another spelling, through a link, or as the other member of a pair), is
// a directory, or lies in a directory that cannot be written; a good name
// passes, its missing directory made, nothing left in it.
func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "img.nii.gz")
	hdr, img := filepath.Join(dir, "pair.hdr"), filepath.Join(dir, "pair.img")
	for _, p := range []string{in, hdr, img} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.nii.gz")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.Mkdir(filepath.Join(dir, "folder.nii.gz"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out    string
		inputs []string
		want   string
	}{
		{filepath.Join(dir, "labels.png"), []string{in}, "not a label file name"},
		{filepath.Join(dir, "labels"), []string{in}, "not a label file name"},
		{in, []string{in}, "the same file as the input"},
		{"./img.nii.gz", []string{in}, "the same file as the input"},
		{in, []string{link}, "the same file as the input"},
		{link, []string{filepath.Join(dir, "other.nii.gz"), in}, "the same file as the input"},
		{filepath.Join(dir, "pair.img"), []string{hdr}, "the same file as the input"},
		{filepath.Join(dir, "pair.hdr"), []string{img}, "the same file as the input"},
		{filepath.Join(dir, "folder.nii.gz"), []string{in}, "is a directory"},
	} {
		err := CheckOutput(c.out, c.inputs)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.out) {
			t.Errorf("CheckOutput(%s, %v) = %v, want an error naming it: %s", c.out, c.inputs, err, c.want)
		}
	}
	good := filepath.Join(dir, "preds", "img_pred.nii.gz")
	if err := CheckOutput(good, []string{in}); err != nil {
		t.Fatalf("a good output: %v", err)
	}
	if names := testutil.DirNames(t, filepath.Dir(good)); len(names) != 0 {
		t.Errorf("checking left %v in %s", names, filepath.Dir(good))
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(ro, "p.nii.gz")
		if err := CheckOutput(out, []string{in}); err == nil || !strings.Contains(err.Error(), "cannot write in "+ro) {
			t.Errorf("output in a read-only folder: %v", err)
		}
	}
}

// TestPredictFileChecksOutputFirst: PredictFile refuses a bad output
// before it reads the input (which here does not even exist) or runs the
// model (here none).
func TestPredictFileChecksOutputFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.nii.gz")
	for _, out := range []string{filepath.Join(dir, "labels.png"), missing} {
		err := (&Model{}).PredictFile(context.Background(), []string{missing}, out, config.Default().Validation)
		if err == nil || !strings.Contains(err.Error(), "predict: output "+out) {
			t.Errorf("PredictFile to %s: %v, want the output refused first", out, err)
		}
	}
	if names := testutil.DirNames(t, dir); !slices.Equal(names, nil) {
		t.Errorf("left %v", names)
	}
}

// TestPredictionsFollowTheUmask: a prediction and validate's summary get
// the umask's permissions, so the colleague who asked for them can open
// them (predictions were 0600).
func TestPredictionsFollowTheUmask(t *testing.T) {
	testutil.Umask(t, 0o022)
	dir := t.TempDir()
	ref := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz")
	h, err := nifti.ReadHeader(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLabels(filepath.Join(dir, "pred.nii.gz"), ref, make([]uint8, h.NumVoxels())); err != nil {
		t.Fatal(err)
	}
	if err := Summarise(2, nil, false, nil).Write(filepath.Join(dir, "summary.json")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"pred.nii.gz", "summary.json"} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644 under umask 022", n, fi.Mode().Perm())
		}
	}
}

// TestWriteLabelsOfOtherFormats: labels on the grid of a NIfTI, NRRD or
// MetaImage reference are written in any format voxtrain writes with the
// reference's shape and voxel-to-world affine (RAS+, as package volume
// reads it; TIFF keeps the voxel size only), so viewers overlay them on
// the image.
func TestWriteLabelsOfOtherFormats(t *testing.T) {
	demo := filepath.Join(testutil.DemoDir(t), "imagesTr", "hippocampus_001.nii.gz")
	for _, ref := range []string{"../nrrd/testdata/labels_uint8.nrrd", "../metaimage/testdata/labels_uint8.mha", demo} {
		f, err := volume.Open(ref)
		if err != nil {
			t.Fatal(err)
		}
		g := f.Header()
		f.Close()
		n := g.Shape[0] * g.Shape[1] * g.Shape[2]
		labels := make([]uint8, n)
		for i := range labels {
			labels[i] = uint8(i % 3)
		}
		out := filepath.Join(t.TempDir(), "pred.nii.gz")
		if err := WriteLabels(out, ref, labels); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		h, vals, err := nifti.ReadFloat32(out)
		if err != nil {
			t.Fatal(err)
		}
		if h.Datatype != nifti.Uint8 {
			t.Errorf("%s: written datatype %v, want uint8", ref, h.Datatype)
		}
		for i, v := range vals {
			if uint8(v) != labels[i] {
				t.Fatalf("%s: voxel %d is %v, want %d", ref, i, v, labels[i])
			}
		}
		// Every format voxtrain writes keeps the grid and the labels.
		for _, name := range []string{"pred.nii.gz", "pred.nrrd", "pred.nhdr", "pred.mha", "pred.mhd", "pred.tif"} {
			out := filepath.Join(t.TempDir(), name)
			if err := WriteLabels(out, ref, labels); err != nil {
				t.Fatalf("%s → %s: %v", ref, name, err)
			}
			back, err := volume.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			bh := back.Header()
			got := make([]uint8, n)
			err = back.ReadLabels(volume.Whole(bh.Shape), got)
			back.Close()
			if err != nil {
				t.Fatal(err)
			}
			if bh.Shape != g.Shape || !slices.Equal(got, labels) {
				t.Errorf("%s → %s: shape %v, want %v; labels equal: %v", ref, name, bh.Shape, g.Shape, slices.Equal(got, labels))
			}
			for r := range 3 {
				for c := range 3 {
					want := g.Affine[r][c]
					if name == "pred.tif" { // TIFF keeps the voxel size only: each column's length
						want = 0
						if r == c {
							want = math.Hypot(math.Hypot(g.Affine[0][c], g.Affine[1][c]), g.Affine[2][c])
						}
					}
					if d := bh.Affine[r][c] - want; d > 1e-5 || d < -1e-5 {
						t.Fatalf("%s → %s: affine %v, the reference's %v", ref, name, bh.Affine, g.Affine)
					}
				}
				if d := bh.Affine[r][3] - g.Affine[r][3]; name != "pred.tif" && (d > 1e-5 || d < -1e-5) {
					t.Fatalf("%s → %s: origin %v, the reference's %v", ref, name, bh.Affine, g.Affine)
				}
			}
		}
	}
}

// A prediction's every file is checked against every file its inputs
// are read from: a detached header's data file, a .tif's nnU-Net spacing
// file; none may be overwritten.
func TestCheckOutputWrittenFiles(t *testing.T) {
	dir := t.TempDir()
	// An input header img.nhdr whose data file is case.raw.gz: -o
	// case.nhdr would write case.raw.gz.
	nhdr := "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 2 2 2\nencoding: gzip\ndata file: case.raw.gz\n"
	mhd := "ObjectType = Image\nNDims = 3\nDimSize = 2 2 2\nElementType = MET_UCHAR\nElementDataFile = case.zraw\n"
	for name, text := range map[string]string{"img.nhdr": nhdr, "img.mhd": mhd, "c_0000.tif": "", "c.json": `{"spacing": [1, 1, 1]}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for out, in := range map[string]string{"case.nhdr": "img.nhdr", "case.mhd": "img.mhd", "c.tif": "c_0000.tif"} {
		err := CheckOutput(filepath.Join(dir, out), []string{filepath.Join(dir, in)})
		if err == nil || !strings.Contains(err.Error(), "the same file as the input") || !strings.Contains(err.Error(), "a file "+filepath.Join(dir, in)+" is read from") {
			t.Errorf("CheckOutput(%s) with input %s: %v", out, in, err)
		}
	}
	for out, in := range map[string]string{"other.nhdr": "img.nhdr", "other.mhd": "img.mhd", "d.tif": "c_0000.tif"} {
		if err := CheckOutput(filepath.Join(dir, out), []string{filepath.Join(dir, in)}); err != nil {
			t.Errorf("CheckOutput(%s) with input %s: %v", out, in, err)
		}
	}
}
