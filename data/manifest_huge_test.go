package data

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// hugeRawShape is 2^36 voxels, past the 2^31−1 a volume may hold in
// memory: an OpenOrganelle s0 is of this order. The raw store is its
// metadata and the one chunk the crops lie in, at the far corner.
var hugeRawShape = [3]int{4096, 4096, 4096}

func hugeRawAt(z, y, x int) float32 { return float32((z*7+y*3+x)%200) + 0.25 }

// writeHugeRaw writes the huge raw (spacing 2, origin 0) with the chunk
// (4032..4096)³ present: every other chunk reads as 0.
func writeHugeRaw(t *testing.T, path string) {
	t.Helper()
	w, err := zarr.CreateImage(path, zarr.ImageSpec{Shape: hugeRawShape, Chunks: [3]int{64, 64, 64}, DType: "float32", Spacing: [3]float64{2, 2, 2}, Compressor: "zlib"})
	if err != nil {
		t.Fatal(err)
	}
	far := volume.Box{Lo: [3]int{4032, 4032, 4032}, Hi: hugeRawShape}
	v := make([]float32, 0, far.Voxels())
	for z := far.Lo[0]; z < far.Hi[0]; z++ {
		for y := far.Lo[1]; y < far.Hi[1]; y++ {
			for x := far.Lo[2]; x < far.Hi[2]; x++ {
				v = append(v, hugeRawAt(z, y, x))
			}
		}
	}
	if err := w.WriteBlock(far, v); err != nil {
		t.Fatal(err)
	}
}

// TestManifestHugeRaw: label crops placed near the far end of a raw of
// 2^36 voxels (by offset, and by translation) become cases whose image is
// the raw's window under them (voxels at flat offsets past 2^31), which
// ReadCase, Verify and the loader's patches read through both sources; the raw
// itself listed as a case to be read whole is refused naming it.
func TestManifestHugeRaw(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.zarr")
	writeHugeRaw(t, raw)
	crops := []struct {
		label string
		lo    [3]int
		shape [3]int
	}{
		{"crops/a.zarr", [3]int{4040, 4048, 4056}, [3]int{16, 16, 16}},
		{"crops/b.zarr", [3]int{4070, 4033, 4080}, [3]int{12, 20, 16}},
	}
	cls := func(z, y, x int) float32 { return float32(map[bool]int{true: 1}[(z+2*y+x)%5 == 0]) }
	for _, c := range crops {
		writeImage(t, filepath.Join(dir, c.label), c.shape, [3]float64{}, true, cls)
	}
	m := `classes: {background: 0, fg: 1}
volumes:
  - raw: raw.zarr
    crops:
      - {id: a, label: crops/a.zarr, offset: [4040, 4048, 4056]}
      - {id: b, label: crops/b.zarr, translation: [8140, 8066, 8160]}
`
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filled(config.Data{Manifest: filepath.Join(dir, "manifest.yaml"), Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}})
	ds, err := OpenDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 2 {
		t.Fatalf("%d cases, want 2", len(ds.Cases))
	}
	for k, c := range crops {
		box := volume.Box{Lo: c.lo}
		for a := range 3 {
			box.Hi[a] = c.lo[a] + c.shape[a]
		}
		if want := volume.WindowPath(raw, box); ds.Cases[k].Images[0] != want {
			t.Fatalf("case %d image %s, want %s", k, ds.Cases[k].Images[0], want)
		}
		v, err := ReadCase(cfg, ds.Cases[k], 1)
		if err != nil {
			t.Fatal(err)
		}
		if v.Shape != c.shape || v.Affine[2][3] != 2*float64(c.lo[0]) || v.Affine[0][3] != 2*float64(c.lo[2]) {
			t.Fatalf("case %d: shape %v affine %v, want %v at %v", k, v.Shape, v.Affine, c.shape, c.lo)
		}
		for z := range c.shape[0] {
			for y := range c.shape[1] {
				for x := range c.shape[2] {
					i := (z*c.shape[1]+y)*c.shape[2] + x
					if got, want := v.Image[0][i], hugeRawAt(c.lo[0]+z, c.lo[1]+y, c.lo[2]+x); got != want {
						t.Fatalf("case %d voxel (%d, %d, %d): %g, want the raw's %g", k, z, y, x, got, want)
					}
					if float32(v.Label[i]) != cls(z, y, x) {
						t.Fatalf("case %d voxel (%d, %d, %d): label %d, want %g", k, z, y, x, v.Label[i], cls(z, y, x))
					}
				}
			}
		}
	}

	if err := Verify(context.Background(), cfg, VerifyOptions{NumClasses: 2, Patch: [3]int{8, 8, 8}, Logger: discard()}); err != nil {
		t.Fatal(err)
	}

	// The loader's patches are crops of their cases, whether the raw is
	// read region by region (gz) or each case decoded whole (cache).
	patch := [3]int{8, 8, 8}
	for _, src := range []string{"gz", "cache"} {
		c := cfg
		c.Source = src
		l := openLoader(t, c, Options{Seed: 2, Iterations: 2, Patch: patch, Batch: 2})
		s, err := l.Train(StreamOptions{Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			for i := 0; i < b.N; i++ {
				v, err := l.LoadCase(context.Background(), b.Samples[i].Case)
				if err != nil {
					t.Fatal(err)
				}
				if !isCropOf(b.ImageSlot(i), b.LabelSlot(i), v, patch) {
					t.Errorf("%s: batch %d slot %d is not a crop of case %d", src, b.Step, i, b.Samples[i].Case)
				}
				n++
			}
			b.Release()
		}
		s.Close()
		if n != 4 {
			t.Errorf("%s: %d patches, want 4", src, n)
		}
	}

	// The raw as a case of its own is decoded whole: refused, naming it.
	_, err = ReadCase(cfg, Case{ID: "whole", Images: []string{raw}}, 1)
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), raw) || !strings.Contains(err.Error(), "manifest") {
		t.Errorf("whole read of the raw: %v, want ErrTooLarge naming %s and how to read it", err, raw)
	}
}

