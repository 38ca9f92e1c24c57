package zarr

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// fixture is one store of testdata/expected_v*.json, as zarr-python read
// it (testdata/make_fixtures.py).
type fixture struct {
	Path     string     `json:"path"`
	Shape    [3]int     `json:"shape"`
	Channels int        `json:"channels"`
	Dtype    string     `json:"dtype"`
	Spacing  [3]float64 `json:"spacing"`
	Origin   [3]float64 `json:"origin"`
	SHA256   string     `json:"sha256"`
	Labels   *bool      `json:"labels"`
	Levels   int        `json:"levels"`
	Error    string     `json:"error"`
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	var all []fixture
	for _, v := range []string{"v2", "v3"} {
		b, err := os.ReadFile(filepath.Join("testdata", "expected_"+v+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Fixtures []fixture `json:"fixtures"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		all = append(all, doc.Fixtures...)
	}
	if len(all) < 80 {
		t.Fatalf("%d fixtures, want the full set", len(all))
	}
	return all
}

// voxelSHA is the fixtures' checksum: float32 little-endian voxels,
// channels then (D, H, W) C order, NaN as 0x7fc00000.
func voxelSHA(chans [][]float32) string {
	h := sha256.New()
	var b [4]byte
	for _, c := range chans {
		for _, v := range c {
			u := math.Float32bits(v)
			if v != v {
				u = 0x7fc00000
			}
			binary.LittleEndian.PutUint32(b[:], u)
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func readAll(t *testing.T, f volume.File, box volume.Box) [][]float32 {
	t.Helper()
	dst := make([][]float32, f.Header().Channels)
	for c := range dst {
		dst[c] = make([]float32, box.Voxels())
	}
	if err := f.ReadRegion(box, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestConformanceWithZarrPython opens every fixture written by
// zarr-python 2 and 3, ome-zarr-py and zarr's N5Store and checks the
// header and the voxels against what Python read; then region reads
// against the whole read, and label reads where the data are labels.
func TestConformanceWithZarrPython(t *testing.T) {
	for _, want := range loadFixtures(t) {
		t.Run(want.Path, func(t *testing.T) {
			path := filepath.Join("testdata", filepath.FromSlash(want.Path))
			if !volume.Readable(path) {
				t.Fatalf("volume.Readable(%s) = false", path)
			}
			f, err := volume.Open(path)
			if want.Error != "" {
				if err == nil || !strings.Contains(err.Error(), want.Error) {
					t.Fatalf("Open: err = %v, want one about %q", err, want.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h := f.Header()
			if h.Shape != want.Shape || h.Channels != want.Channels {
				t.Fatalf("shape %v × %d channels, want %v × %d", h.Shape, h.Channels, want.Shape, want.Channels)
			}
			if h.Spacing != want.Spacing {
				t.Errorf("spacing %v, want %v", h.Spacing, want.Spacing)
			}
			for k := range 3 {
				// Affine rows are x, y, z = W, H, D.
				if h.Affine[2-k][3] != want.Origin[k] || h.Affine[2-k][2-k] != want.Spacing[k] {
					t.Errorf("affine %v, want spacing %v origin %v", h.Affine, want.Spacing, want.Origin)
				}
			}
			whole := readAll(t, f, volume.Whole(h.Shape))
			if got := voxelSHA(whole); got != want.SHA256 {
				t.Fatalf("voxel sha256 %s, want %s (first voxels %v)", got, want.SHA256, whole[0][:min(8, len(whole[0]))])
			}
			for _, box := range testBoxes(h.Shape) {
				got := readAll(t, f, box)
				for c := range got {
					if d := diffBox(got[c], whole[c], h.Shape, box); d != "" {
						t.Fatalf("region %v channel %d: %s", box, c, d)
					}
				}
			}
			if want.Labels != nil && *want.Labels {
				lbl := make([]uint8, volume.Whole(h.Shape).Voxels())
				if err := f.ReadLabels(volume.Whole(h.Shape), lbl); err != nil {
					t.Fatal(err)
				}
				for i, v := range lbl {
					if float32(v) != whole[0][i] {
						t.Fatalf("label %d = %d, voxel %g", i, v, whole[0][i])
					}
				}
			} else if want.Labels != nil && h.Channels == 1 {
				err := f.ReadLabels(volume.Whole(h.Shape), make([]uint8, volume.Whole(h.Shape).Voxels()))
				if err == nil || !strings.Contains(err.Error(), "class index") {
					t.Fatalf("ReadLabels of non-labels: err = %v", err)
				}
			}
			if want.Levels > 0 {
				ls, err := Levels(path)
				if err != nil || len(ls) != want.Levels {
					t.Fatalf("Levels = %v, %v; want %d", ls, err, want.Levels)
				}
			}
		})
	}
}

// testBoxes are regions across chunk edges, a voxel, a plane, the corner.
func testBoxes(s [3]int) []volume.Box {
	bs := []volume.Box{
		{Lo: [3]int{0, 0, 0}, Hi: [3]int{1, 1, 1}},
		{Lo: [3]int{s[0] / 2, 0, 0}, Hi: [3]int{s[0]/2 + 1, s[1], s[2]}},
		{Lo: [3]int{max(0, s[0]-3), max(0, s[1]-5), max(0, s[2]-6)}, Hi: s},
		{Lo: [3]int{s[0] / 3, s[1] / 3, s[2] / 4}, Hi: [3]int{s[0] - s[0]/4, s[1] - 1, s[2] - s[2]/3}},
	}
	return bs
}

// diffBox compares a region read with the whole read's box.
func diffBox(got, whole []float32, shape [3]int, box volume.Box) string {
	i := 0
	for z := box.Lo[0]; z < box.Hi[0]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[2]; x < box.Hi[2]; x++ {
				w := whole[(z*shape[1]+y)*shape[2]+x]
				if g := got[i]; g != w && !(g != g && w != w) {
					return fmt.Sprintf("voxel (%d,%d,%d) = %g, the whole read has %g", z, y, x, g, w)
				}
				i++
			}
		}
	}
	return ""
}
