package metaimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume/volumetest"
)

var update = flag.Bool("update", false, "rewrite testdata/written (then rerun testdata/written/read_written.py)")

// writtenDir holds label maps WriteLabels wrote and what SimpleITK read
// from them (expected.json, made by read_written.py).
const writtenDir = "testdata/written"

// writtenDoc is expected.json.
type writtenDoc struct {
	Files []struct {
		File string `json:"file"`
		Sitk struct {
			Tool      string     `json:"tool"`
			Size      [3]int     `json:"size"`
			Spacing   [3]float64 `json:"spacing"`
			Origin    [3]float64 `json:"origin"`
			Direction [9]float64 `json:"direction"`
			Dtype     string     `json:"dtype"`
			SHA256    string     `json:"sha256"`
		} `json:"sitk"`
		ITKHeader [][2]string `json:"itk_header"`
	} `json:"files"`
	Orientations []struct {
		Direction   [9]float64 `json:"direction"`
		Orientation string     `json:"orientation"`
	} `json:"orientations"`
}

func loadWritten(t *testing.T) writtenDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(writtenDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc writtenDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestWritten: (a) today's writer writes, for the fixtures' geometry (in
// micrometres) and labels, the header fields and voxels committed in
// testdata/written (CompressedDataSize and the zlib bytes aside, which a
// compressor version may change); (b) what SimpleITK read from the
// committed files is that geometry in millimetres (LPS turned into RAS+)
// and those voxels; and the header ITK's own writer writes for the same
// image has our keys, in our order, with our values.
func TestWritten(t *testing.T) {
	h, labels := volumetest.ObliqueHeader("micrometer", 1000), volumetest.PatternLabels([3]int{5, 6, 7})
	mm, err := h.InUnit("millimeter")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"labels.mha", "labels.mhd"}
	dir := t.TempDir()
	if *update {
		dir = writtenDir
	}
	for _, n := range names {
		if err := WriteLabels(filepath.Join(dir, n), h, labels); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		committed, fresh := headerLines(t, filepath.Join(writtenDir, n)), headerLines(t, filepath.Join(dir, n))
		if !sameLines(committed, fresh, "CompressedDataSize") {
			t.Errorf("%s: header\n%v, committed\n%v (rerun with -update and read_written.py if the change is meant)", n, fresh, committed)
		}
		if _, got := volumetest.ReadLabels(t, filepath.Join(writtenDir, n)); string(got) != string(labels) {
			t.Errorf("%s: committed voxels differ from the labels written", n)
		}
	}

	doc := loadWritten(t)
	if len(doc.Files) != len(names) {
		t.Fatalf("expected.json lists %d files, want %d", len(doc.Files), len(names))
	}
	sum := sha256.Sum256(labels)
	want := hex.EncodeToString(sum[:])
	lpsToRAS := [3]float64{-1, -1, 1}
	for _, f := range doc.Files {
		s := f.Sitk
		if s.Size != [3]int{7, 6, 5} || s.Dtype != "uint8" || s.SHA256 != want {
			t.Errorf("%s: %s read size %v %s sha256 %s, want [7 6 5] uint8 %s", f.File, s.Tool, s.Size, s.Dtype, s.SHA256, want)
		}
		for k := range 3 {
			if !near(s.Spacing[k], mm.Spacing[2-k]) {
				t.Errorf("%s: %s spacing %v, header's (x, y, z) in mm %v", f.File, s.Tool, s.Spacing, [3]float64{mm.Spacing[2], mm.Spacing[1], mm.Spacing[0]})
			}
			for r := range 3 {
				// ITK: LPS world = origin + direction · diag(spacing) · index.
				if got := lpsToRAS[r] * s.Direction[3*r+k] * s.Spacing[k]; !near(got, mm.Affine[r][k]) {
					t.Errorf("%s: %s direction %v spacing %v give RAS affine[%d][%d] %g, want %g", f.File, s.Tool, s.Direction, s.Spacing, r, k, got, mm.Affine[r][k])
				}
			}
		}
		for r := range 3 {
			if !near(lpsToRAS[r]*s.Origin[r], mm.Affine[r][3]) {
				t.Errorf("%s: %s origin %v, want RAS %g at row %d", f.File, s.Tool, s.Origin, mm.Affine[r][3], r)
			}
		}
		checkITKHeader(t, f.File, f.ITKHeader, headerLines(t, filepath.Join(writtenDir, f.File)))
	}
}

// checkITKHeader compares the header ITK's writer wrote for the same
// image with ours: the same keys in the same order, numbers by value,
// CompressedDataSize aside.
func checkITKHeader(t *testing.T, name string, itk, ours [][2]string) {
	t.Helper()
	if len(itk) != len(ours) {
		t.Errorf("%s: %d header lines, ITK writes %d:\n%v\n%v", name, len(ours), len(itk), ours, itk)
		return
	}
	for i, kv := range itk {
		k, v, o := kv[0], kv[1], ours[i]
		switch {
		case o[0] != k:
			t.Errorf("%s: line %d is %s, ITK's %s", name, i, o[0], k)
		case k == "CompressedDataSize":
		case k == "TransformMatrix" || k == "Offset" || k == "ElementSpacing" || k == "CenterOfRotation":
			if !nearNumbers(o[1], v) {
				t.Errorf("%s: %s = %s, ITK's %s", name, k, o[1], v)
			}
		case o[1] != v:
			t.Errorf("%s: %s = %s, ITK's %s", name, k, o[1], v)
		}
	}
}

// headerLines reads the MetaImage header at path as key/value pairs in
// order.
func headerLines(t *testing.T, path string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: header line %q", path, line)
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		if out[len(out)-1][0] == "ElementDataFile" {
			return out
		}
	}
	t.Fatalf("%s: no ElementDataFile", path)
	return nil
}

// sameLines compares two headers line by line, the values of key aside.
func sameLines(a, b [][2]string, key string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i][0] != b[i][0] || (a[i][0] != key && a[i][1] != b[i][1]) {
			return false
		}
	}
	return true
}

// nearNumbers compares two lists of space-separated numbers by value.
func nearNumbers(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != len(fb) {
		return false
	}
	x, err1 := numbers(a, len(fa))
	y, err2 := numbers(b, len(fb))
	if err1 != nil || err2 != nil {
		return false
	}
	for i := range x {
		if !near(x[i], y[i]) {
			return false
		}
	}
	return true
}

// near compares two coordinates to 1e-12 of their magnitude (at least
// 1e-12): the tools recompute directions from our numbers.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b))
}