// TestHugeCaseRefused: an nnU-Net dataset whose case is a 2^36-voxel
// Zarr store opens (headers only), but decoding the case whole is refused
// naming its image, and training on it, which reads the image by region
// but needs the whole label map (its foreground index), is refused naming
// the label's store; both say how such a volume is read.
func TestHugeCaseRefused(t *testing.T) {
	dir := t.TempDir()
	writeHugeRaw(t, filepath.Join(dir, "imagesTr", "a_0000.zarr"))
	if _, err := zarr.CreateImage(filepath.Join(dir, "labelsTr", "a.zarr"), zarr.ImageSpec{Shape: hugeRawShape, Chunks: [3]int{64, 64, 64}, DType: "uint8", Spacing: [3]float64{2, 2, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(`{"channel_names":{"0":"EM"},"labels":{"background":0,"a":1},"numTraining":1,"file_ending":".zarr"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	image, label := filepath.Join(dir, "imagesTr", "a_0000.zarr"), filepath.Join(dir, "labelsTr", "a.zarr")
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Workers: workers(1), Normalization: config.StringList{"none"}, Source: "gz"})
	l := openLoader(t, cfg, Options{Seed: 1, Iterations: 1, Patch: [3]int{8, 8, 8}, Batch: 1})
	_, err := l.LoadCase(context.Background(), 0)
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), image) || !strings.Contains(err.Error(), "by region") {
		t.Errorf("loading the case: %v, want ErrTooLarge naming %s", err, image)
	}
	s, err := l.Train(StreamOptions{Epochs: 1})
	if err == nil {
		_, err = s.Next(context.Background())
		s.Close()
	}
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), label) || !strings.Contains(err.Error(), "by region") {
		t.Errorf("training on the case: %v, want ErrTooLarge naming %s", err, label)
	}
}
