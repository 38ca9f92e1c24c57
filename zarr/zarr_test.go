package zarr

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/voxtrain/voxtrain/internal/testutil"
	"github.com/voxtrain/voxtrain/volume"
)

func TestMatch(t *testing.T) {
	for p, want := range map[string]bool{
		"a/case.zarr": true, "case.ome.zarr/": true, "x/case.ome.zarr/1": true, "case.n5": true,
		"case.N5/s0": true, "case.nii.gz": false, ".zarr": false, "zarr/case.nii": false, "a.zarr.json": false, "x.zarr/case.nii.gz": false, "x.zarr/g/0": true,
	} {
		if got := Match(p); got != want {
			t.Errorf("Match(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestBloscRoundTrip decodes containers made by the test writer: every
// type size, shuffle on and off, lz4, snappy (which numcodecs' blosc
// lacks, so no fixture has it), zlib and zstd, blocks that split
// and a short last block.
func TestBloscRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typesize := range []int{1, 2, 4, 8, 3} {
		for _, n := range []int{0, 7, 1000, 5000} {
			src := make([]byte, n*typesize+typesize/2)
			for i := range src {
				src[i] = byte(rng.IntN(4) * (i % 7))
			}
			for _, sh := range []byte{0, bloscShuffle} {
				for _, codec := range []byte{1, 2, 3, 4} {
					enc := bloscCompress(src, typesize, 2048-2048%typesize, sh, codec)
					got, err := bloscDecompress(enc, len(src))
					if err != nil || !bytes.Equal(got, src) {
						t.Fatalf("typesize %d n %d shuffle %d codec %d: err %v, equal %v", typesize, n, sh, codec, err, bytes.Equal(got, src))
					}
				}
			}
		}
	}
}

func TestHalf(t *testing.T) {
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x0001: float32(math.Ldexp(1, -24)), 0x7c00: float32(math.Inf(1)), 0x3555: 0.33325195, 0x8000: 0} {
		if got := half(h); got != want {
			t.Errorf("half(%#04x) = %g, want %g", h, got, want)
		}
	}
	if got := half(0x7e00); got == got {
		t.Errorf("half(NaN) = %g", got)
	}
}

// TestLevels checks level listing and choice by spacing on the OME-Zarr
// fixtures (0.4, 0.5).
func TestLevels(t *testing.T) {
	path := filepath.Join("testdata", "v2", "ome04.ome.zarr")
	ls, err := Levels(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Spacing != [3]float64{2.5, 0.8, 0.7} || ls[1].Spacing != [3]float64{5, 1.6, 1.4} || ls[1].Shape != [3]int{3, 4, 5} {
		t.Fatalf("levels %+v", ls)
	}
	for _, tc := range []struct {
		target [3]float64
		want   int
	}{{[3]float64{2.5, 0.8, 0.7}, 0}, {[3]float64{5, 1.6, 1.4}, 1}, {[3]float64{10, 2, 2}, 1}, {[3]float64{10, 1, 2}, 0}, {[3]float64{1, 1, 1}, 0}} {
		if got := ChooseLevel(ls, tc.target); got != tc.want {
			t.Errorf("ChooseLevel(%v) = %d, want %d", tc.target, got, tc.want)
		}
	}
	// The fixture is in millimetres: a target in another unit is
	// converted into it (without the unit, 2500 is coarser than both
	// levels and 0.006 finer than both).
	for _, tc := range []struct {
		target [3]float64
		unit   string
		want   [3]float64
	}{
		{[3]float64{2500, 800, 700}, "micrometer", ls[0].Spacing},
		{[3]float64{2500, 800, 700}, "", ls[1].Spacing},
		{[3]float64{0.006, 0.002, 0.002}, "m", ls[1].Spacing},
		{[3]float64{0.006, 0.002, 0.002}, "", ls[0].Spacing},
		{[3]float64{6e6, 2e6, 2e6}, "nm", ls[1].Spacing},
	} {
		f, err := OpenWith(path, Options{TargetSpacing: tc.target, TargetUnit: tc.unit})
		if err != nil {
			t.Fatal(err)
		}
		if h := f.Header(); h.Spacing != tc.want || h.Unit != "millimeter" {
			t.Errorf("target %v %q: level of spacing %v %s, want %v millimeter", tc.target, tc.unit, h.Spacing, h.Unit, tc.want)
		}
		f.Close()
	}
	if _, err := OpenWith(path, Options{TargetSpacing: [3]float64{6, 2, 2}, TargetUnit: "second"}); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"second"`) {
		t.Errorf("target unit second: %v, want an error naming %s and the unit", err, path)
	}
	f, err := OpenWith(path, Options{TargetSpacing: [3]float64{6, 2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(filepath.Join(path, "1"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenWith(path, Options{Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Header() != g.Header() || h.Header() != g.Header() {
		t.Fatalf("level 1 by spacing %+v, by path %+v, by index %+v", f.Header(), g.Header(), h.Header())
	}
	// A listed level's header is the one opening its path gives (data's
	// manifests take it from the list instead of opening the level again).
	if ls[1].Header != g.Header() {
		t.Fatalf("level 1 listed with header %+v, opened by path %+v", ls[1].Header, g.Header())
	}
	if ls1, err := Levels(filepath.Join(path, "1")); err != nil || len(ls1) != 2 || ls1[0] != ls[0] {
		t.Fatalf("Levels of a named level: %+v, %v", ls1, err)
	}
	if _, err := OpenWith(path, Options{Level: 2}); err == nil {
		t.Fatal("level 2 of 2 opened")
	}
	// ImageLevels: the group's levels, none for a level named by path.
	if il, err := ImageLevels(path); err != nil || len(il) != 2 || il[1] != ls[1] {
		t.Fatalf("ImageLevels of the group: %+v, %v", il, err)
	}
	if il, err := ImageLevels(filepath.Join(path, "1")); err != nil || il != nil {
		t.Fatalf("ImageLevels of a level: %+v, %v", il, err)
	}
}

// TestReadsOnlyOverlappingChunks damages a chunk and checks that a region
// away from it reads, and a region over it does not: reads are lazy.
func TestReadsOnlyOverlappingChunks(t *testing.T) {
	dir := copyFixture(t, "v2/comp_blosc_zstd_shuffle_f4.zarr")
	editFile(t, filepath.Join(dir, "1.1.2"), func(b []byte) []byte { return b[:20] })
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	far := volume.Box{Hi: [3]int{4, 4, 8}}
	if err := f.ReadRegion(far, [][]float32{make([]float32, far.Voxels())}); err != nil {
		t.Fatalf("a region away from the damaged chunk: %v", err)
	}
	near := volume.Box{Lo: [3]int{4, 4, 8}, Hi: [3]int{5, 5, 9}}
	if err := f.ReadRegion(near, [][]float32{make([]float32, 1)}); err == nil {
		t.Fatal("a region over the damaged chunk read without error")
	}
}

func TestChunkCache(t *testing.T) {
	c := newChunkCache(100)
	loads := 0
	load := func(size int64) func() (any, int64, error) {
		return func() (any, int64, error) { loads++; return size, size, nil }
	}
	for _, k := range []string{"a", "b", "c"} {
		c.get(k, load(40))
	}
	if c.bytes() != 80 || loads != 3 {
		t.Fatalf("held %d bytes after %d loads, want 80 after 3", c.bytes(), loads)
	}
	c.get("b", load(40)) // b is held: no load; a was evicted
	c.get("a", load(40)) // reloads a, evicts c
	c.get("b", load(40))
	if loads != 4 {
		t.Fatalf("%d loads, want 4", loads)
	}
	if _, err := c.get("e", func() (any, int64, error) { return nil, 0, errors.New("boom") }); err == nil {
		t.Fatal("error lost")
	}
	c.get("big", load(1000)) // larger than the cache: not held
	if c.bytes() > 100 {
		t.Fatalf("held %d bytes, bound 100", c.bytes())
	}
	// One load however many ask at once.
	var n atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.get("shared", func() (any, int64, error) { n.Add(1); <-gate; return 1, 1, nil })
		}()
	}
	for c.inflightLen() == 0 {
	}
	close(gate)
	wg.Wait()
	if n.Load() != 1 {
		t.Fatalf("%d loads of one key", n.Load())
	}
}

func (c *chunkCache) inflightLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}

// TestConcurrentRegionReads reads random regions from many goroutines
// through a cache small enough to evict, against the whole read (run
// with -race).
func TestConcurrentRegionReads(t *testing.T) {
	for _, p := range []string{"v3/shard_gzip_int16.zarr", "v2/ome04.ome.zarr"} {
		f, err := OpenWith(filepath.Join("testdata", p), Options{CacheBytes: 2048})
		if err != nil {
			t.Fatal(err)
		}
		h := f.Header()
		whole := readAll(t, f, volume.Whole(h.Shape))
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for range 30 {
					var b volume.Box
					for k := range 3 {
						b.Lo[k] = rng.IntN(h.Shape[k])
						b.Hi[k] = b.Lo[k] + 1 + rng.IntN(h.Shape[k]-b.Lo[k])
					}
					dst := make([][]float32, h.Channels)
					for c := range dst {
						dst[c] = make([]float32, b.Voxels())
					}
					if err := f.ReadRegion(b, dst); err != nil {
						t.Error(err)
						return
					}
					for c := range dst {
						if d := diffBox(dst[c], whole[c], h.Shape, b); d != "" {
							t.Errorf("%s %v: %s", p, b, d)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}

var benchOnce sync.Once
var benchDir string

// BenchmarkRandomPatches reads random 32³ patches of a 256³ uint8
// blosc-zstd array with 64³ chunks (written by the test writer), with
// the default cache and with none (every patch decodes its chunks).
func BenchmarkRandomPatches(b *testing.B) {
	if testutil.Race {
		b.Skip("heavy under -race")
	}
	benchOnce.Do(func() {
		d, err := os.MkdirTemp("", "zarr-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = filepath.Join(d, "bench.zarr")
		rng := rand.New(rand.NewPCG(3, 4))
		data := make([]byte, 256*256*256)
		for i := range data {
			data[i] = byte(rng.IntN(4) * 60)
		}
		writeV2(b, benchDir, [3]int{256, 256, 256}, [3]int{64, 64, 64}, data)
	})
	for _, bc := range []struct {
		name  string
		cache int64
	}{{"cached", 0}, {"uncached", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := OpenWith(benchDir, Options{CacheBytes: bc.cache})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			dst := [][]float32{make([]float32, 32*32*32)}
			b.SetBytes(32 * 32 * 32)
			for b.Loop() {
				var box volume.Box
				for k := range 3 {
					box.Lo[k] = rng.IntN(256 - 32)
					box.Hi[k] = box.Lo[k] + 32
				}
				if err := f.ReadRegion(box, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSharedCache: files opened with one Cache share its decoded chunks (a
// second handle's read decodes nothing: the chunk files may be gone),
// Close of one leaves the shared chunks held, and the cache stays within
// its bound; ChunkShape is the chunk grid's (D, H, W).
func TestSharedCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a.zarr")
	shape, chunks := [3]int{8, 8, 8}, [3]int{4, 4, 8}
	data := make([]byte, 8*8*8)
	for i := range data {
		data[i] = byte(i % 7)
	}
	writeV2(t, dir, shape, chunks, data)
	c := NewCache(1 << 20)
	f1, err := OpenWith(dir, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := f1.(volume.Chunked).ChunkShape(); got != chunks {
		t.Fatalf("ChunkShape %v, want %v", got, chunks)
	}
	whole := readAll(t, f1, volume.Whole(shape))
	if c.Bytes() < 8*8*8 {
		t.Fatalf("the shared cache holds %d bytes after a whole read of 512", c.Bytes())
	}
	f1.Close()
	held := c.Bytes()
	if held == 0 {
		t.Fatal("Close of one file emptied the shared cache")
	}
	f2, err := OpenWith(dir, Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"0.0.0", "1.1.0"} {
		os.Remove(filepath.Join(dir, k))
	}
	again := readAll(t, f2, volume.Whole(shape))
	if d := diffBox(again[0], whole[0], shape, volume.Whole(shape)); d != "" {
		t.Fatalf("read through the shared cache: %s", d)
	}
	small := NewCache(200) // less than one 128-byte chunk and its overhead twice
	f3, _ := OpenWith(dir, Options{Cache: small})
	if err := f3.ReadRegion(volume.Box{Lo: [3]int{0, 4, 0}, Hi: [3]int{8, 8, 8}}, [][]float32{make([]float32, 8*4*8)}); err != nil {
		t.Fatal(err)
	}
	if small.Bytes() > 200 {
		t.Fatalf("a 200-byte cache holds %d", small.Bytes())
	}
}
