package zarr

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMalformedStores damages copies of the fixtures and checks that each
// damage is an error naming the file (or chunk) and what is wrong, not a
// panic or a wrong volume.
func TestMalformedStores(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		damage  func(t *testing.T, dir string)
		want    []string // substrings of the error
	}{
		{"truncated blosc chunk", "v2/comp_blosc_lz4_shuffle_f4.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0.0.0"), func(b []byte) []byte { return b[:len(b)/2] })
		}, []string{"0.0.0", "blosc"}},
		{"blosc header size disagrees", "v2/comp_blosc_zstd_shuffle_f4.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0.0.0"), func(b []byte) []byte { b[6] = 0x40; return b })
		}, []string{"0.0.0", "header says"}},
		{"corrupt blosclz", "v2/big_blosc_blosclz_shuffle.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0.0.0"), func(b []byte) []byte {
				for i := 20; i < len(b); i += 3 {
					b[i] = 0xff
				}
				return b
			})
		}, []string{"0.0.0"}},
		{"truncated zlib chunk", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "1.1.1"), func(b []byte) []byte { return b[:len(b)-6] })
		}, []string{"1.1.1", "zlib"}},
		{"truncated lz4 chunk", "v2/comp_lz4_i2.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0.0.0"), func(b []byte) []byte { return b[:len(b)-5] })
		}, []string{"0.0.0", "lz4"}},
		{"raw chunk of the wrong size", "v2/fill_nan.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0.0.0"), func(b []byte) []byte { return b[:100] })
		}, []string{"0.0.0", "holds"}},
		{"dtype disagrees with the chunks", "v2/comp_zstd_i2.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"<i2"`, `"<f8"`))
			// Every chunk disagrees, and the region's chunks decode
			// concurrently: the error names whichever failed first.
		}, []string{"chunk ", "comp_zstd_i2.zarr" + string(filepath.Separator) + "0.", "zstd"}},
		{"chunk shape 0", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"chunks": [
        4,`, `"chunks": [
        0,`))
		}, []string{".zarray", "chunk shape", "axis 0 is 0"}},
		// 2·10^9×7×9 voxels open (read by region) but are not read whole;
		// 2·10^9×2·10^9×9 are past what an index addresses.
		{"huge shape read whole", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"shape": [
        6,`, `"shape": [
        2000000000,`))
		}, []string{"dtype_u1.zarr", "2000000000×7×9 voxels", "too large to decode", "by region"}},
		{"shape past 2^53", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"shape": [
        6,
        7,`, `"shape": [
        2000000000,
        2000000000,`))
		}, []string{".zarray", "2^53 voxels"}},
		{"huge chunk", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"chunks": [
        4,`, `"chunks": [
        2000000000,`))
		}, []string{".zarray", "over"}},
		{"unknown compressor", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"zlib"`, `"snappy"`))
		}, []string{".zarray", "snappy"}},
		{"filters", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), replaceJSON(`"filters": null`, `"filters": [{"id": "delta"}]`))
		}, []string{".zarray", "filters"}},
		{"bad json", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zarray"), func(b []byte) []byte { return b[:20] })
		}, []string{".zarray"}},
		{"truncated shard", "v3/shard_end_int16.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "c", "0", "0", "0"), func(b []byte) []byte { return b[:10] })
		}, []string{filepath.Join("c", "0", "0", "0"), "index"}},
		{"shard index checksum", "v3/shard_end_int16.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "c", "0", "0", "0"), func(b []byte) []byte { b[len(b)-10]++; return b })
		}, []string{filepath.Join("c", "0", "0", "0"), "crc32c"}},
		{"v3 chunk_shape 0", "v3/zstd_int16.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "zarr.json"), replaceJSON(`"chunk_shape": [
        4,`, `"chunk_shape": [
        0,`))
		}, []string{"zarr.json", "chunk_shape"}},
		{"v3 crc32c", "v3/zstd_crc32c_int16.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "c", "1", "1", "1"), func(b []byte) []byte { b[len(b)-1]++; return b })
		}, []string{filepath.Join("c", "1", "1", "1"), "crc32c"}},
		{"N5 block header", "v2/n5_raw_u1.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0", "0", "0"), func(b []byte) []byte { b[7] = 9; return b })
		}, []string{filepath.Join("0", "0", "0"), "N5 block dimension"}},
		{"N5 truncated gzip", "v2/n5_gzip_i2.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "0", "0", "0"), func(b []byte) []byte { return b[:len(b)-9] })
		}, []string{filepath.Join("0", "0", "0"), "gzip"}},
		// u2.n5's block 2/0/1 (lz4-java's): the 16-byte N5 header, one raw
		// frame of 1920 bytes at byte 16 (its data at 37), the end frame.
		{"N5 lz4 truncated frame", "n5lz4/u2.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "2", "0", "1"), func(b []byte) []byte { return b[:1000] })
		}, []string{filepath.Join("2", "0", "1"), "N5 lz4 frame 0", "truncated"}},
		{"N5 lz4 bad magic", "n5lz4/u2.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "2", "0", "1"), func(b []byte) []byte { b[16] = 'X'; return b })
		}, []string{filepath.Join("2", "0", "1"), "N5 lz4 frame 0", "magic"}},
		{"N5 lz4 checksum mismatch", "n5lz4/u2.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "2", "0", "1"), func(b []byte) []byte { b[37+100] ^= 1; return b })
		}, []string{filepath.Join("2", "0", "1"), "N5 lz4 frame 0", "checksum"}},
		{"N5 lz4 length past the block", "n5lz4/u2.n5", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "2", "0", "1"), func(b []byte) []byte {
				binary.LittleEndian.PutUint32(b[25:], 1921) // compressed
				binary.LittleEndian.PutUint32(b[29:], 1921) // decompressed
				return b
			})
		}, []string{filepath.Join("2", "0", "1"), "N5 lz4 frame 0", "past the block's 1920 bytes"}},
		{"OME axes disagree", "v2/ome04.ome.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, ".zattrs"), replaceJSON(`"name": "c",`, `"name": "z",`))
		}, []string{".zattrs", "twice"}},
		{"OME scale length", "v3/ome05.ome.zarr", func(t *testing.T, d string) {
			editFile(t, filepath.Join(d, "zarr.json"), replaceJSON(`"scale": [
                1,`, `"scale": [`))
		}, []string{"zarr.json", "scale"}},
		{"no metadata", "v2/dtype_u1.zarr", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, ".zarray"))
		}, []string{"dtype_u1.zarr", "no zarr.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyFixture(t, tc.fixture)
			tc.damage(t, dir)
			err := readErr(dir)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
