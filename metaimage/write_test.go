package metaimage

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// TestWriteLabelsRoundTrip: a label map written through volume.WriteLabels
// (the registered writer) as .mha and as .mhd reads back through
// volume.Open with the same shape, spacing, oblique affine and labels.
// MetaIO states no unit: a header in a known length unit is written in
// millimetres, one with no unit or an unknown one as its numbers are.
func TestWriteLabelsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		unit  string
		scale float64 // of the numbers read (millimetres) to those written
	}{
		{"millimeter", 1},
		{"micrometer", 1e-3},
		{"centimeter", 10},
		{"", 1},
		{"furlong", 1},
	} {
		for _, ext := range []string{".mha", ".mhd"} {
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
			if got.Shape != h.Shape || got.Channels != 1 || got.Unit != "" {
				t.Errorf("%s: shape %v × %d unit %q, want %v × 1 and no unit", path, got.Shape, got.Channels, got.Unit, h.Shape)
			}
			for i := range 3 {
				if !near(got.Spacing[i], h.Spacing[i]*tc.scale) {
					t.Errorf("%s: spacing %v, want %v × %g", path, got.Spacing, h.Spacing, tc.scale)
				}
			}
			for r := range 3 {
				for c := range 4 {
					if !near(got.Affine[r][c], h.Affine[r][c]*tc.scale) {
						t.Errorf("%s: affine\n%v, want\n%v × %g", path, got.Affine, h.Affine, tc.scale)
					}
				}
			}
			if _, l := volumetest.ReadLabels(t, path); !slices.Equal(l, labels) {
				t.Errorf("%s: labels read back differ", path)
			}
		}
	}
}

// TestWriteLabelsFlipped: an affine with a flipped, permuted axis (a
// determinant below zero) and a sheared one round-trip too, and the
// orientation is derived from the direction written.
func TestWriteLabelsFlipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.mha")
	h := volume.Header{Shape: [3]int{2, 3, 4}, Affine: volume.Affine{
		{0, 0, -3, 5}, // RAS x ← −z: LPS L ← z
		{0.5, 0.2, 0, -1},
		{0, -2, 0, 7},
		{0, 0, 0, 1},
	}}
	if err := WriteLabels(path, h, volumetest.PatternLabels(h.Shape)); err != nil {
		t.Fatal(err)
	}
	f, err := volume.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Header()
	f.Close()
	for r := range 4 {
		for c := range 4 {
			if !near(got.Affine[r][c], h.Affine[r][c]) {
				t.Fatalf("affine\n%v, want\n%v", got.Affine, h.Affine)
			}
		}
	}
	if want := [3]float64{3, math.Sqrt(0.2*0.2 + 4), 0.5}; got.Spacing != want {
		t.Errorf("spacing %v, want %v", got.Spacing, want)
	}
	// MetaIO names the side an axis comes from: x runs RAS +y (towards
	// anterior: from P), y mostly RAS −z (towards inferior: from S), z
	// RAS −x (towards left: from R).
	fields := map[string]string{}
	for _, kv := range headerLines(t, path) {
		fields[kv[0]] = kv[1]
	}
	if fields["AnatomicalOrientation"] != "PSR" {
		t.Errorf("AnatomicalOrientation %s, want PSR", fields["AnatomicalOrientation"])
	}
}

// TestWriteLabelsReplaces: writing over existing files replaces them
// whole (a smaller volume leaves nothing of the larger one), both files
// of a .mhd pair, and leaves no temporary file behind.
func TestWriteLabelsReplaces(t *testing.T) {
	dir := t.TempDir()
	big, small := volumetest.ObliqueHeader("millimeter", 1), volumetest.ObliqueHeader("millimeter", 2)
	small.Shape = [3]int{2, 3, 4}
	for _, n := range []string{"a.mha", "a.mhd"} {
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
		if got := f.Header(); got.Shape != small.Shape || !near(got.Affine[2][3], small.Affine[2][3]) {
			t.Errorf("%s: header %+v after the rewrite, want %+v", n, got, small)
		}
		f.Close()
		if _, got := volumetest.ReadLabels(t, path); !slices.Equal(got, want) {
			t.Errorf("%s: labels after the rewrite differ", n)
		}
	}
	if names := testutil.DirNames(t, dir); !slices.Equal(names, []string{"a.mha", "a.mhd", "a.zraw"}) {
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
	flat.Affine[0][2], flat.Affine[1][2], flat.Affine[2][2] = 0, 0, 0
	for _, tc := range []struct {
		path   string
		h      volume.Header
		labels []uint8
		want   string
	}{
		{filepath.Join(dir, "missing", "a.mha"), h, volumetest.PatternLabels(h.Shape), "no such file"},
		{filepath.Join(dir, "missing", "a.mhd"), h, volumetest.PatternLabels(h.Shape), "data file a.zraw"},
		{filepath.Join(dir, "short.mha"), h, volumetest.PatternLabels(h.Shape)[1:], "209 labels for a 5×6×7 grid"},
		{filepath.Join(dir, "flat.mhd"), flat, volumetest.PatternLabels(h.Shape), "voxel axis 2"},
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

// The registry knows MetaImage's endings and the files a write creates,
// so predictions are named and checked against their inputs.
func TestRegisteredWriter(t *testing.T) {
	if !volume.Writes("x.MHA") || !volume.Writes("x.mhd") || volume.FileEnding("case_0000.mha") != ".mha" {
		t.Error("MetaImage names are not registered as written")
	}
	if got := volume.WrittenFiles(filepath.Join("d", "x.mhd")); !slices.Equal(got, []string{filepath.Join("d", "x.mhd"), filepath.Join("d", "x.zraw")}) {
		t.Errorf("WrittenFiles(x.mhd) = %q", got)
	}
	if got := volume.WrittenFiles("x.mha"); !slices.Equal(got, []string{"x.mha"}) {
		t.Errorf("WrittenFiles(x.mha) = %q", got)
	}
}
