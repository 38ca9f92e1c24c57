package zarr

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// Fuzz targets for every parser of untrusted bytes: blosc's container,
// blosclz, Zarr v2 and v3 metadata, an N5 block, N5's lz4 stream, a shard. Each must return
// an error or a result of the size the metadata says, never panic.

func FuzzBlosc(f *testing.F) {
	src := make([]byte, 3000)
	for i := range src {
		src[i] = byte(i % 13 * (i % 3))
	}
	for _, ts := range []int{1, 2, 4, 8} {
		for _, codec := range []byte{1, 2, 3, 4} {
			f.Add(bloscCompress(src, ts, 1024, bloscShuffle, codec), uint16(len(src)))
		}
	}
	for _, p := range []string{"v2/comp_blosc_blosclz_bitshuffle_f4.zarr/0.0.0", "v2/big_blosc_blosclz_shuffle.zarr/0.0.0", "v2/comp_blosc_lz4_shuffle_bs64_f4.zarr/1.1.1"} {
		if b, err := os.ReadFile(filepath.Join("testdata", p)); err == nil {
			f.Add(b, uint16(min(len(b)*8, 65535)))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, want uint16) {
		out, err := bloscDecompress(data, int(want))
		if err == nil && len(out) != int(want) {
			t.Fatalf("decoded %d bytes, want %d", len(out), want)
		}
		// The partial path (partial.go): each block decoded alone from
		// the window of bytes the header says it needs, as a later read
		// fetches it, must fail or give the whole decode's bytes.
		fr, perr := parseBlosc(data, int(want))
		if perr != nil {
			return
		}
		for j := range fr.nblocks() {
			lo, hi := fr.window(j, j+1)
			lo, hi = min(max(lo, 0), len(fr.src)), min(max(hi, 0), len(fr.src))
			bl, bh := fr.blockSpan(j)
			// Odd blocks with zstdSlack of scratch capacity (decoded in
			// place), even ones without (through the copy).
			blk := make([]byte, bh-bl, bh-bl+j%2*zstdSlack)
			if derr := fr.withWindow(fr.src[lo:max(lo, hi)], lo).decodeBlock(j, blk, nil); derr == nil && err == nil && string(blk) != string(out[bl:bh]) {
				t.Fatalf("block %d decoded from its window differs from the whole decode", j)
			}
		}
	})
}

func FuzzBlosclz(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "v2/big_blosc_blosclz_shuffle.zarr/0.0.0")); err == nil && len(b) > 40 {
		f.Add(b[16+4+4:], uint16(4096))
	}
	f.Add([]byte{0x03, 'a', 'b', 'c', 'd', 0x20, 0x03, 0x00, 'e'}, uint16(10))
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		_ = blosclzDecompress(src, make([]byte, n))
	})
}

// fuzzRead opens dir and reads a small box of it (the whole of a fuzzed
// shape could be large, which the metadata would justify).
func fuzzRead(t *testing.T, dir string) {
	f, err := Open(dir)
	if err != nil {
		return
	}
	h := f.Header()
	box := volume.Box{Hi: [3]int{min(h.Shape[0], 9), min(h.Shape[1], 9), min(h.Shape[2], 9)}}
	dst := make([][]float32, min(h.Channels, 4))
	if len(dst) != h.Channels {
		return
	}
	for c := range dst {
		dst[c] = make([]float32, box.Voxels())
	}
	_ = f.ReadRegion(box, dst)
	if h.Channels == 1 {
		_ = f.ReadLabels(box, make([]uint8, box.Voxels()))
	}
}

// smallChunks reports whether a store's chunks are small enough to fuzz
// quickly (a fuzzed chunk of 1 GiB is valid, and slow).
func smallChunks(dir string) bool {
	m, err := readArray(dir)
	return err != nil || prod(m.chunks)*m.codec.dt.size <= 1<<20
}

