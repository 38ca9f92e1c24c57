package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// writeOMEZarr writes an OME-Zarr image of shape, one value per voxel
// (uint8 when labels), at spacing 2 and origin.
func writeOMEZarr(t *testing.T, dir string, shape [3]int, origin [3]float64, labels bool, value func(z, y, x int) float32) {
	t.Helper()
	spec := zarr.ImageSpec{Shape: shape, Chunks: [3]int{8, 8, 8}, DType: "float32", Spacing: [3]float64{2, 2, 2}, Origin: origin, Compressor: "zlib"}
	if labels {
		spec.DType = "uint8"
	}
	w, err := zarr.CreateImage(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	n := shape[0] * shape[1] * shape[2]
	f, u := make([]float32, n), make([]uint8, n)
	i := 0
	for z := range shape[0] {
		for y := range shape[1] {
			for x := range shape[2] {
				f[i] = value(z, y, x)
				u[i] = uint8(f[i])
				i++
			}
		}
	}
	var src any = f
	if labels {
		src = u
	}
	if err := w.WriteBlock(volume.Whole(shape), src); err != nil {
		t.Fatal(err)
	}
}

// TestTrainOnManifest trains a few steps, with a crop held out for
// validation, on a manifest of label crops inside a larger raw Zarr
// volume: one placed by voxel offset, one by physical translation, one
// by its own OME origin. The first crop's labels hold only where its mask
// says (half of it), the rest reading as loss.ignore_label.
func TestTrainOnManifest(t *testing.T) {
	dir := t.TempDir()
	// The raw shows the classes it is labelled with (brighter where the
	// crops say mito), so a model can learn something.
	cls := func(z, y, x int) float32 {
		if (z/3+y/4+x/5)%3 == 0 {
			return 1
		}
		return 0
	}
	writeOMEZarr(t, filepath.Join(dir, "raw.zarr"), [3]int{32, 40, 48}, [3]float64{10, 0, 0}, false,
		func(z, y, x int) float32 { return 100*cls(z, y, x) + float32((z+y+x)%7) })
	crops := []struct {
		lo, shape [3]int
		origin    [3]float64
	}{
		{[3]int{4, 8, 8}, [3]int{12, 16, 16}, [3]float64{}},
		{[3]int{16, 20, 24}, [3]int{12, 16, 16}, [3]float64{}},
		{[3]int{2, 2, 30}, [3]int{12, 16, 16}, [3]float64{14, 4, 60}},
	}
	for k, c := range crops {
		writeOMEZarr(t, filepath.Join(dir, "crops", []string{"a", "b", "c"}[k]+".zarr"), c.shape, c.origin, true,
			func(z, y, x int) float32 { return cls(c.lo[0]+z, c.lo[1]+y, c.lo[2]+x) })
	}
	writeOMEZarr(t, filepath.Join(dir, "crops", "a_mask.zarr"), crops[0].shape, crops[0].origin, true,
		func(z, y, x int) float32 { return map[bool]float32{true: 1}[y >= 8] })
	manifest := `classes: {background: 0, mito: 1}
volumes:
  - raw: raw.zarr
    crops:
      - {label: crops/a.zarr, offset: [4, 8, 8], mask: crops/a_mask.zarr}
      - {label: crops/b.zarr, translation: [42, 40, 48]}
      - {label: crops/c.zarr}
`
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "run.yaml")
	err := os.WriteFile(cfgPath, []byte("experiment: crops\nseed: 3\ndata:\n  manifest: manifest.yaml\n  fold: 0\n  num_folds: 3\n  workers: 2\n  source: gz\n"+
		"model:\n  num_classes: 2\n  features: [4, 8]\nloss:\n  ignore_label: 255\n"+
		"train:\n  epochs: 1\n  iterations_per_epoch: 3\n  patch_size: [8, 16, 16]\n  batch_size: 2\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	if out, errb, err := runCmd(t, "--config", cfgPath, "--output-dir", runs, "--threads", "2"); err != nil {
		t.Fatalf("training: %v\n%s\n%s", err, out, errb)
	}
	f, err := os.Open(filepath.Join(runs, "crops", "fold_0", "run_0", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatal(err)
		}
	}
	// Three steps trained and the held-out crop validated.
	loss, _ := last["train_loss"].(float64)
	dice, _ := last["val_dice"].([]any)
	if last["step"] != 3.0 || !(loss > 0) || len(dice) != 1 {
		t.Fatalf("last metrics %v: want step 3, a training loss and one validation Dice", last)
	}
}

// TestManifestMaskNeedsIgnoreLabel: a manifest with a mask and a config
// without loss.ignore_label is refused before training, naming both.
func TestManifestMaskNeedsIgnoreLabel(t *testing.T) {
	dir := t.TempDir()
	one := func(z, y, x int) float32 { return 1 }
	writeOMEZarr(t, filepath.Join(dir, "raw.zarr"), [3]int{8, 8, 8}, [3]float64{}, false, one)
	writeOMEZarr(t, filepath.Join(dir, "a.zarr"), [3]int{8, 8, 8}, [3]float64{}, true, one)
	writeOMEZarr(t, filepath.Join(dir, "m.zarr"), [3]int{8, 8, 8}, [3]float64{}, true, one)
	os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("volumes:\n  - raw: raw.zarr\n    crops:\n      - {label: a.zarr, mask: m.zarr}\n"), 0o644)
	cfgPath := filepath.Join(dir, "run.yaml")
	os.WriteFile(cfgPath, []byte("data:\n  manifest: manifest.yaml\n  fold: -1\nmodel:\n  num_classes: 2\n  features: [4, 8]\ntrain:\n  epochs: 1\n  iterations_per_epoch: 1\n  patch_size: [8, 8, 8]\n"), 0o644)
	_, _, err := runCmd(t, "--config", cfgPath, "--output-dir", filepath.Join(dir, "runs"), "--threads", "1")
	if err == nil || !strings.Contains(err.Error(), "data.manifest") || !strings.Contains(err.Error(), "loss.ignore_label") {
		t.Fatalf("mask without loss.ignore_label: %v, want an error naming data.manifest and loss.ignore_label", err)
	}
}
