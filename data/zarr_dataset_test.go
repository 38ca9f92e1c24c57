package data

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
)

// writeZarr writes a one-chunk, uncompressed Zarr v2 array of shape
// (D, H, W) as dir: float32 values, or uint8 when labels.
func writeZarr(t *testing.T, dir string, shape [3]int, at func(i int) float64, labels bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := shape[0] * shape[1] * shape[2]
	dtype, size := "<f4", 4
	if labels {
		dtype, size = "|u1", 1
	}
	meta, _ := json.Marshal(map[string]any{"zarr_format": 2, "shape": shape, "chunks": shape, "dtype": dtype,
		"compressor": nil, "fill_value": 0, "order": "C", "filters": nil})
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n*size)
	for i := 0; i < n; i++ {
		if labels {
			b[i] = uint8(at(i))
		} else {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(at(i))))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "0.0.0"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestZarrStoresAsCases: an nnU-Net layout whose cases are Zarr stores
// (folders: imagesTr/CASE_0000.zarr, labelsTr/CASE.zarr, file_ending
// ".zarr") opens, passes Verify and reads its voxels; a folder no format
// reads is still refused as a case file.
func TestZarrStoresAsCases(t *testing.T) {
	dir := t.TempDir()
	shape := [3]int{6, 7, 8}
	ids := []string{"a", "b", "c"}
	for k, id := range ids {
		writeZarr(t, filepath.Join(dir, "imagesTr", id+"_0000.zarr"), shape, func(i int) float64 { return float64(i%17) + float64(k) }, false)
		writeZarr(t, filepath.Join(dir, "labelsTr", id+".zarr"), shape, func(i int) float64 { return float64(i % 3) }, true)
	}
	meta := `{"channel_names":{"0":"EM"},"labels":{"background":0,"a":1,"b":2},"numTraining":3,"file_ending":".zarr"}`
	if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1)})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 3 || ds.Cases[1].ID != "b" || ds.Cases[1].Label != filepath.Join(dir, "labelsTr", "b.zarr") {
		t.Fatalf("cases %+v", ds.Cases)
	}
	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{4, 4, 4}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	v, err := ReadCase(cfg, ds.Cases[2], 1)
	if err != nil {
		t.Fatal(err)
	}
	if v.Shape != shape || v.Label[5] != 2 {
		t.Fatalf("case c: shape %v, label[5] %d", v.Shape, v.Label[5])
	}

	// An empty folder named like a store is an error naming it, before
	// the first step.
	empty := filepath.Join(dir, "labelsTr", "a.zarr")
	os.RemoveAll(empty)
	os.MkdirAll(empty, 0o755)
	err = Verify(context.Background(), cfg, VerifyOptions{NumClasses: 3, Patch: [3]int{4, 4, 4}, Logger: discard()})
	if err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("an empty store: %v", err)
	}
}