// linkChunks makes a store in a fresh directory that holds the chunks of
// the fixture src (linked) and returns it; callers write its metadata
// file, metaName, for each input (one directory a fuzz process: a new one
// per input would make fuzzing slow).
func linkChunks(f *testing.F, src, metaName string) string {
	dir := filepath.Join(f.TempDir(), "f.zarr")
	os.MkdirAll(dir, 0o755)
	abs, _ := filepath.Abs(filepath.Join("testdata", src))
	ents, _ := os.ReadDir(abs)
	for _, e := range ents {
		if e.Name() != metaName {
			os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	return dir
}

func FuzzV2Metadata(f *testing.F) {
	for _, p := range []string{"v2/dtype_le_i2.zarr", "v2/order_f.zarr", "v2/comp_blosc_zstd_shuffle_f4.zarr", "v2/fill_nan.zarr"} {
		b, _ := os.ReadFile(filepath.Join("testdata", p, ".zarray"))
		f.Add(b)
	}
	dir := linkChunks(f, "v2/comp_blosc_zstd_shuffle_f4.zarr", ".zarray")
	f.Fuzz(func(t *testing.T, meta []byte) {
		if err := os.WriteFile(filepath.Join(dir, ".zarray"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if smallChunks(dir) {
			fuzzRead(t, dir)
		}
	})
}

func FuzzV3Metadata(f *testing.F) {
	for _, p := range []string{"v3/shard_end_int16.zarr", "v3/transpose_int16.zarr", "v3/zstd_crc32c_int16.zarr"} {
		b, _ := os.ReadFile(filepath.Join("testdata", p, "zarr.json"))
		f.Add(b)
	}
	dir := linkChunks(f, "v3/shard_end_int16.zarr", "zarr.json")
	f.Fuzz(func(t *testing.T, meta []byte) {
		if err := os.WriteFile(filepath.Join(dir, "zarr.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if smallChunks(dir) {
			fuzzRead(t, dir)
		}
	})
}

func FuzzShard(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "v3/shard_end_int16.zarr/c/0/0/0"))
	f.Add(b)
	dir := filepath.Join(f.TempDir(), "s.zarr")
	os.MkdirAll(filepath.Join(dir, "c", "0", "0"), 0o755)
	meta, _ := os.ReadFile(filepath.Join("testdata", "v3/shard_end_int16.zarr/zarr.json"))
	os.WriteFile(filepath.Join(dir, "zarr.json"), meta, 0o644)
	f.Fuzz(func(t *testing.T, shard []byte) {
		if err := os.WriteFile(filepath.Join(dir, "c", "0", "0", "0"), shard, 0o644); err != nil {
			t.Fatal(err)
		}
		fuzzRead(t, dir)
	})
}

func FuzzN5Block(f *testing.F) {
	for _, p := range []string{"v2/n5_gzip_i2.n5/0/0/0", "v2/n5_raw_u2.n5/2/1/1"} {
		b, _ := os.ReadFile(filepath.Join("testdata", p))
		f.Add(b)
	}
	m, err := readArray(filepath.Join("testdata", "v2/n5_gzip_i2.n5"))
	if err != nil {
		f.Fatal(err)
	}
	a := &array{m: m}
	f.Fuzz(func(t *testing.T, block []byte) {
		raw, shape, err := a.n5Block(block, []int{0, 0, 0})
		if err != nil {
			return
		}
		c, err := m.codec.decode(raw, shape)
		if err == nil && len(c.data) != prod(shape)*2 {
			t.Fatalf("%d bytes for %v", len(c.data), shape)
		}
	})
}

// FuzzN5LZ4 decodes N5's lz4 (LZ4Block frames) into a block of size bytes:
// an error, or exactly size bytes (at most size when not exact, and then
// the same bytes as an exact decode of that length).
func FuzzN5LZ4(f *testing.F) {
	for _, p := range []string{"n5lz4/u2.n5/0/0/0", "n5lz4/u2.n5/2/0/1", "n5lz4/f4.n5/0/0/0", "n5lz4/f4.n5/1/0/1"} {
		b, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		// The stream after the 3-d N5 header; its size from the header.
		size := 1
		for i := range 3 {
			size *= int(binary.BigEndian.Uint32(b[4+4*i:]))
		}
		elem := 2
		if strings.Contains(p, "f4") {
			elem = 4
		}
		f.Add(b[16:], uint32(size*elem), true)
	}
	f.Add(lz4BlockStream(testLZ4Data(3000), 1024), uint32(3000), false)
	f.Fuzz(func(t *testing.T, src []byte, size uint32, exact bool) {
		n := int(size % (1 << 18))
		out, err := n5LZ4Codec{}.decode(src, n, exact)
		if err != nil {
			return
		}
		if len(out) > n || exact && len(out) != n {
			t.Fatalf("decoded %d bytes, the block holds %d (exact %v)", len(out), n, exact)
		}
		if !exact {
			again, err := n5LZ4Codec{}.decode(src, len(out), true)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("exact decode of %d bytes: %v", len(out), err)
			}
		}
	})
}

// FuzzN5Attributes fuzzes an N5 array's attributes.json, seeded with
// the COSEM levels' (transform order C and F, beside pixelResolution)
// and an n5-viewer one (pixelResolution alone): an error or a volume,
// never a panic.
func FuzzN5Attributes(f *testing.F) {
	for _, p := range []string{"cosem/tiny.n5/em/fibsem-uint8/s0", "cosem/tiny.n5/em/fibsem-uint8-f/s1", "v2/n5_raw_u2.n5"} {
		b, err := os.ReadFile(filepath.Join("testdata", p, "attributes.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	dir := linkChunks(f, "cosem/tiny.n5/em/fibsem-uint8/s0", "attributes.json")
	f.Fuzz(func(t *testing.T, meta []byte) {
		if err := os.WriteFile(filepath.Join(dir, "attributes.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if smallChunks(dir) {
			fuzzRead(t, dir)
		}
	})
}

// FuzzCOSEMMultiscales fuzzes a COSEM group's attributes.json (its
// multiscales listing the levels and their transforms) over the fixture's
// levels: listing the levels, choosing one by spacing and reading it are
// an error or a volume, never a panic.
func FuzzCOSEMMultiscales(f *testing.F) {
	for _, p := range []string{"cosem/tiny.n5/em/fibsem-uint8", "cosem/tiny.n5/em/fibsem-uint8-f"} {
		b, err := os.ReadFile(filepath.Join("testdata", p, "attributes.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	dir := linkChunks(f, "cosem/tiny.n5/em/fibsem-uint8", "attributes.json")
	f.Fuzz(func(t *testing.T, meta []byte) {
		if err := os.WriteFile(filepath.Join(dir, "attributes.json"), meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if ls, err := ImageLevels(dir); err == nil && len(ls) > 0 {
			if g, err := OpenWith(dir, Options{TargetSpacing: ls[len(ls)-1].Spacing}); err == nil {
				g.Close()
			}
		}
		fuzzRead(t, dir)
	})
}
