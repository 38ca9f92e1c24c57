// Package volumetest holds the checks every volume format's tests run: a
// conformance test against what a reference tool read from each fixture
// (an expected.json beside the fixtures), and the reads of regions against
// a whole read.
package volumetest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// Expected is what a reference tool read from one fixture.
type Expected struct {
	File     string        `json:"file"`
	Tool     string        `json:"tool"`
	Shape    [3]int        `json:"shape"`
	Channels int           `json:"channels"`
	Spacing  [3]float64    `json:"spacing"`
	Affine   volume.Affine `json:"affine"`
	Dtype    string        `json:"dtype"`
	// SHA256 is of the voxels as float32 little-endian, (C, D, H, W).
	SHA256 string    `json:"sha256_f32le"`
	Sum    float64   `json:"sum"`
	First  []float64 `json:"first"`
}

// Load reads dir/expected.json ({"files": [...]}).
func Load(t testing.TB, dir string) []Expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files []Expected `json:"files"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Files
}

// ReadWhole reads every channel of the whole volume.
func ReadWhole(f volume.File) ([][]float32, error) {
	h := f.Header()
	box := volume.Whole(h.Shape)
	dst := make([][]float32, h.Channels)
	for c := range dst {
		dst[c] = make([]float32, box.Voxels())
	}
	return dst, f.ReadRegion(box, dst)
}

// Conformance opens every fixture listed in dir/expected.json with open
// (and through volume.Open when the format is registered) and compares
// every field, the voxels, and region reads against the whole; it fails if
// fewer than minFiles are listed.
func Conformance(t *testing.T, dir string, open func(string) (volume.File, error), minFiles int) {
	want := Load(t, dir)
	if len(want) < minFiles {
		t.Fatalf("%s/expected.json lists %d files, want at least %d", dir, len(want), minFiles)
	}
	for _, w := range want {
		t.Run(w.File, func(t *testing.T) {
			path := filepath.Join(dir, w.File)
			if !volume.Readable(path) {
				t.Errorf("volume.Readable(%s) = false", path)
			}
			f, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h := f.Header()
			if h.Shape != w.Shape || h.Channels != w.Channels {
				t.Errorf("shape %v × %d channels, want %v × %d (%s)", h.Shape, h.Channels, w.Shape, w.Channels, w.Tool)
			}
			for i := range 3 {
				if !close(h.Spacing[i], w.Spacing[i]) {
					t.Errorf("spacing %v, want %v (%s)", h.Spacing, w.Spacing, w.Tool)
					break
				}
			}
			for r := range 4 {
				for c := range 4 {
					if !close(h.Affine[r][c], w.Affine[r][c]) {
						t.Fatalf("affine\n%v, want\n%v (%s)", h.Affine, w.Affine, w.Tool)
					}
				}
			}
			all, err := ReadWhole(f)
			if err != nil {
				t.Fatal(err)
			}
			sum, first := Checksum(all)
			var s float64
			for _, ch := range all {
				for _, x := range ch {
					s += float64(x)
				}
			}
			if sum != w.SHA256 || !close(s, w.Sum) {
				t.Errorf("voxels: sha256 %s sum %g, want %s sum %g (%s)", sum, s, w.SHA256, w.Sum, w.Tool)
			}
			for i, x := range w.First {
				if i < len(first) && float64(first[i]) != x {
					t.Errorf("voxel %d = %v, want %v", i, first[i], x)
				}
			}
			Regions(t, f, all)
		})
	}
}

// Regions reads boxes of f (a corner voxel, planes from the first, an
// inner box, the far corner) and checks them against all, the whole
// volume read before; a one-channel file with integer voxels 0..255 is
// also read as labels.
func Regions(t *testing.T, f volume.File, all [][]float32) {
	t.Helper()
	sh := f.Header().Shape
	boxes := []volume.Box{
		{Hi: [3]int{1, 1, 1}},
		{Hi: [3]int{min(2, sh[0]), sh[1], sh[2]}},
		{Lo: [3]int{sh[0] / 3, sh[1] / 3, sh[2] / 3}, Hi: [3]int{max(sh[0]/3+1, sh[0]*2/3), max(sh[1]/3+1, sh[1]*2/3), max(sh[2]/3+1, sh[2]*2/3)}},
		{Lo: [3]int{sh[0] - 1, sh[1] - 1, 0}, Hi: sh},
	}
	labels := len(all) == 1
	for _, x := range all[0] {
		if x != float32(int(x)) || x < 0 || x > 255 {
			labels = false
			break
		}
	}
	for _, b := range boxes {
		sz := b.Size()
		dst := make([][]float32, len(all))
		for c := range dst {
			dst[c] = make([]float32, b.Voxels())
		}
		if err := f.ReadRegion(b, dst); err != nil {
			t.Fatalf("region %v: %v", b, err)
		}
		var lbl []uint8
		if labels {
			lbl = make([]uint8, b.Voxels())
			if err := f.ReadLabels(b, lbl); err != nil {
				t.Fatalf("labels %v: %v", b, err)
			}
		}
		i := 0
		for z := b.Lo[0]; z < b.Hi[0]; z++ {
			for y := b.Lo[1]; y < b.Hi[1]; y++ {
				for x := b.Lo[2]; x < b.Hi[2]; x++ {
					j := (z*sh[1]+y)*sh[2] + x
					for c := range all {
						if dst[c][i] != all[c][j] {
							t.Fatalf("region %v (size %v) channel %d voxel (%d,%d,%d) = %v, whole read has %v", b, sz, c, z, y, x, dst[c][i], all[c][j])
						}
					}
					if labels && float32(lbl[i]) != all[0][j] {
						t.Fatalf("labels %v voxel (%d,%d,%d) = %d, want %v", b, z, y, x, lbl[i], all[0][j])
					}
					i++
				}
			}
		}
	}
	if !labels && len(all) == 1 {
		if err := f.ReadLabels(volume.Whole(sh), make([]uint8, sh[0]*sh[1]*sh[2])); err == nil {
			t.Errorf("ReadLabels accepted voxels that are not class indices")
		}
	}
}

// Checksum is the SHA-256 of the channels as float32 little-endian, one
// after another, and the first voxels.
func Checksum(all [][]float32) (string, []float32) {
	h := sha256.New()
	var b [4]byte
	for _, ch := range all {
		for _, x := range ch {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil)), all[0][:min(5, len(all[0]))]
}

func close(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
