package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func randomCase(r *rand.Rand, shape [3]int, channels int) ([][]float32, []uint8) {
	vox := shape[0] * shape[1] * shape[2]
	img := make([][]float32, channels)
	for c := range img {
		img[c] = make([]float32, vox)
		for i := range img[c] {
			// Quantised values, like a normalised integer image: compressible.
			img[c][i] = float32(r.IntN(50)) * 0.37
		}
	}
	lbl := make([]uint8, vox)
	for i := range lbl {
		if r.IntN(10) == 0 {
			lbl[i] = uint8(1 + r.IntN(2))
		}
	}
	return img, lbl
}

func crop[T any](vol []T, shape, lo, hi [3]int) []T {
	var out []T
	for z := lo[0]; z < hi[0]; z++ {
		for y := lo[1]; y < hi[1]; y++ {
			s := (z*shape[1]+y)*shape[2] + lo[2]
			out = append(out, vol[s:s+hi[2]-lo[2]]...)
		}
	}
	return out
}

// stats describes files with Stat.
func stats(t *testing.T, files []string) []SourceFile {
	var out []SourceFile
	for _, f := range files {
		s, err := Stat(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// writeOneCase makes the store dir/st (preprocessing prep, chunk edge 4,
// S2) holding case "c": a random one-channel image of shape drawn with
// seed, no label, made from the source file dir/i.nii. It returns the
// store's folder.
func writeOneCase(t *testing.T, dir, prep string, shape [3]int, seed uint64) string {
	t.Helper()
	src := writeSources(t, dir, "i.nii")
	img, _ := randomCase(rand.New(rand.NewPCG(seed, seed)), shape, 1)
	st := filepath.Join(dir, "st")
	w, err := NewWriter(st, []byte(prep), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("c", stats(t, src), shape, img, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return st
}

// writeSources writes small files with the given names into dir as a
// case's source files and returns their paths.
func writeSources(t *testing.T, dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("source "+n), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestRegionReadsEqualCrops(t *testing.T) {
	for _, codec := range []string{CodecS2, CodecZstd, CodecS2Shuffle, CodecZstdShuffle, CodecRaw} {
		for _, chunk := range []int{8, 13} {
			t.Run(fmt.Sprintf("%s/%d", codec, chunk), func(t *testing.T) {
				dir := t.TempDir()
				r := rand.New(rand.NewPCG(1, uint64(chunk)))
				shape := [3]int{21, 30, 17}
				img, lbl := randomCase(r, shape, 2)
				src := writeSources(t, dir, "a.nii", "b.nii")
				w, err := NewWriter(filepath.Join(dir, "st"), []byte(`{"n":1}`), chunk, codec)
				if err != nil {
					t.Fatal(err)
				}
				extra := []byte("fg-index-bytes")
				if err := w.Put("case_1", stats(t, src), shape, img, lbl, extra); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				st, err := Open(filepath.Join(dir, "st"))
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				c, err := st.Case("case_1")
				if err != nil {
					t.Fatal(err)
				}
				if string(c.Extra) != string(extra) || c.Shape != shape || c.Channels != 2 || !c.HasLabel {
					t.Fatalf("case header %+v", c)
				}
				var sc Scratch
				for it := 0; it < 60; it++ {
					var lo, hi [3]int
					for a := range 3 {
						lo[a] = r.IntN(shape[a])
						hi[a] = lo[a] + 1 + r.IntN(shape[a]-lo[a])
					}
					if it == 0 {
						lo, hi = [3]int{}, shape
					}
					n := (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
					gi := [][]float32{make([]float32, n), make([]float32, n)}
					gl := make([]uint8, n)
					if err := c.ReadRegion(lo, hi, gi, gl, &sc); err != nil {
						t.Fatal(err)
					}
					for ch := range gi {
						want := crop(img[ch], shape, lo, hi)
						for i := range want {
							if gi[ch][i] != want[i] {
								t.Fatalf("region [%v,%v) channel %d voxel %d: %v, want %v", lo, hi, ch, i, gi[ch][i], want[i])
							}
						}
					}
					want := crop(lbl, shape, lo, hi)
					for i := range want {
						if gl[i] != want[i] {
							t.Fatalf("region [%v,%v) label voxel %d: %v, want %v", lo, hi, i, gl[i], want[i])
						}
					}
				}
				// Only overlapping chunks are decompressed: a region inside one
				// chunk costs one chunk per array.
				sc.Chunks = 0
				one := [][]float32{make([]float32, 1), make([]float32, 1)}
				if err := c.ReadRegion([3]int{1, 1, 1}, [3]int{2, 2, 2}, one, make([]uint8, 1), &sc); err != nil {
					t.Fatal(err)
				}
				if sc.Chunks != 3 {
					t.Errorf("one-voxel read decompressed %d chunks, want 3 (2 channels + label)", sc.Chunks)
				}
			})
		}
	}
}

func TestCurrentDetectsChanges(t *testing.T) {
	dir := t.TempDir()
	src := writeSources(t, dir, "img.nii", "lbl.nii")
	r := rand.New(rand.NewPCG(2, 2))
	img, lbl := randomCase(r, [3]int{4, 5, 6}, 1)
	w, err := NewWriter(filepath.Join(dir, "st"), []byte(`{}`), 4, CodecS2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("c", stats(t, src), [3]int{4, 5, 6}, img, lbl, nil); err != nil {
		t.Fatal(err)
	}
	e := w.Entry("c")
	if ok, _, why, err := Current(e, src); !ok || err != nil {
		t.Fatalf("fresh entry stale: %s %v", why, err)
	}
	// Same content, new mtime: still current (hash equal), mtime refreshed.
	later := time.Now().Add(time.Hour)
	os.Chtimes(src[0], later, later)
	ok, now, why, err := Current(e, src)
	if !ok || err != nil {
		t.Fatalf("touched file made the case stale: %s %v", why, err)
	}
	if now[0].ModTime == e.Sources[0].ModTime {
		t.Error("refreshed sources keep the old mtime")
	}
	// Changed content: stale.
	os.WriteFile(src[1], []byte("different label bytes"), 0o644)
	if ok, _, why, _ := Current(e, src); ok || !strings.Contains(why, "lbl.nii") {
		t.Errorf("changed file not detected (ok %v, why %q)", ok, why)
	}
	// Same size, same mtime, different bytes is not detected without a
	// hash; documented. A different file list is.
	if ok, _, _, _ := Current(e, src[:1]); ok {
		t.Error("a shorter file list is current")
	}
}

func TestWriterKeepsOnlyCompatibleCases(t *testing.T) {
	st := writeOneCase(t, t.TempDir(), `{"norm":"zscore"}`, [3]int{3, 3, 3}, 3)
	w2, _ := NewWriter(st, []byte(`{"norm":"zscore"}`), 4, CodecS2)
	if w2.Entry("c") == nil {
		t.Error("same preprocessing dropped the case")
	}
	w3, _ := NewWriter(st, []byte(`{"norm":"none"}`), 4, CodecS2)
	if w3.Entry("c") != nil {
		t.Error("changed preprocessing kept the case")
	}
}

func TestCorruptCaseFile(t *testing.T) {
	stDir := writeOneCase(t, t.TempDir(), `{}`, [3]int{9, 9, 9}, 4)
	path := filepath.Join(stDir, "c.vxs")
	b, _ := os.ReadFile(path)
	// Flip bytes in the middle of the chunk data.
	for i := len(b) - 200; i < len(b)-100; i++ {
		b[i] ^= 0x5a
	}
	os.WriteFile(path, b, 0o644)
	s, err := Open(stDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Case("c")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.DecodeAll(&Scratch{})
	if err == nil || !strings.Contains(err.Error(), "c.vxs") {
		t.Errorf("corrupt chunk: %v, want an error naming the file", err)
	}
	os.WriteFile(path, []byte("garbage"), 0o644)
	s2, _ := Open(stDir)
	if _, err := s2.Case("c"); err == nil || !strings.Contains(err.Error(), "c.vxs") {
		t.Errorf("garbage file: %v", err)
	}
}

// TestRawCodec: a raw store's chunks are stored uncompressed and aligned,
// read through a memory map on unix, and a raw file whose chunk table does
// not match its chunks is refused with its name.
func TestRawCodec(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 3))
	shape := [3]int{9, 10, 11}
	img, lbl := randomCase(r, shape, 1)
	src := writeSources(t, dir, "a.nii")
	w, err := NewWriter(filepath.Join(dir, "st"), []byte(`{}`), 4, CodecRaw)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("c", stats(t, src), shape, img, lbl, []byte("odd-length extra")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "st", w.Entry("c").File)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	vox := int64(shape[0] * shape[1] * shape[2])
	if min := 5 * vox; fi.Size() < min || fi.Size() > min+4096 {
		t.Errorf("raw case file of %d bytes for %d voxels (float32 + uint8: %d)", fi.Size(), vox, min)
	}
	st, err := Open(filepath.Join(dir, "st"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Case("c")
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && c.mm == nil {
		t.Error("raw case not memory-mapped on linux")
	}
	var sc Scratch
	got, gotL, err := c.DecodeAll(&sc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range img[0] {
		if got[0][i] != img[0][i] || gotL[i] != lbl[i] {
			t.Fatalf("voxel %d: %v/%d, want %v/%d", i, got[0][i], gotL[i], img[0][i], lbl[i])
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Shorten the file: the chunk table now points past its end.
	if err := os.Truncate(path, fi.Size()-7); err != nil {
		t.Fatal(err)
	}
	st, err = Open(filepath.Join(dir, "st"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Case("c"); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated raw case: err %v, want one naming %s", err, path)
	}
}
