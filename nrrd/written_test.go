package nrrd

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

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

var update = flag.Bool("update", false, "rewrite testdata/written (then rerun testdata/written/read_written.py)")

// writtenDir holds label maps WriteLabels wrote and what reference tools
// read from them (expected.json, made by read_written.py).
const writtenDir = "testdata/written"

// TestWritten: (a) today's writer writes, for the fixtures' geometry and
// labels, the header fields and voxels committed in testdata/written
// (not the gzip bytes, which a compressor version may change); (b) what
// SimpleITK and pynrrd read from the committed files is that geometry
// (LPS turned into RAS+), those voxels, and the unit; and the header
// ITK's writer writes for the same image has the fields and values ours
// has (ours adds only "space units").
func TestWritten(t *testing.T) {
	h, labels := volumetest.ObliqueHeader("millimeter", 1), volumetest.PatternLabels([3]int{5, 6, 7})
	names := []string{"labels.nrrd", "labels.nhdr"}
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
		committed, fresh := filepath.Join(writtenDir, n), filepath.Join(dir, n)
		cf, ff := headerFields(t, committed), headerFields(t, fresh)
		if !equalFields(cf, ff) {
			t.Errorf("%s: header fields\n%v, committed\n%v (rerun with -update and read_written.py if the change is meant)", n, ff, cf)
		}
		if _, got := volumetest.ReadLabels(t, committed); string(got) != string(labels) {
			t.Errorf("%s: committed voxels differ from the labels written", n)
		}
	}

	var doc struct {
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
			Pynrrd struct {
				Tool   string `json:"tool"`
				Shape  [3]int `json:"shape"`
				Dtype  string `json:"dtype"`
				SHA256 string `json:"sha256"`
				Fields struct {
					Space      string        `json:"space"`
					Sizes      [3]int        `json:"sizes"`
					Directions [3][3]float64 `json:"space directions"`
					Origin     [3]float64    `json:"space origin"`
					Units      []string      `json:"space units"`
					Encoding   string        `json:"encoding"`
				} `json:"fields"`
			} `json:"pynrrd"`
			ITKHeader [][2]string `json:"itk_header"`
		} `json:"files"`
	}
	b, err := os.ReadFile(filepath.Join(writtenDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) != len(names) {
		t.Fatalf("expected.json lists %d files, want %d", len(doc.Files), len(names))
	}
	sum := sha256.Sum256(labels)
	want := hex.EncodeToString(sum[:])
	lpsToRAS := [3]float64{-1, -1, 1}
	for _, f := range doc.Files {
		s, p := f.Sitk, f.Pynrrd
		if s.Size != [3]int{7, 6, 5} || s.Dtype != "uint8" || s.SHA256 != want {
			t.Errorf("%s: %s read size %v %s sha256 %s, want [7 6 5] uint8 %s", f.File, s.Tool, s.Size, s.Dtype, s.SHA256, want)
		}
		for k := range 3 {
			if !near(s.Spacing[k], h.Spacing[2-k]) {
				t.Errorf("%s: %s spacing %v, header's (x, y, z) %v", f.File, s.Tool, s.Spacing, [3]float64{h.Spacing[2], h.Spacing[1], h.Spacing[0]})
			}
			for r := range 3 {
				// ITK: LPS world = origin + direction · diag(spacing) · index.
				if got := lpsToRAS[r] * s.Direction[3*r+k] * s.Spacing[k]; !near(got, h.Affine[r][k]) {
					t.Errorf("%s: %s direction %v spacing %v gives RAS affine[%d][%d] %g, want %g", f.File, s.Tool, s.Direction, s.Spacing, r, k, got, h.Affine[r][k])
				}
				if got := lpsToRAS[r] * p.Fields.Directions[k][r]; !near(got, h.Affine[r][k]) {
					t.Errorf("%s: %s space directions %v give RAS affine[%d][%d] %g, want %g", f.File, p.Tool, p.Fields.Directions, r, k, got, h.Affine[r][k])
				}
			}
		}
		for r := range 3 {
			if !near(lpsToRAS[r]*s.Origin[r], h.Affine[r][3]) || !near(lpsToRAS[r]*p.Fields.Origin[r], h.Affine[r][3]) {
				t.Errorf("%s: origin %v (%s), %v (%s), want RAS %g at row %d", f.File, s.Origin, s.Tool, p.Fields.Origin, p.Tool, h.Affine[r][3], r)
			}
		}
		pf := p.Fields
		if p.Shape != [3]int{5, 6, 7} || p.Dtype != "uint8" || p.SHA256 != want || pf.Sizes != [3]int{7, 6, 5} ||
			pf.Space != "left-posterior-superior" || pf.Encoding != "gzip" {
			t.Errorf("%s: %s read shape %v %s sha256 %s sizes %v space %q encoding %q", f.File, p.Tool, p.Shape, p.Dtype, p.SHA256, pf.Sizes, pf.Space, pf.Encoding)
		}
		if len(pf.Units) != 3 || volume.NormalizeUnit(pf.Units[0]) != h.Unit || pf.Units[1] != pf.Units[0] || pf.Units[2] != pf.Units[0] {
			t.Errorf("%s: %s space units %q, want %s on each axis", f.File, p.Tool, pf.Units, h.Unit)
		}
		checkITKHeader(t, f.File, f.ITKHeader, headerFields(t, filepath.Join(writtenDir, f.File)))
	}
}

// checkITKHeader compares the fields ITK's NRRD writer wrote for the same
// image with ours: each of ITK's is ours (types by what they name,
// vectors by value), and ours adds no field but "space units".
func checkITKHeader(t *testing.T, name string, itk [][2]string, ours map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, kv := range itk {
		k, v := strings.ToLower(kv[0]), kv[1]
		seen[k] = true
		o, ok := ours[k]
		switch {
		case !ok:
			t.Errorf("%s: ITK writes %q, we do not", name, k)
		case k == "type":
			if types[o] != types[v] {
				t.Errorf("%s: type %q, ITK's %q", name, o, v)
			}
		case k == "space directions" || k == "space origin":
			if !nearVectors(o, v) {
				t.Errorf("%s: %s %q, ITK's %q", name, k, o, v)
			}
		case o != v:
			t.Errorf("%s: %s %q, ITK's %q", name, k, o, v)
		}
	}
	for k := range ours {
		if !seen[k] && k != "space units" {
			t.Errorf("%s: we write %q, ITK does not", name, k)
		}
	}
}

// headerFields reads the header of the NRRD file at path.
func headerFields(t *testing.T, path string) map[string]string {
	t.Helper()
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	return h.Fields
}

func equalFields(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// nearVectors compares two lists of NRRD vectors by value.
func nearVectors(a, b string) bool {
	va, vb := splitVectors(a), splitVectors(b)
	if len(va) != len(vb) {
		return false
	}
	for i := range va {
		x, err1 := vector(va[i])
		y, err2 := vector(vb[i])
		if err1 != nil || err2 != nil || len(x) != len(y) {
			return false
		}
		for j := range x {
			if !near(x[j], y[j]) {
				return false
			}
		}
	}
	return true
}

// near compares two coordinates to 1e-12 of their magnitude (at least
// 1e-12): the tools recompute directions from our numbers.
func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b))
}
