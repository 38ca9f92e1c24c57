package zarr

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// copyFixture copies a committed store into a temporary directory, to be
// damaged there.
func copyFixture(t testing.TB, rel string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(rel))
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("testdata", rel))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// editFile rewrites a file through f.
func editFile(t testing.TB, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceJSON(old, new string) func([]byte) []byte {
	return func(b []byte) []byte { return []byte(strings.Replace(string(b), old, new, 1)) }
}

// readErr opens path and reads the whole volume, returning the first error.
// A volume too large to decode at once is asked for whole all the same
// (with destinations the read refuses before looking at them), as a
// careless whole read would.
func readErr(path string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := f.Header()
	dst := make([][]float32, h.Channels)
	for c := range dst {
		if volume.CheckInMemory(h.Shape, h.Channels) == nil {
			dst[c] = make([]float32, volume.Whole(h.Shape).Voxels())
		}
	}
	return f.ReadRegion(volume.Whole(h.Shape), dst)
}

// bloscCompress is bloscEncode for the tests, benchmark and fuzz seeds.
func bloscCompress(src []byte, typesize, blocksize int, shuffle byte, codec byte) []byte {
	b, err := bloscEncode(src, typesize, blocksize, shuffle, codec)
	if err != nil {
		panic(err)
	}
	return b
}

// writeV2 writes a uint8 Zarr v2 array of shape and chunks whose chunks
// are blosc-zstd with byte shuffle.
func writeV2(t testing.TB, dir string, shape, chunks [3]int, data []byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format": 2, "shape": [` + ints(shape[:]) + `], "chunks": [` + ints(chunks[:]) + `],
 "dtype": "|u1", "compressor": {"id": "blosc", "cname": "zstd", "clevel": 1, "shuffle": 1, "blocksize": 0},
 "fill_value": 0, "filters": null, "order": "C"}`
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, chunks[0]*chunks[1]*chunks[2])
	for cz := 0; cz*chunks[0] < shape[0]; cz++ {
		for cy := 0; cy*chunks[1] < shape[1]; cy++ {
			for cx := 0; cx*chunks[2] < shape[2]; cx++ {
				clear(buf)
				for z := range chunks[0] {
					for y := range chunks[1] {
						for x := range chunks[2] {
							gz, gy, gx := cz*chunks[0]+z, cy*chunks[1]+y, cx*chunks[2]+x
							if gz < shape[0] && gy < shape[1] && gx < shape[2] {
								buf[(z*chunks[1]+y)*chunks[2]+x] = data[(gz*shape[1]+gy)*shape[2]+gx]
							}
						}
					}
				}
				name := fmt.Sprintf("%d.%d.%d", cz, cy, cx)
				if err := os.WriteFile(filepath.Join(dir, name), bloscCompress(buf, 1, 1<<16, bloscShuffle, 4), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
