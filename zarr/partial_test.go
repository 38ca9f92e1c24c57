package zarr

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// writeBloscArray writes a Zarr v2 array of 16-bit elements (dtype "<u2")
// whose chunks are blosc containers of blocksize-byte blocks (zstd, with
// the given shuffle), so a chunk holds several blocks. It returns the
// values as float32, (z, y, x) C order.
func writeBloscArray(t *testing.T, dir string, shape, chunks [3]int, blocksize int, shuffle byte, seed uint64) []float32 {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format": 2, "shape": [` + ints(shape[:]) + `], "chunks": [` + ints(chunks[:]) + `],
 "dtype": "<u2", "compressor": {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 1, "blocksize": 0},
 "fill_value": 7, "filters": null, "order": "C"}`
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	vals := make([]float32, shape[0]*shape[1]*shape[2])
	for i := range vals {
		vals[i] = float32(rng.IntN(3000))
	}
	buf := make([]byte, 2*chunks[0]*chunks[1]*chunks[2])
	for cz := 0; cz*chunks[0] < shape[0]; cz++ {
		for cy := 0; cy*chunks[1] < shape[1]; cy++ {
			for cx := 0; cx*chunks[2] < shape[2]; cx++ {
				if (cz+cy+cx)%5 == 4 {
					// A missing chunk: all fill value.
					for z := cz * chunks[0]; z < min(shape[0], (cz+1)*chunks[0]); z++ {
						for y := cy * chunks[1]; y < min(shape[1], (cy+1)*chunks[1]); y++ {
							for x := cx * chunks[2]; x < min(shape[2], (cx+1)*chunks[2]); x++ {
								vals[(z*shape[1]+y)*shape[2]+x] = 7
							}
						}
					}
					continue
				}
				clear(buf)
				for z := range chunks[0] {
					for y := range chunks[1] {
						for x := range chunks[2] {
							gz, gy, gx := cz*chunks[0]+z, cy*chunks[1]+y, cx*chunks[2]+x
							if gz < shape[0] && gy < shape[1] && gx < shape[2] {
								v := uint16(vals[(gz*shape[1]+gy)*shape[2]+gx])
								binary.LittleEndian.PutUint16(buf[2*((z*chunks[1]+y)*chunks[2]+x):], v)
							}
						}
					}
				}
				name := fmt.Sprintf("%d.%d.%d", cz, cy, cx)
				if err := os.WriteFile(filepath.Join(dir, name), bloscCompress(buf, 2, blocksize, shuffle, 4), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return vals
}

// TestPartialChunkReads: regions read by decoding only the blosc blocks
// they need equal the stored values, with no cache, a cache so small it
// evicts (and recycles) blocks while other goroutines copy from them,
// and a cache that holds everything; byte shuffle or none (bit shuffle: the numcodecs fixtures),
// missing chunks, edge chunks.
func TestPartialChunkReads(t *testing.T) {
	shape, chunks := [3]int{21, 18, 13}, [3]int{8, 8, 8}
	for _, shuffle := range []byte{0, bloscShuffle} {
		dir := filepath.Join(t.TempDir(), "a.zarr")
		// 8·8·8 elements of 2 bytes in blocks of 256 bytes: 16 blocks
		// of 16 x-rows each, two blocks a z-slice.
		vals := writeBloscArray(t, dir, shape, chunks, 256, shuffle, uint64(shuffle))
		for _, cache := range []int64{-1, 3 * (256 + 64), 1 << 20} {
			f, err := OpenWith(dir, Options{CacheBytes: cache})
			if err != nil {
				t.Fatal(err)
			}
			if !f.(*file).arr.bloscParts() {
				t.Fatal("a blosc-only array is not read in part")
			}
			var wg sync.WaitGroup
			for g := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), uint64(cache)))
					for range 40 {
						var b volume.Box
						for k := range 3 {
							b.Lo[k] = rng.IntN(shape[k])
							b.Hi[k] = b.Lo[k] + 1 + rng.IntN(min(10, shape[k]-b.Lo[k]))
						}
						dst := [][]float32{make([]float32, b.Voxels())}
						if err := f.ReadRegion(b, dst); err != nil {
							t.Error(err)
							return
						}
						if d := diffBox(dst[0], vals, shape, b); d != "" {
							t.Errorf("shuffle %d, cache %d, box %v: %s", shuffle, cache, b, d)
							return
						}
					}
				}()
			}
			wg.Wait()
			if c := f.(*file).arr.cache; cache > 0 && c.bytes() > cache {
				t.Errorf("the cache holds %d bytes, bound %d", c.bytes(), cache)
			}
			f.Close()
		}
	}
}

// TestPartialReadsDecodeOnlyNeededBlocks: with a chunk's last block
// corrupt, a region in the chunk's first z-slices reads (its blocks were
// the only ones decoded) and a region in its last slice fails naming the
// chunk.
func TestPartialReadsDecodeOnlyNeededBlocks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a.zarr")
	writeBloscArray(t, dir, [3]int{8, 8, 8}, [3]int{8, 8, 8}, 256, bloscShuffle, 3)
	editFile(t, filepath.Join(dir, "0.0.0"), func(b []byte) []byte {
		// The last block's stream starts where the header's last offset
		// says: overwrite its compressed bytes.
		nb := 2 * 8 * 8 * 8 / 256
		start := int(binary.LittleEndian.Uint32(b[bloscHeader+4*(nb-1):]))
		for i := start + 4 + 4; i < len(b); i++ { // past the sizes, into the zstd frame
			b[i] ^= 0x5a
		}
		return b
	})
	for _, cache := range []int64{-1, 1 << 20} {
		f, err := OpenWith(dir, Options{CacheBytes: cache})
		if err != nil {
			t.Fatal(err)
		}
		head := volume.Box{Hi: [3]int{3, 8, 8}}
		if err := f.ReadRegion(head, [][]float32{make([]float32, head.Voxels())}); err != nil {
			t.Errorf("cache %d: a region before the damaged block: %v", cache, err)
		}
		tail := volume.Box{Lo: [3]int{7, 2, 2}, Hi: [3]int{8, 3, 3}}
		err = f.ReadRegion(tail, [][]float32{make([]float32, 1)})
		if err == nil || !strings.Contains(err.Error(), "0.0.0") {
			t.Errorf("cache %d: a region in the damaged block: %v, want an error naming chunk 0.0.0", cache, err)
		}
		f.Close()
	}
}

type recorded struct {
	name string
	log  *[]string
}

func (r recorded) recycle() { *r.log = append(*r.log, r.name) }

// TestCacheRecyclesOnlyUnusedValues: a value the cache drops while a
// reader uses it is recycled when that reader is done, not before; one
// dropped while unused is recycled at once; one too large to hold is
// recycled after its only reader.
func TestCacheRecyclesOnlyUnusedValues(t *testing.T) {
	var log []string
	c := newChunkCache(100)
	val := func(name string, size int64) func() (any, int64, error) {
		return func() (any, int64, error) { return recorded{name, &log}, size, nil }
	}
	if err := c.use("a", val("a", 60), func(any) {
		// Loading b drops a, which this reader still uses.
		if err := c.use("b", val("b", 60), func(any) {}); err != nil {
			t.Fatal(err)
		}
		if len(log) != 0 {
			t.Fatalf("recycled %v while a was in use", log)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(log) != "[a]" {
		t.Fatalf("recycled %v after a's reader returned, want [a]", log)
	}
	c.use("c", val("c", 60), func(any) {}) // drops b, unused
	if fmt.Sprint(log) != "[a b]" {
		t.Fatalf("recycled %v, want [a b]", log)
	}
	c.use("big", val("big", 1000), func(any) {})
	if fmt.Sprint(log) != "[a b big]" {
		t.Fatalf("recycled %v, want [a b big]", log)
	}
	c.reset()
	if fmt.Sprint(log) != "[a b big c]" {
		t.Fatalf("after reset recycled %v, want [a b big c]", log)
	}
}

// TestPartialReadsFetchOnlyMissingBlocks: over HTTP with a cache, the
// first read of a chunk GETs all of it; a later read of other blocks of
// the same chunk GETs only their byte range (a Range GET much shorter
// than the chunk), and both reads return the stored values.
func TestPartialReadsFetchOnlyMissingBlocks(t *testing.T) {
	root := t.TempDir()
	shape := [3]int{16, 8, 8}
	vals := writeBloscArray(t, filepath.Join(root, "a.zarr"), shape, shape, 256, bloscShuffle, 5)
	type get struct {
		rng string
		n   int64
	}
	var mu sync.Mutex
	var gets []get
	srv := newTestServer(t, func(s *testServer) {
		s.root = root
		s.before = func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/0.0.0") {
				mu.Lock()
				gets = append(gets, get{rng: r.Header.Get("Range")})
				mu.Unlock()
			}
			return false
		}
	})
	st, err := os.Stat(filepath.Join(root, "a.zarr", "0.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenWith(srv.URL+"/a.zarr", Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 16·8·8 uint16 in 256-byte blocks: two z-slices a block, 8 blocks.
	for _, b := range []volume.Box{
		{Hi: [3]int{2, 8, 8}},                        // block 0: the whole chunk is read
		{Lo: [3]int{13, 1, 1}, Hi: [3]int{16, 5, 6}}, // blocks 6, 7: their range only
		{Lo: [3]int{1, 0, 0}, Hi: [3]int{14, 8, 8}},  // blocks 1..5 missing
	} {
		dst := [][]float32{make([]float32, b.Voxels())}
		if err := f.ReadRegion(b, dst); err != nil {
			t.Fatal(err)
		}
		if d := diffBox(dst[0], vals, shape, b); d != "" {
			t.Fatalf("box %v: %s", b, d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gets) != 3 || gets[0].rng != "" || gets[1].rng == "" || gets[2].rng == "" {
		t.Fatalf("GETs of the chunk: %+v, want a whole GET, then two Range GETs", gets)
	}
	for _, g := range gets[1:] {
		var lo, hi int64
		if _, err := fmt.Sscanf(g.rng, "bytes=%d-%d", &lo, &hi); err != nil {
			t.Fatalf("Range %q: %v", g.rng, err)
		}
		if n := hi - lo + 1; n <= 0 || n >= st.Size()*3/4 {
			t.Errorf("Range %q: %d bytes of a %d-byte chunk, want only the missing blocks'", g.rng, n, st.Size())
		}
	}
}

// A chunk of more blocks than the first read of a local chunk file holds
// the starts of (2048 blocks of 4 bytes: 8 KiB of starts after the
// header) reads its layout in a second pread, and every region of it
// reads right, without a cache and with one (whose first read of the
// chunk reads its layout and a part's blocks only).
func TestPartialReadsOfManyBlocks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a.zarr")
	shape := [3]int{16, 16, 16}
	vals := writeBloscArray(t, dir, shape, shape, 4, bloscShuffle, 9)
	if n := 2 * 16 * 16 * 16 / 4; bloscHeader+4*n <= headBytes {
		t.Fatalf("%d blocks' starts fit the first read", n)
	}
	for _, cache := range []int64{-1, 1 << 20} {
		f, err := OpenWith(dir, Options{CacheBytes: cache})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []volume.Box{
			{Lo: [3]int{3, 5, 7}, Hi: [3]int{4, 9, 16}},
			{Hi: shape},
			{Lo: [3]int{15, 15, 15}, Hi: shape},
		} {
			dst := [][]float32{make([]float32, b.Voxels())}
			if err := f.ReadRegion(b, dst); err != nil {
				t.Fatal(err)
			}
			if d := diffBox(dst[0], vals, shape, b); d != "" {
				t.Errorf("cache %d, box %v: %s", cache, b, d)
			}
		}
		f.Close()
	}
}

// A damaged local chunk read in part, with or without a cache (its
// layout, then its blocks' range), fails the read with an error naming the chunk file —
// never a panic, never an allocation the file does not justify: shorter
// than a blosc header, a header claiming another decoded size, a stream
// size past the file's end, a block starting past it, the starts of more
// blocks than the first read holds cut off.
func TestPartialLocalReadsOfDamagedChunks(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name   string
		blocks int // block size of the array written
		edit   func([]byte) []byte
		want   string
	}{
		{"short", 256, func(b []byte) []byte { return b[:10] }, "shorter than the 16-byte header"},
		{"decoded size", 256, func(b []byte) []byte { le.PutUint32(b[4:], 999); return b }, "decoded bytes"},
		{"stream size", 256, func(b []byte) []byte { le.PutUint32(b[12:], uint32(len(b)+1)); return b }, "the stream has"},
		{"block start", 256, func(b []byte) []byte { le.PutUint32(b[bloscHeader:], uint32(len(b)+100)); return b }, "past the"},
		{"starts cut off", 4, func(b []byte) []byte { return b[:headBytes+8] }, "the stream has"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a.zarr")
			shape := [3]int{16, 16, 16}
			writeBloscArray(t, dir, shape, shape, tc.blocks, bloscShuffle, 5)
			chunk := filepath.Join(dir, "0.0.0")
			editFile(t, chunk, tc.edit)
			for _, cache := range []int64{-1, 1 << 20} {
				f, err := OpenWith(dir, Options{CacheBytes: cache})
				if err != nil {
					t.Fatal(err)
				}
				b := volume.Box{Hi: [3]int{1, 2, 16}} // the first block(s) only
				err = f.ReadRegion(b, [][]float32{make([]float32, b.Voxels())})
				if err == nil || !strings.Contains(err.Error(), chunk) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("cache %d: err = %v, want one naming %s and saying %q", cache, err, chunk, tc.want)
				}
				f.Close()
			}
		})
	}
}

// TestWindowClasses: chunk-file windows come from power-of-two size
// classes from 64 KiB, so a pooled window always fits a request of its
// class (the single pool they replaced returned too-small windows and
// piled up new ones: 60–90 MiB live in the two-thread benchmark).
func TestWindowClasses(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 65536, 65537, 131072, 131073, 1 << 20, 3<<20 + 5} {
		b := getWindow(n)
		if len(*b) != n {
			t.Fatalf("getWindow(%d): len %d", n, len(*b))
		}
		c := cap(*b)
		if c < 1<<16 || c&(c-1) != 0 || c < n || (n > 1<<16 && c >= 2*n) {
			t.Errorf("getWindow(%d): capacity %d, want the power of two ≥ max(n, 64 KiB) below 2n", n, c)
		}
		if windowClass(n) != windowClass(c) {
			t.Errorf("getWindow(%d): capacity %d is in class %d, the request in %d", n, c, windowClass(c), windowClass(n))
		}
		putWindow(b)
	}
}
