package zarr

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// Volumes past 2^31 voxels, as OpenOrganelle's and the CT scrolls' are,
// open and are read by region: the tests' stores say 4096³ voxels (2^36)
// and hold one chunk, near the far corner, whose voxels' flat offsets in
// the volume are past 2^31 (and past 2^32); every other chunk is missing
// and reads as the fill value. Nothing larger than a chunk is written.

// hugeShape is 2^36 voxels, 32 times the old 2^31−1 bound.
var hugeShape = [3]int{4096, 4096, 4096}

// hugeChunk is the chunk shape, hugeAt the present chunk's grid index:
// its first voxel, (4032, 3968, 3904), lies at flat offset ≈ 6.8·10^10.
var (
	hugeChunk = [3]int{64, 64, 64}
	hugeAt    = [3]int{63, 62, 61}
)

// hugeValue is the value the present chunk stores at voxel (z, y, x) of
// the volume (never 0, the fill of an N5 array).
func hugeValue(z, y, x int) int { return (z*7+y*3+x)%200 + 1 }

// hugeChunkData returns the present chunk's values, C order, in elements
// of size bytes (little- or big-endian).
func hugeChunkData(size int, big bool) []byte {
	c := hugeChunk
	b := make([]byte, c[0]*c[1]*c[2]*size)
	i := 0
	for z := range c[0] {
		for y := range c[1] {
			for x := range c[2] {
				v := hugeValue(hugeAt[0]*c[0]+z, hugeAt[1]*c[1]+y, hugeAt[2]*c[2]+x)
				switch {
				case size == 1:
					b[i] = byte(v)
				case big:
					binary.BigEndian.PutUint16(b[i:], uint16(v))
				default:
					binary.LittleEndian.PutUint16(b[i:], uint16(v))
				}
				i += size
			}
		}
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hugeStores writes the huge array in every layout whose chunk
// arithmetic differs: Zarr v2 (blosc, read in part), v3 (uint16, zstd),
// v3 sharded (an inner chunk of a 128³ shard, by its index), and N5 (raw
// blocks behind a header, keys fastest axis first). It returns each
// store's path and fill value.
func hugeStores(t *testing.T) map[string]float32 {
	t.Helper()
	dir := t.TempDir()
	shape, chunks := ints(hugeShape[:]), ints(hugeChunk[:])
	at := func(sep string) string { return fmt.Sprintf("%d%s%d%s%d", hugeAt[0], sep, hugeAt[1], sep, hugeAt[2]) }

	v2 := filepath.Join(dir, "v2.zarr")
	writeFile(t, filepath.Join(v2, ".zarray"), []byte(`{"zarr_format": 2, "shape": [`+shape+`], "chunks": [`+chunks+`],
 "dtype": "|u1", "compressor": {"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": 1, "blocksize": 0},
 "fill_value": 7, "filters": null, "order": "C"}`))
	writeFile(t, filepath.Join(v2, at(".")), bloscCompress(hugeChunkData(1, false), 1, 1<<16, bloscShuffle, 4))

	v3 := filepath.Join(dir, "v3.zarr")
	writeFile(t, filepath.Join(v3, "zarr.json"), []byte(`{"zarr_format": 3, "node_type": "array", "shape": [`+shape+`],
 "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [`+chunks+`]}},
 "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 9,
 "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}],
 "attributes": {}}`))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(hugeChunkData(2, false)); err != nil || zw.Close() != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(v3, "c", at("/")), gz.Bytes())

	// Sharded: shards of 2³ inner chunks; the present chunk is inner
	// chunk (1, 0, 1) of shard (31, 31, 30), the index at the shard's end.
	sh := filepath.Join(dir, "shard.zarr")
	writeFile(t, filepath.Join(sh, "zarr.json"), []byte(`{"zarr_format": 3, "node_type": "array", "shape": [`+shape+`],
 "data_type": "uint8", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [128, 128, 128]}},
 "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 5,
 "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [`+chunks+`],
   "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
   "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_location": "end"}}],
 "attributes": {}}`))
	inner := hugeChunkData(1, false)
	shard := append([]byte(nil), inner...)
	local := (hugeAt[0]%2*2+hugeAt[1]%2)*2 + hugeAt[2]%2
	for i := range 8 {
		off, n := ^uint64(0), ^uint64(0)
		if i == local {
			off, n = 0, uint64(len(inner))
		}
		shard = binary.LittleEndian.AppendUint64(shard, off)
		shard = binary.LittleEndian.AppendUint64(shard, n)
	}
	writeFile(t, filepath.Join(sh, "c", fmt.Sprintf("%d/%d/%d", hugeAt[0]/2, hugeAt[1]/2, hugeAt[2]/2)), shard)

	n5 := filepath.Join(dir, "huge.n5")
	writeFile(t, filepath.Join(n5, "attributes.json"), []byte(`{"n5": "2.0.0", "dimensions": [`+shape+`], "blockSize": [`+chunks+`],
 "dataType": "uint8", "compression": {"type": "raw"}}`))
	head := []byte{0, 0, 0, 3}
	for i := range 3 {
		head = binary.BigEndian.AppendUint32(head, uint32(hugeChunk[2-i]))
	}
	writeFile(t, filepath.Join(n5, fmt.Sprintf("%d/%d/%d", hugeAt[2], hugeAt[1], hugeAt[0])), append(head, hugeChunkData(1, true)...))

	return map[string]float32{v2: 7, v3: 9, sh: 5, n5: 0}
}

// TestHugeArrayRegions: each huge store opens with its shape, and a
// region across the present chunk's corner reads the chunk's values
// where it lies and the fill elsewhere, through ReadRegion and
// ReadLabels, with and without a cache; a whole read is refused naming
// the store.
func TestHugeArrayRegions(t *testing.T) {
	// Across the corner (4032, 3968, 3904) of the present chunk, into
	// missing chunks on every axis.
	box := volume.Box{Lo: [3]int{4020, 3960, 3900}, Hi: [3]int{4050, 3980, 3912}}
	sz := box.Size()
	for path, fill := range hugeStores(t) {
		for _, cache := range []int64{0, -1} {
			f, err := OpenWith(path, Options{CacheBytes: cache})
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			h := f.Header()
			if h.Shape != hugeShape || h.Channels != 1 || f.(volume.Chunked).ChunkShape() != hugeChunk {
				t.Fatalf("%s: header %+v, chunks %v", path, h, f.(volume.Chunked).ChunkShape())
			}
			dst := [][]float32{make([]float32, box.Voxels())}
			if err := f.ReadRegion(box, dst); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			lbl := make([]uint8, box.Voxels())
			if err := f.ReadLabels(box, lbl); err != nil {
				t.Fatalf("%s: labels: %v", path, err)
			}
			inChunk := 0
			for z := range sz[0] {
				for y := range sz[1] {
					for x := range sz[2] {
						p := [3]int{box.Lo[0] + z, box.Lo[1] + y, box.Lo[2] + x}
						want := fill
						if p[0]/64 == hugeAt[0] && p[1]/64 == hugeAt[1] && p[2]/64 == hugeAt[2] {
							want = float32(hugeValue(p[0], p[1], p[2]))
							inChunk++
						}
						i := (z*sz[1]+y)*sz[2] + x
						if dst[0][i] != want || lbl[i] != uint8(want) {
							t.Fatalf("%s: voxel %v (flat offset %d) reads %g and label %d, want %g", path, p,
								(p[0]*hugeShape[1]+p[1])*hugeShape[2]+p[2], dst[0][i], lbl[i], want)
						}
					}
				}
			}
			if inChunk != 18*12*8 {
				t.Fatalf("%d voxels of the box in the present chunk, want %d", inChunk, 18*12*8)
			}
			err = f.ReadRegion(volume.Whole(hugeShape), [][]float32{nil})
			if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "by region") {
				t.Errorf("%s: whole read: %v, want ErrTooLarge naming the store", path, err)
			}
			f.Close()
		}
	}
}

