package tiff

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/volume"
)

// hugeStack is a classic TIFF of two 65536×65536 uint8 pages (2^33
// voxels) in 4096 deflate strips of 16 rows each, every strip the same
// 16 rows (a 40 KiB file): pixel (y, x) of either page is hugePixel.
func hugeStack() []byte {
	const w, h, rps, strips = 65536, 65536, 16, 65536 / 16
	raw := make([]byte, rps*w)
	for y := range rps {
		for x := range w {
			raw[y*w+x] = hugePixel(y, x)
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	le := binary.LittleEndian
	const n = 9
	ifd := 2 + n*12 + 4
	offArr := uint32(8 + 2*ifd)
	cntArr := offArr + 4*strips
	data := cntArr + 4*strips
	b := []byte{'I', 'I', 42, 0, 8, 0, 0, 0}
	for page := range 2 {
		b = le.AppendUint16(b, n)
		for _, e := range [][3]uint32{
			{256, 4, w}, {257, 4, h}, {258, 3, 8}, {259, 3, 8}, {262, 3, 1},
			{273, 4, offArr}, {277, 3, 1}, {278, 4, rps}, {279, 4, cntArr},
		} {
			count := uint32(1)
			if e[0] == 273 || e[0] == 279 {
				count = strips
			}
			b = le.AppendUint16(b, uint16(e[0]))
			b = le.AppendUint16(b, uint16(e[1]))
			b = le.AppendUint32(b, count)
			b = le.AppendUint32(b, e[2])
		}
		next := uint32(0)
		if page == 0 {
			next = uint32(8 + ifd)
		}
		b = le.AppendUint32(b, next)
	}
	for range strips {
		b = le.AppendUint32(b, data)
	}
	for range strips {
		b = le.AppendUint32(b, uint32(z.Len()))
	}
	return append(b, z.Bytes()...)
}

func hugePixel(y, x int) byte { return byte((y%16)*13 + x%199) }

// TestHugeStack: a stack past 2^31 voxels opens (it is read strip by
// strip) and a region at its far corner, whose flat offsets are past
// 2^32, reads the strips' pixels; a whole read is refused naming the
// file.
func TestHugeStack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.tif")
	if err := os.WriteFile(path, hugeStack(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := volume.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h := f.Header(); h.Shape != [3]int{2, 65536, 65536} || h.Channels != 1 {
		t.Fatalf("header %+v", h)
	}
	box := volume.Box{Lo: [3]int{1, 65500, 65480}, Hi: [3]int{2, 65536, 65536}}
	lbl := make([]uint8, box.Voxels())
	if err := f.ReadLabels(box, lbl); err != nil {
		t.Fatal(err)
	}
	sz := box.Size()
	for i, v := range lbl {
		y, x := box.Lo[1]+i/sz[2], box.Lo[2]+i%sz[2]
		if v != hugePixel(y, x) {
			t.Fatalf("pixel (1, %d, %d): %d, want %d", y, x, v, hugePixel(y, x))
		}
	}
	err = f.ReadRegion(volume.Whole(f.Header().Shape), [][]float32{nil})
	if !errors.Is(err, volume.ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("whole read: %v, want ErrTooLarge naming %s", err, path)
	}
}
