package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// Volumes past 2^31 voxels (EM volumes of 10^10–10^11 voxels) through the
// commands: the store says 4096³ (2^36) voxels and holds the chunks of
// its far 32³ corner only; the rest reads as 0.

var hugeStoreShape = [3]int{4096, 4096, 4096}

// hugeCorner is the corner's first voxel.
var hugeCorner = [3]int{4064, 4064, 4064}

// cornerValues are the 32³ corner's voxels: a blob plus noise, so the
// tiny network's labels vary.
func cornerValues() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 0, 32*32*32)
	for z := range 32 {
		for y := range 32 {
			for x := range 32 {
				dz, dy, dx := float64(z-16), float64(y-10), float64(x-16)
				v = append(v, float32(100*math.Exp(-(dz*dz+dy*dy+dx*dx)/120)+20*r.Float64()))
			}
		}
	}
	return v
}

// writeStore writes an OME-Zarr image of shape (spacing (2, 0.8, 0.8)
// µm, origin (10, −5, 3)) whose box at lo holds cornerValues.
func writeStore(t *testing.T, path string, shape, lo [3]int) {
	t.Helper()
	w, err := zarr.CreateImage(path, zarr.ImageSpec{Name: "image", Shape: shape, Chunks: [3]int{16, 16, 16}, DType: "float32",
		Spacing: [3]float64{2, 0.8, 0.8}, Origin: [3]float64{10, -5, 3}, Unit: "micrometer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBlock(volume.Box{Lo: lo, Hi: [3]int{lo[0] + 32, lo[1] + 32, lo[2] + 32}}, cornerValues()); err != nil {
		t.Fatal(err)
	}
}

// TestInfoHugeStore: train info describes a 2^36-voxel store by its
// header and levels, and says why its voxels are not read (no checksum,
// no statistics) instead of failing or reading 256 GiB.
func TestInfoHugeStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.ome.zarr")
	writeStore(t, path, hugeStoreShape, hugeCorner)
	out, errb, err := runCmd(t, "info", "--json", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	var got struct {
		Shape   []int     `json:"shape"`
		Spacing []float64 `json:"spacing"`
		Unit    string    `json:"unit"`
		SHA     *string   `json:"float32_sha256"`
		Stats   *struct{} `json:"stats"`
		NotRead string    `json:"data_not_read"`
		Levels  []struct {
			Shape [3]int `json:"shape"`
		} `json:"levels"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Shape) != 3 || got.Shape[0] != 4096 || got.Shape[2] != 4096 || got.Spacing[0] != 0.8 || got.Unit != "micrometer" ||
		len(got.Levels) != 1 || got.Levels[0].Shape != hugeStoreShape {
		t.Errorf("info: %s", out)
	}
	if got.SHA != nil || got.Stats != nil || !strings.Contains(got.NotRead, "too large to decode") {
		t.Errorf("info of a store too large to read whole: %s, want no checksum or stats and data_not_read saying why", out)
	}
	out, _, err = runCmd(t, "info", path)
	if err != nil || !strings.Contains(out.String(), "not read: 4096×4096×4096 voxels") || strings.Contains(out.String(), "float32_sha256") {
		t.Errorf("info table: %v\n%s", err, out)
	}
}

// TestPredictHugeStore: train predict -o OUT.zarr --roi predicts the far
// corner of a 2^36-voxel store, reading only that region: its labels
// equal those of the same 32³ voxels given as a store of their own, and
// sit at the corner's origin.
func TestPredictHugeStore(t *testing.T) {
	dir := t.TempDir()
	huge, small := filepath.Join(dir, "huge.ome.zarr"), filepath.Join(dir, "small.ome.zarr")
	writeStore(t, huge, hugeStoreShape, hugeCorner)
	writeStore(t, small, [3]int{32, 32, 32}, [3]int{})
	ck := tinyCheckpoint(t, filepath.Join(dir, "runs"), 0, 1, nil)
	outHuge, outSmall := filepath.Join(dir, "huge_pred.ome.zarr"), filepath.Join(dir, "small_pred.ome.zarr")
	for _, args := range [][]string{
		{"-i", huge, "-o", outHuge, "--roi", "4064:,4064:,4064:"},
		{"-i", small, "-o", outSmall},
	} {
		o, errb, err := runCmd(t, append([]string{"predict", "--checkpoint", ck, "--block", "32", "--disable-tta", "--threads", "2"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s\n%s", args, err, o, errb)
		}
	}
	hh, got := readStore(t, outHuge)
	hs, want := readStore(t, outSmall)
	if hh.Shape != [3]int{32, 32, 32} || hs.Shape != hh.Shape {
		t.Fatalf("shapes %v and %v, want 32³", hh.Shape, hs.Shape)
	}
	classes := map[float32]bool{}
	for i := range want[0] {
		classes[want[0][i]] = true
		if got[0][i] != want[0][i] {
			t.Fatalf("voxel %d: label %v predicted in the huge store's corner, %v in the store of its voxels alone", i, got[0][i], want[0][i])
		}
	}
	if len(classes) < 2 {
		t.Errorf("every voxel has one label %v: the comparison shows nothing", classes)
	}
	// The corner's origin: the input's, plus 4064 voxels on every axis.
	if ox, oz := hh.Affine[0][3], hh.Affine[2][3]; math.Abs(ox-(3+0.8*4064)) > 1e-6 || math.Abs(oz-(10+2*4064)) > 1e-6 {
		t.Errorf("origin (x, z) = (%v, %v), want (%v, %v)", ox, oz, 3+0.8*4064, 10+2*4064)
	}

}