// TestHugeImageWritten: CreateImage makes a 2^36-voxel OME-Zarr image
// (its metadata only), WriteBlock writes one chunk at the far corner,
// and Open, ImageLevels and a region read see it, the rest reading 0.
func TestHugeImageWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "huge.ome.zarr")
	w, err := CreateImage(dir, ImageSpec{Shape: hugeShape, Chunks: hugeChunk, DType: "uint8", Spacing: [3]float64{8, 8, 8}, Unit: "nanometer"})
	if err != nil {
		t.Fatal(err)
	}
	far := volume.Box{Lo: [3]int{4032, 4032, 4032}, Hi: hugeShape}
	src := make([]uint8, far.Voxels())
	for i := range src {
		src[i] = uint8(i%250 + 1)
	}
	if err := w.WriteBlock(far, src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "0", "63.63.63")); err != nil {
		t.Fatalf("chunk 63.63.63: %v", err)
	}
	ls, err := ImageLevels(dir)
	if err != nil || len(ls) != 1 || ls[0].Shape != hugeShape {
		t.Fatalf("ImageLevels: %v, %+v", err, ls)
	}
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	box := volume.Box{Lo: [3]int{4030, 4030, 4030}, Hi: [3]int{4034, 4034, 4034}}
	lbl := make([]uint8, box.Voxels())
	if err := f.ReadLabels(box, lbl); err != nil {
		t.Fatal(err)
	}
	for i, v := range lbl {
		z, y, x := box.Lo[0]+i/16, box.Lo[1]+i/4%4, box.Lo[2]+i%4
		want := uint8(0)
		if z >= 4032 && y >= 4032 && x >= 4032 {
			want = src[((z-4032)*64+y-4032)*64+x-4032]
		}
		if v != want {
			t.Fatalf("voxel (%d, %d, %d): %d, want %d", z, y, x, v, want)
		}
	}
}

// TestImageAxisPastReaderRefused: an image with an axis the reader could
// not open (more than 2^31−1) is refused by CreateImage, before any block.
func TestImageAxisPastReaderRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "long.ome.zarr")
	_, err := CreateImage(dir, ImageSpec{Shape: [3]int{1, 1, 1 << 31}, Chunks: [3]int{1, 1, 1 << 20}, DType: "uint8", Spacing: [3]float64{1, 1, 1}})
	if err == nil || !strings.Contains(err.Error(), "axis 2 is 2147483648") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want the axis named with the store", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused image left %s behind (%v)", dir, err)
	}
}
