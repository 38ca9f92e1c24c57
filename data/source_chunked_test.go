package data

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// writeChunkedZarr writes an uncompressed Zarr v2 array of shape in
// chunks of chunk (edge chunks padded with 0, as zarr writes them):
// float32 img, or uint8 lbl when img is nil.
func writeChunkedZarr(t *testing.T, dir string, shape, chunk [3]int, img []float32, lbl []uint8) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dtype, size := "<f4", 4
	if img == nil {
		dtype, size = "|u1", 1
	}
	meta, _ := json.Marshal(map[string]any{"zarr_format": 2, "shape": shape, "chunks": chunk, "dtype": dtype,
		"compressor": nil, "fill_value": 0, "order": "C", "filters": nil})
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range tiles(shape, chunk) {
		buf := make([]byte, chunk[0]*chunk[1]*chunk[2]*size)
		for z := b.Lo[0]; z < b.Hi[0]; z++ {
			for y := b.Lo[1]; y < b.Hi[1]; y++ {
				for x := b.Lo[2]; x < b.Hi[2]; x++ {
					src := (z*shape[1]+y)*shape[2] + x
					dst := ((z-b.Lo[0])*chunk[1]+y-b.Lo[1])*chunk[2] + x - b.Lo[2]
					if img != nil {
						binary.LittleEndian.PutUint32(buf[4*dst:], math.Float32bits(img[src]))
					} else {
						buf[dst] = lbl[src]
					}
				}
			}
		}
		key := fmt.Sprintf("%d.%d.%d", b.Lo[0]/chunk[0], b.Lo[1]/chunk[1], b.Lo[2]/chunk[2])
		if err := os.WriteFile(filepath.Join(dir, key), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// zarrDemo writes n demo cases as Zarr stores in chunks of chunk, in the
// nnU-Net layout.
func zarrDemo(t *testing.T, n int, chunk [3]int) string {
	t.Helper()
	src := demoDataset(t, n)
	dir := t.TempDir()
	for _, id := range demoIDs[:n] {
		var v Volume
		c := Case{ID: id, Images: []string{filepath.Join(src, "imagesTr", id+".nii.gz")}, Label: filepath.Join(src, "labelsTr", id+".nii.gz")}
		if err := decodeCase(c, 1, &v, &readBufs{}, 0); err != nil {
			t.Fatal(err)
		}
		writeChunkedZarr(t, filepath.Join(dir, "imagesTr", id+"_0000.zarr"), v.Shape, chunk, v.Image[0], nil)
		writeChunkedZarr(t, filepath.Join(dir, "labelsTr", id+".zarr"), v.Shape, chunk, nil, v.Label)
	}
	meta := fmt.Sprintf(`{"channel_names":{"0":"MRI"},"labels":{"background":0,"Anterior":1,"Posterior":2},"numTraining":%d,"file_ending":".zarr"}`, n)
	if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestChunkedCasesReadLazily: a dataset of chunked stores read by the gz
// source region by region (stores held open, chunks shared through one
// cache) gives the bytes the cache source gives from whole decoded cases,
// for every worker count, also when resampling to a target spacing; the
// shared cache holds chunks and stays within cache_bytes.
func TestChunkedCasesReadLazily(t *testing.T) {
	dir := zarrDemo(t, 4, [3]int{16, 16, 16})
	opt := Options{Seed: 5, Iterations: 3, Patch: [3]int{24, 32, 24}, Batch: 2, Augment: nnunetAug(t)}
	const budget = 1 << 20 // a few chunks of the ~2 MiB the cases hold
	for _, target := range [][]float64{nil, {1.3, 0.8, 1.1}} {
		base := filled(config.Data{Dataset: dir, Fold: -1, TargetSpacing: target, CacheBytes: budget})
		sameBatchesEverywhere(t, base, opt, []string{"cache", "gz"}, []int{0, 2}, 2, 6, func(src string, w int, l *Loader) {
			if src != "gz" {
				return
			}
			gz := l.src.(*gzSource)
			if gz.files == nil || len(gz.files.files) != 8 {
				t.Fatalf("gz source, %d workers: open stores %v, want the 8 files held open", w, gz.files)
			}
			if b := gz.files.cache.Bytes(); b <= 0 || b > budget {
				t.Errorf("gz source, %d workers: the chunk cache holds %d bytes, want some, at most %d", w, b, budget)
			}
		})
	}
}

// TestSampledFingerprint: a chunked case above fingerprintVoxels takes its
// z-score statistics from a deterministic sample of chunk-aligned boxes
// (the same for a case ID, others for another), close to the full pass;
// the lazily learnt statistics equal those ReadCase (validation,
// prediction) uses, and the patches read lazily equal crops of ReadCase's
// volume.
func TestSampledFingerprint(t *testing.T) {
	defer func(v int) { fingerprintVoxels = v }(fingerprintVoxels)
	fingerprintVoxels = 4096 // the demo cases (~60k voxels) are "large"
	chunk := [3]int{8, 8, 8}
	shape := [3]int{36, 50, 35}
	a, b := statsBoxes("a", shape, chunk), statsBoxes("b", shape, chunk)
	if len(a) != fingerprintBoxes || fmt.Sprint(a) != fmt.Sprint(statsBoxes("a", shape, chunk)) || fmt.Sprint(a) == fmt.Sprint(b) {
		t.Fatalf("statsBoxes: %d boxes, not a deterministic per-case sample", len(a))
	}
	for _, bx := range a {
		for ax := range 3 {
			if bx.Lo[ax]%chunk[ax] != 0 || bx.Hi[ax] > shape[ax] || bx.Empty() {
				t.Fatalf("box %v is not chunk-aligned inside %v", bx, shape)
			}
		}
	}
	if got := statsBoxes("a", [3]int{10, 10, 10}, chunk); len(got) != 1 || got[0] != volume.Whole([3]int{10, 10, 10}) {
		t.Fatalf("a small case: boxes %v, want the whole volume", got)
	}

	dir := zarrDemo(t, 2, chunk)
	cfg := filled(config.Data{Dataset: dir, Fold: -1, Source: "gz", Workers: workers(1)})
	l := openLoader(t, cfg, Options{Seed: 1, Iterations: 1, Patch: [3]int{16, 16, 16}, Batch: 1})
	gz := l.src.(*gzSource)
	w := &worker{}
	for c, cs := range l.Dataset().Cases {
		m, err := gz.meta(w, c)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ReadCase(cfg, cs, 1)
		if err != nil {
			t.Fatal(err)
		}
		raw := &Volume{}
		if err := decodeCase(cs, 1, raw, &readBufs{}, 0); err != nil {
			t.Fatal(err)
		}
		full, sd, _ := preprocess.MeanStd(raw.Image[0], nil)
		if d := math.Abs(m.stats[0].Mean-full) / sd; d > 0.2 || m.stats[0].Mean == full {
			t.Errorf("case %s: sampled mean %g, full pass %g (std %g): want close, not equal", cs.ID, m.stats[0].Mean, full, sd)
		}
		box := volume.Box{Lo: [3]int{3, 5, 7}, Hi: [3]int{20, 30, 22}}
		in, err := gz.region(w, c, m, box)
		if err != nil {
			t.Fatal(err)
		}
		sz := box.Size()
		for i, x := range in.Image[0] {
			z, y, xx := i/(sz[1]*sz[2]), i/sz[2]%sz[1], i%sz[2]
			j := ((z+box.Lo[0])*v.Shape[1]+y+box.Lo[1])*v.Shape[2] + xx + box.Lo[2]
			if x != v.Image[0][j] || in.Label[i] != v.Label[j] {
				t.Fatalf("case %s voxel %d of %v: lazy %g/%d, ReadCase %g/%d", cs.ID, i, box, x, in.Label[i], v.Image[0][j], v.Label[j])
			}
		}
		if fmt.Sprint(m.fg.Counts, m.fg.Classes) != fmt.Sprint(v.FG.Counts, v.FG.Classes) {
			t.Errorf("case %s: foreground counts %v, ReadCase's %v", cs.ID, m.fg.Counts, v.FG.Counts)
		}
	}
}

// statsBoxes indexes the tile grid instead of listing it: the same boxes
// as picking from the listed tiles (the rule before), and a raw of 10^11
// voxels samples its boxes without a list of its ~4·10^5 tiles.
func TestStatsBoxesIndexesTiles(t *testing.T) {
	defer func(v int) { fingerprintVoxels = v }(fingerprintVoxels)
	fingerprintVoxels = 4096
	listed := func(id string, shape, chunk [3]int) []volume.Box {
		step := chunk
		for grew := true; grew && step[0]*step[1]*step[2] < fingerprintVoxels/fingerprintBoxes; {
			grew = false
			for a := range 3 {
				if step[a] < shape[a] && step[0]*step[1]*step[2] < fingerprintVoxels/fingerprintBoxes {
					step[a], grew = min(2*step[a], shape[a]), true
				}
			}
		}
		all := tiles(shape, step)
		if len(all) <= fingerprintBoxes {
			return all
		}
		h := fnv.New64a()
		h.Write([]byte(id))
		r := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
		pick := map[int]bool{}
		for len(pick) < fingerprintBoxes {
			pick[r.IntN(len(all))] = true
		}
		var out []volume.Box
		for i, b := range all {
			if pick[i] {
				out = append(out, b)
			}
		}
		return out
	}
	for _, c := range []struct{ shape, chunk [3]int }{
		{[3]int{36, 50, 35}, [3]int{8, 8, 8}},
		{[3]int{100, 7, 300}, [3]int{4, 7, 16}},
		{[3]int{17, 17, 17}, [3]int{8, 8, 8}}, // fewer tiles than fingerprintBoxes
		{[3]int{1, 500, 33}, [3]int{1, 16, 16}},
	} {
		got, want := statsBoxes("case", c.shape, c.chunk), listed("case", c.shape, c.chunk)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("shape %v chunk %v: boxes\n%v\nwant\n%v", c.shape, c.chunk, got, want)
		}
	}

	fingerprintVoxels = 1 << 24
	huge := [3]int{4096, 8192, 3000} // ~10^11 voxels in 64³ chunks
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := statsBoxes("em", huge, [3]int{64, 64, 64})
	runtime.ReadMemStats(&after)
	if len(got) != fingerprintBoxes {
		t.Fatalf("huge raw: %d boxes, want %d", len(got), fingerprintBoxes)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("huge raw: statsBoxes allocated %d bytes, want a few KiB (no tile list)", alloc)
	}
}
