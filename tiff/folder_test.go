package tiff

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

func TestNaturalCompare(t *testing.T) {
	// Each list is in natural order.
	for _, want := range [][]string{
		{"slice1.tif", "slice2.tif", "slice10.tif", "slice11.tif"},
		{"00.tif", "01.tif", "9.tif", "10.tif", "64.tif"},
		{"a1b2", "a1b10", "a2b1"},
		{"07", "7", "8"}, // equal values: plain order decides
		{"a", "a1", "ab", "b"},
		{"x99999999999999999999998", "x99999999999999999999999", "x100000000000000000000000"},
	} {
		got := slices.Clone(want)
		slices.Reverse(got)
		slices.SortFunc(got, naturalCompare)
		if !slices.Equal(got, want) {
			t.Errorf("natural order %q, want %q", got, want)
		}
	}
}

// TestFolderMatch: a folder is a TIFF volume when it lists a TIFF file;
// one without is no format's, and volume.Open says so.
func TestFolderMatch(t *testing.T) {
	if !Match("testdata/slices_uint16") || volume.FormatName("testdata/slices_uint16") != "tiff" {
		t.Error("the folder of slices is not matched")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.nii"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if Match(dir) || Match("https://example.org/slices") {
		t.Error("matched a folder without TIFF files, or a URL")
	}
	if _, err := volume.Open(dir); err == nil || !strings.Contains(err.Error(), "no volume format") {
		t.Errorf("volume.Open of a folder without TIFF files: %v", err)
	}
}

// TestFolderLazy: a region reads only the slices it spans — a slice
// outside it may be broken — and a broken slice inside it is an error
// naming that file.
func TestFolderLazy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("testdata/slices_uint16")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b := volumetest.MustRead(t, filepath.Join("testdata/slices_uint16", e.Name()))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := volume.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	whole, err := volumetest.ReadWhole(f)
	if err != nil {
		t.Fatal(err)
	}
	// The last plane (slice11.tif, after slice10.tif) loses its pixels.
	last := filepath.Join(dir, "slice11.tif")
	if err := os.Truncate(last, 200); err != nil {
		t.Fatal(err)
	}
	sh := f.Header().Shape
	box := volume.Box{Lo: [3]int{2, 3, 4}, Hi: [3]int{sh[0] - 1, 15, 30}}
	dst := [][]float32{make([]float32, box.Voxels())}
	if err := f.ReadRegion(box, dst); err != nil {
		t.Fatalf("a region short of the broken slice: %v", err)
	}
	i := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				if dst[0][i] != whole[0][(z*sh[1]+y)*sh[2]+x] {
					t.Fatalf("voxel (%d,%d,%d) = %v, whole read %v", z, y, x, dst[0][i], whole[0][(z*sh[1]+y)*sh[2]+x])
				}
				i++
			}
		}
	}
	box.Hi[0] = sh[0]
	err = f.ReadRegion(box, [][]float32{make([]float32, box.Voxels())})
	if err == nil || !strings.Contains(err.Error(), last) {
		t.Errorf("a region over the broken slice: %v, want an error naming %s", err, last)
	}
}

// TestFolderMalformed: a slice unlike the first (shape, sample type,
// spacing, several planes), a file that is not a TIFF, and a folder with
// no slice are errors naming the odd file.
func TestFolderMalformed(t *testing.T) {
	u16 := volumetest.MustRead(t, "testdata/slices_uint16/slice1.tif")
	f32 := volumetest.MustRead(t, "testdata/slices_imagej_float32/00.tif")
	f32Spacing := bytes.Replace(f32, []byte("spacing=2.0"), []byte("spacing=3.0"), 1)
	if bytes.Equal(f32, f32Spacing) {
		t.Fatal("no spacing=2.0 in the ImageJ slice")
	}
	cases := []volumetest.Broken{
		{Name: "other shape", Files: map[string][]byte{"s/1.tif": u16, "s/2.tif": setTag(t, u16, tImageWidth, 30), "s/10.tif": u16},
			Open: "s", Want: []string{"2.tif", "20×30", "20×35"}},
		{Name: "other type", Files: map[string][]byte{"s/1.tif": u16, "s/2.tif": f32}, Open: "s", Want: []string{"2.tif", "float32", "uint16"}},
		{Name: "other spacing", Files: map[string][]byte{"s/a1.tif": f32, "s/a2.tif": f32Spacing}, Open: "s", Want: []string{"a2.tif", "spacing"}},
		{Name: "a stack among slices", Files: map[string][]byte{"s/1.tif": u16, "s/2.tif": volumetest.MustRead(t, "testdata/stack_uint16.tif")},
			Open: "s", Want: []string{"2.tif", "5 planes"}},
		{Name: "not a TIFF", Files: map[string][]byte{"s/1.tif": u16, "s/notes.txt": []byte("hi")}, Open: "s", Want: []string{"notes.txt", "not a TIFF slice"}},
		{Name: "a broken slice", Files: map[string][]byte{"s/1.tif": u16, "s/2.tif": u16[:6]}, Open: "s", Want: []string{"2.tif", "header"}},
		{Name: "no slice", Files: map[string][]byte{"s/.DS_Store": []byte("x")}, Open: "s", Want: []string{"no TIFF slice"}},
	}
	volumetest.CheckBroken(t, Open, cases)
}
