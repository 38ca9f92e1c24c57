package nnunet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/checkpoint/safetensors"
)

// TestPermuteKernel: axis j of the result is axis perm[j] of the input,
// element by element.
func TestPermuteKernel(t *testing.T) {
	shape := []int{1, 1, 2, 3, 4}
	v := make([]float32, 24)
	for i := range v {
		v[i] = float32(i) // value = a*12 + b*4 + c at (a, b, c)
	}
	got, ns := permuteKernel(v, shape, []int{1, 2, 0})
	if !slices.Equal(ns, []int{1, 1, 3, 4, 2}) {
		t.Fatalf("shape %v", ns)
	}
	for x := 0; x < 3; x++ {
		for y := 0; y < 4; y++ {
			for z := 0; z < 2; z++ {
				// result (x, y, z) is input (a=z, b=x, c=y)
				if w := float32(z*12 + x*4 + y); got[x*8+y*2+z] != w {
					t.Fatalf("(%d,%d,%d) = %v, want %v", x, y, z, got[x*8+y*2+z], w)
				}
			}
		}
	}
}

// TestWeightsNames: nnU-Net's names map to voxtrain's, duplicates
// (all_modules, decoder.encoder) are dropped, deep-supervision heads kept
// only when asked, and an unknown tensor is an error naming it.
func TestWeightsNames(t *testing.T) {
	f32 := func(name string, shape ...int) safetensors.Tensor {
		return safetensors.Float32(name, shape, make([]float32, safetensors.NumElements(shape)))
	}
	ts := []safetensors.Tensor{
		f32("encoder.stages.1.0.convs.0.conv.weight", 8, 4, 3, 3, 3),
		f32("encoder.stages.1.0.convs.0.norm.bias", 8),
		f32("encoder.stages.1.0.convs.0.all_modules.0.weight", 8, 4, 3, 3, 3),
		f32("decoder.encoder.stages.0.0.convs.0.conv.weight", 4, 1, 3, 3, 3),
		f32("decoder.transpconvs.0.weight", 16, 8, 2, 2, 2),
		f32("decoder.stages.1.convs.1.conv.bias", 4),
		f32("decoder.seg_layers.0.weight", 3, 8, 1, 1, 1),
		f32("_orig_mod.decoder.seg_layers.1.bias", 3), // a compiled network's name
	}
	w, err := Weights(ts, 3, []int{0, 1, 2}, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range w {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"dec.1.1.0.bias", "ds.0.weight", "enc.1.0.0.weight", "enc.1.0.1.bias", "head.bias", "up.0.weight"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	if w, _ := Weights(ts, 3, []int{0, 1, 2}, false); len(w) != 5 {
		t.Errorf("without deep supervision: %d tensors, want 5 (no ds.0)", len(w))
	}
	if _, err := Weights(append(ts, f32("encoder.stem.weight", 1)), 3, []int{0, 1, 2}, true); err == nil || !strings.Contains(err.Error(), "encoder.stem.weight") {
		t.Errorf("unknown tensor: %v", err)
	}
}

// TestReadDatasetIgnoreLabel: a dataset.json with nnU-Net's ignore label
// describes the dataset as train plan's reader does (plan.DescribeDataset):
// the ignore label counted among the labels, the network's outputs not.
func TestReadDatasetIgnoreLabel(t *testing.T) {
	for _, tc := range []struct {
		labels           string
		classes, outputs int
	}{
		{`{"background": 0, "a": 1, "b": 2, "ignore": 3}`, 4, 3},
		{`{"background": 0, "a": 1, "ignore": 255}`, 256, 2},
		{`{"background": 0, "a": 1, "b": 2}`, 3, 0},
	} {
		path := filepath.Join(t.TempDir(), "dataset.json")
		body := `{"channel_names": {"0": "MRI"}, "labels": ` + tc.labels + `, "numTraining": 2, "file_ending": ".nii.gz"}`
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := readDataset(path)
		if err != nil {
			t.Fatal(err)
		}
		if d.NumClasses != tc.classes || d.Outputs != tc.outputs {
			t.Errorf("labels %s: %d classes, %d outputs; want %d and %d", tc.labels, d.NumClasses, d.Outputs, tc.classes, tc.outputs)
		}
	}
}
