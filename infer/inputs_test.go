package infer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/data"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// writeImage writes a small float32 NIfTI of shape (x, y, z[, t]) at path.
func writeImage(t *testing.T, path string, shape ...int) {
	t.Helper()
	h, err := nifti.NewHeader(shape, nifti.Float32)
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	for _, s := range shape {
		n *= s
	}
	if err := nifti.WriteFloat32(path, h, make([]float32, n)); err != nil {
		t.Fatal(err)
	}
}

// files makes a folder holding the named images (NIfTI names: shape
// 4×5×6; any other name gets {}) and returns it.
func files(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if strings.HasSuffix(n, ".json") || !strings.Contains(n, ".nii") && !strings.HasSuffix(n, ".hdr") && !strings.HasSuffix(n, ".img") {
			// Names matter here, not contents (FindCases opens nothing).
			if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeImage(t, filepath.Join(dir, n), 4, 5, 6)
	}
	return dir
}

// caseSummary renders cases as "ID:file,file(ext)" for comparison.
func caseSummary(cases []InputCase) []string {
	var out []string
	for _, c := range cases {
		var fs []string
		for _, f := range c.Images {
			fs = append(fs, filepath.Base(f))
		}
		out = append(out, c.ID+":"+strings.Join(fs, ",")+"("+c.Ext+")")
	}
	return out
}

// TestFindCasesGroups: the nnU-Net layout is grouped by case in channel
// order, one-file-per-case folders (MSD imagesTs, or numbered cases of a
// one-channel model) give a case a file, lists of files are grouped the
// same way, and other names in a folder are skipped.
func TestFindCasesGroups(t *testing.T) {
	nn := files(t, "b_0001.nii.gz", "a_0000.nii.gz", "b_0000.nii.gz", "a_0001.nii.gz", "dataset.json", ".a_0002.nii.gz")
	for _, c := range []struct {
		what     string
		inputs   []string
		channels int
		want     []string
	}{
		{"two-channel nnU-Net folder", []string{nn}, 2, []string{"a:a_0000.nii.gz,a_0001.nii.gz(.nii.gz)", "b:b_0000.nii.gz,b_0001.nii.gz(.nii.gz)"}},
		{"list of files", []string{filepath.Join(nn, "b_0001.nii.gz"), filepath.Join(nn, "b_0000.nii.gz")}, 2,
			[]string{"b:b_0000.nii.gz,b_0001.nii.gz(.nii.gz)"}},
		{"one-channel nnU-Net folder", []string{files(t, "x_0000.nii", "y_0000.nii.gz")}, 1, []string{"x:x_0000.nii(.nii)", "y:y_0000.nii.gz(.nii.gz)"}},
		{"MSD imagesTs", []string{files(t, "hippocampus_267.nii.gz", "hippocampus_002.nii.gz")}, 1,
			[]string{"hippocampus_002:hippocampus_002.nii.gz(.nii.gz)", "hippocampus_267:hippocampus_267.nii.gz(.nii.gz)"}},
		{"numbered cases without _0000", []string{files(t, "case_0001.nii.gz", "case_0002.nii.gz")}, 1,
			[]string{"case_0001:case_0001.nii.gz(.nii.gz)", "case_0002:case_0002.nii.gz(.nii.gz)"}},
		{"4D files of a two-channel model", []string{files(t, "brats_001.nii.gz")}, 2, []string{"brats_001:brats_001.nii.gz(.nii.gz)"}},
		{"analyze pair", []string{files(t, "p.hdr", "p.img")}, 1, []string{"p:p.hdr(.hdr)"}},
		// nnU-Net datasets with file_ending .nrrd, .mha, .tif: predicted
		// as NIfTI; a detached header's data file is not a case.
		{"other formats", []string{files(t, "a_0000.nrrd", "b_0000.mha", "c_0000.tif", "d.nhdr", "d.raw.gz", "e.mhd", "e.raw", "f.tiff")}, 1,
			[]string{"a:a_0000.nrrd(.nrrd)", "b:b_0000.mha(.mha)", "c:c_0000.tif(.tif)", "d:d.nhdr(.nhdr)", "e:e.mhd(.mhd)", "f:f.tiff(.tiff)"}},
		{"two-channel .nrrd folder", []string{files(t, "a_0001.nrrd", "a_0000.nrrd")}, 2, []string{"a:a_0000.nrrd,a_0001.nrrd(.nrrd)"}},
	} {
		got, err := FindCases(c.inputs, c.channels)
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		if s := caseSummary(got); !slices.Equal(s, c.want) {
			t.Errorf("%s: cases %v, want %v", c.what, s, c.want)
		}
	}
}

