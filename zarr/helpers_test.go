package zarr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

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
func readErr(path string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := f.Header()
	dst := make([][]float32, h.Channels)
	for c := range dst {
		dst[c] = make([]float32, volume.Whole(h.Shape).Voxels())
	}
	return f.ReadRegion(volume.Whole(h.Shape), dst)
}

// bloscCompress is a minimal blosc writer (container format 2) for the
// tests, benchmark and fuzz seeds: each block split per byte of the type
// when blosc would, compressed by codec (0 raw-only, 1 lz4, 2 snappy,
// 3 zlib, 4 zstd); a split that does not shrink is stored raw.
func bloscCompress(src []byte, typesize, blocksize int, shuffle byte, codec byte) []byte {
	nbytes := len(src)
	nblocks := (nbytes + blocksize - 1) / blocksize
	hdr := make([]byte, bloscHeader+4*nblocks)
	hdr[0], hdr[1], hdr[2], hdr[3] = 2, 1, shuffle|codec<<5, byte(typesize)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(blocksize))
	out := bytes.NewBuffer(hdr)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	for j := range nblocks {
		binary.LittleEndian.PutUint32(out.Bytes()[bloscHeader+4*j:], uint32(out.Len()))
		block := src[j*blocksize : min(nbytes, (j+1)*blocksize)]
		leftover := len(block) < blocksize
		buf := block
		if shuffle == bloscShuffle && typesize > 1 {
			buf = make([]byte, len(block))
			n := len(block) / typesize
			for i := range n {
				for k := range typesize {
					buf[k*n+i] = block[i*typesize+k]
				}
			}
			copy(buf[n*typesize:], block[n*typesize:])
		}
		nsplits := 1
		if typesize <= bloscMaxSplits && len(block)/typesize >= bloscMinBuffer && !leftover {
			nsplits = typesize
		}
		ne := len(block) / nsplits
		for s := range nsplits {
			part := buf[s*ne : (s+1)*ne]
			var c []byte
			switch codec {
			case 1:
				c = make([]byte, lz4.CompressBlockBound(len(part)))
				n, _ := lz4.CompressBlock(part, c, nil)
				c = c[:n]
			case 2:
				c = s2.EncodeSnappy(nil, part)
			case 3:
				var zb bytes.Buffer
				w := zlib.NewWriter(&zb)
				w.Write(part)
				w.Close()
				c = zb.Bytes()
			case 4:
				c = enc.EncodeAll(part, nil)
			}
			if len(c) == 0 || len(c) >= len(part) {
				c = part
			}
			var n [4]byte
			binary.LittleEndian.PutUint32(n[:], uint32(len(c)))
			out.Write(n[:])
			out.Write(c)
		}
	}
	b := out.Bytes()
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
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
