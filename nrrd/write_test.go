package nrrd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestWriteLabelsRoundTrip: a label map written through volume.WriteLabels
// (the registered writer) as .nrrd and as .nhdr reads back through
// volume.Open with the same shape, spacing, oblique affine (exactly: the
// affine's columns are the space directions) and labels; a length unit
// reads back as it was, none or one that is no length as none.
func TestWriteLabelsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ unit, want string }{
		{"millimeter", "millimeter"},
		{"micrometer", "micrometer"},
		{"yoctometer", "yoctometer"}, // no symbol: written by its name
		{"", ""},
		{"furlong", ""}, // no length unit volume knows: not written
	} {
		for _, ext := range []string{".nrrd", ".nhdr"} {
			h := volumetest.ObliqueHeader(tc.unit, 1)
			h.Shape = [3]int{3, 4, 9}
			labels := volumetest.PatternLabels(h.Shape)
			path := filepath.Join(dir, "case_"+tc.unit+ext)
			if !volume.Writes(path) {
				t.Fatalf("volume.Writes(%s) = false", path)
			}
			if err := volume.WriteLabels(path, h, labels); err != nil {
				t.Fatal(err)
			}
			f, err := volume.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Header()
			f.Close()
			if got.Shape != h.Shape || got.Channels != 1 || got.Spacing != h.Spacing || got.Affine != h.Affine || got.Unit != tc.want {
				t.Errorf("%s: read\n%+v, wrote\n%+v (unit %q)", path, got, h, tc.want)
			}
			if _, l := volumetest.ReadLabels(t, path); !slices.Equal(l, labels) {
				t.Errorf("%s: labels read back differ", path)
			}
		}
	}
}

// TestWriteLabelsDetached: a .nhdr names its data file STEM.raw.gz
// relatively, and the data file is a gzip stream with no header of its
// own; the attached file's header is the same but for "data file".
func TestWriteLabelsDetached(t *testing.T) {
	dir := t.TempDir()
	h, labels := volumetest.ObliqueHeader("millimeter", 1), volumetest.PatternLabels([3]int{5, 6, 7})
	for _, n := range []string{"a.nrrd", "b.NHDR"} {
		if err := WriteLabels(filepath.Join(dir, n), h, labels); err != nil {
			t.Fatal(err)
		}
	}
	att, det := headerFields(t, filepath.Join(dir, "a.nrrd")), headerFields(t, filepath.Join(dir, "b.NHDR"))
	if det["data file"] != "b.raw.gz" {
		t.Errorf("data file %q, want b.raw.gz", det["data file"])
	}
	delete(det, "data file")
	if !equalFields(att, det) {
		t.Errorf("detached header\n%v, attached\n%v", det, att)
	}
	for k, v := range map[string]string{"type": "uint8", "encoding": "gzip", "dimension": "3", "sizes": "7 6 5",
		"space": "left-posterior-superior", "kinds": "domain domain domain", "space units": `"mm" "mm" "mm"`} {
		if att[k] != v {
			t.Errorf("%s: %q, want %q", k, att[k], v)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "b.raw.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("b.raw.gz starts % x, want a gzip stream", b[:min(len(b), 4)])
	}
	if names := testutil.DirNames(t, dir); !slices.Equal(names, []string{"a.nrrd", "b.NHDR", "b.raw.gz"}) {
		t.Errorf("directory holds %v", names)
	}
}

// TestWriteLabelsReplaces: writing over existing files replaces them
// whole (a smaller volume leaves nothing of the larger one), both files
// of a .nhdr pair, and leaves no temporary file behind.
func TestWriteLabelsReplaces(t *testing.T) {
	dir := t.TempDir()
	big, small := volumetest.ObliqueHeader("millimeter", 1), volumetest.ObliqueHeader("", 2)
	small.Shape = [3]int{2, 3, 4}
	for _, n := range []string{"a.nrrd", "a.nhdr"} {
		path := filepath.Join(dir, n)
		if err := WriteLabels(path, big, volumetest.PatternLabels(big.Shape)); err != nil {
			t.Fatal(err)
		}
		want := volumetest.PatternLabels(small.Shape)
		for i := range want {
			want[i] = 3 - want[i]
		}
		if err := WriteLabels(path, small, want); err != nil {
			t.Fatal(err)
		}
		f, err := volume.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Header(); got.Shape != small.Shape || got.Affine != small.Affine || got.Unit != "" {
			t.Errorf("%s: header %+v after the rewrite, want %+v", n, got, small)
		}
		f.Close()
		if _, got := volumetest.ReadLabels(t, path); !slices.Equal(got, want) {
			t.Errorf("%s: labels after the rewrite differ", n)
		}
	}
	if names := testutil.DirNames(t, dir); !slices.Equal(names, []string{"a.nhdr", "a.nrrd", "a.raw.gz"}) {
		t.Errorf("directory holds %v, want the two files and the data file only", names)
	}
}

// TestWriteLabelsErrors: a path in a missing directory, labels of the
// wrong count and an affine with a zero axis are errors naming the path,
// and nothing is left behind.
func TestWriteLabelsErrors(t *testing.T) {
	dir := t.TempDir()
	h := volumetest.ObliqueHeader("millimeter", 1)
	flat := h
	flat.Affine[0][1], flat.Affine[1][1], flat.Affine[2][1] = 0, 0, 0
	for _, tc := range []struct {
		path   string
		h      volume.Header
		labels []uint8
		want   string
	}{
		{filepath.Join(dir, "missing", "a.nrrd"), h, volumetest.PatternLabels(h.Shape), "no such file"},
		{filepath.Join(dir, "missing", "a.nhdr"), h, volumetest.PatternLabels(h.Shape), "data file a.raw.gz"},
		{filepath.Join(dir, "short.nrrd"), h, volumetest.PatternLabels(h.Shape)[1:], "209 labels for a 5×6×7 grid"},
		{filepath.Join(dir, "flat.nhdr"), flat, volumetest.PatternLabels(h.Shape), "voxel axis 1"},
	} {
		err := WriteLabels(tc.path, tc.h, tc.labels)
		if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming it and saying %q", tc.path, err, tc.want)
		}
	}
	if names := testutil.DirNames(t, dir); len(names) != 0 {
		t.Errorf("failed writes left %v", names)
	}
}

// The registry knows NRRD's endings and the files a write creates, so
// predictions are named and checked against their inputs.
func TestRegisteredWriter(t *testing.T) {
	if !volume.Writes("x.NRRD") || !volume.Writes("x.nhdr") || volume.FileEnding("case_0000.nrrd") != ".nrrd" {
		t.Error("NRRD names are not registered as written")
	}
	if got := volume.WrittenFiles(filepath.Join("d", "x.nhdr")); !slices.Equal(got, []string{filepath.Join("d", "x.nhdr"), filepath.Join("d", "x.raw.gz")}) {
		t.Errorf("WrittenFiles(x.nhdr) = %q", got)
	}
	if got := volume.WrittenFiles("x.nrrd"); !slices.Equal(got, []string{"x.nrrd"}) {
		t.Errorf("WrittenFiles(x.nrrd) = %q", got)
	}
}