// TestFindCasesErrors: a case without one of its channel files, one with
// more channel files than the model takes, a file not in the layout of
// the others, two inputs of one case ID, and a missing or empty input are
// errors naming the case or file.
func TestFindCasesErrors(t *testing.T) {
	missing := files(t, "a_0000.nii.gz", "a_0001.nii.gz", "b_0000.nii.gz")
	extra := files(t, "a_0000.nii.gz", "a_0001.nii.gz", "a_0002.nii.gz")
	mixed := files(t, "a_0000.nii.gz", "a_0001.nii.gz", "other.nii.gz")
	dup := files(t, "c.nii.gz", "c.nii")
	for _, c := range []struct {
		inputs   []string
		channels int
		want     string
	}{
		{[]string{missing}, 2, "case b (" + missing + "): no channel 0001 file b_0001.nii.gz; the model takes 2 channels"},
		{[]string{extra}, 2, "case a: 3 channel files (" + filepath.Join(extra, "a_0002.nii.gz") + " is channel 0002), the model takes 2 channels"},
		{[]string{extra}, 1, "case a: 3 channel files"},
		{[]string{mixed}, 2, "input " + filepath.Join(mixed, "other.nii.gz") + ": not named CASE_XXXX"},
		{[]string{dup}, 1, "are both case c"},
		{[]string{filepath.Join(missing, "nope.nii.gz")}, 1, "nope.nii.gz"},
		{[]string{t.TempDir()}, 1, "no image files"},
		{[]string{filepath.Join(missing, "..", filepath.Base(missing), "a_0000.nii.gz"), filepath.Join(missing, "a_0000.nii.gz")}, 1, "both channel 0000 of case a"},
	} {
		_, err := FindCases(c.inputs, c.channels)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FindCases(%v, %d): %v, want an error with %q", c.inputs, c.channels, err, c.want)
		}
	}
}

// TestCheckCase: the files' headers must hold the model's channels on one
// grid; an unreadable file is an error naming it.
func TestCheckCase(t *testing.T) {
	dir := t.TempDir()
	one, other, four := filepath.Join(dir, "a.nii.gz"), filepath.Join(dir, "b.nii.gz"), filepath.Join(dir, "c.nii.gz")
	writeImage(t, one, 4, 5, 6)
	writeImage(t, other, 4, 5, 7)
	writeImage(t, four, 4, 5, 6, 4)
	bad := filepath.Join(dir, "bad.nii.gz")
	if err := os.WriteFile(bad, []byte("not a nifti file"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := func(files ...string) (cs InputCase) { cs.ID, cs.Images = "k", files; return }
	if err := CheckCase(c(one).Case, 1); err != nil {
		t.Error(err)
	}
	if err := CheckCase(c(four).Case, 4); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		files    []string
		channels int
		want     string
	}{
		{[]string{one}, 2, "case k: " + one + " holds 1 channels, the model takes 2"},
		{[]string{four}, 1, "holds 4 channels, the model takes 1"},
		{[]string{one, one, one}, 2, "its 3 files hold 3 channels, the model takes 2"},
		{[]string{one, other}, 2, other + " has shape"},
		{[]string{one, bad}, 2, bad},
	} {
		if err := CheckCase(c(tc.files...).Case, tc.channels); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckCase(%v, %d): %v, want %q", tc.files, tc.channels, err, tc.want)
		}
	}
}

// TestCheckCaseTooLarge: a case is predicted whole, so an input of 2^36
// voxels (a store holding its metadata alone) is refused by CheckCase,
// before any prediction, naming the file and blockwise prediction.
func TestCheckCaseTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.ome.zarr")
	if _, err := zarr.CreateImage(path, zarr.ImageSpec{Shape: [3]int{4096, 4096, 4096}, Chunks: [3]int{64, 64, 64}, DType: "uint8", Spacing: [3]float64{1, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	err := CheckCase(data.Case{ID: "huge", Images: []string{path}}, 1)
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "-o OUT.zarr") {
		t.Errorf("CheckCase: %v, want ErrTooLarge naming %s and blockwise prediction", err, path)
	}
}
