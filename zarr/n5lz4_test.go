package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/voxtrain/voxtrain/internal/xxh32"
	"github.com/voxtrain/voxtrain/volume"
)

// n5LZ4Fixture is one dataset of testdata/n5lz4/expected.json, written by
// lz4-java (testdata/n5lz4/make_fixtures.sh).
type n5LZ4Fixture struct {
	Path   string `json:"path"`
	Dtype  string `json:"dtype"`
	Shape  [3]int `json:"shape"`
	SHA256 string `json:"sha256"`
	Voxels []struct {
		At    [3]int          `json:"at"`
		Value json.RawMessage `json:"value"`
	} `json:"voxels"`
}

// TestN5LZ4Conformance reads the N5 datasets lz4-java's
// LZ4BlockOutputStream compressed and compares every voxel (their sha256)
// with what the writer wrote, a few voxels by value, and region reads
// with the whole read.
func TestN5LZ4Conformance(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "n5lz4", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Fixtures []n5LZ4Fixture `json:"fixtures"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Fixtures) != 2 {
		t.Fatalf("%d fixtures, want 2", len(doc.Fixtures))
	}
	for _, want := range doc.Fixtures {
		t.Run(want.Path, func(t *testing.T) {
			path := filepath.Join("testdata", "n5lz4", want.Path)
			f, err := volume.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h := f.Header()
			if h.Shape != want.Shape || h.Channels != 1 {
				t.Fatalf("shape %v × %d channels, want %v × 1", h.Shape, h.Channels, want.Shape)
			}
			whole := readAll(t, f, volume.Whole(h.Shape))
			for _, v := range want.Voxels {
				var w float32
				switch s := string(v.Value); s {
				case `"NaN"`:
					w = float32(math.NaN())
				case `"Inf"`:
					w = float32(math.Inf(1))
				case `"-Inf"`:
					w = float32(math.Inf(-1))
				default:
					var x float64
					if err := json.Unmarshal(v.Value, &x); err != nil {
						t.Fatal(err)
					}
					w = float32(x)
				}
				p := v.At
				g := whole[0][(p[0]*h.Shape[1]+p[1])*h.Shape[2]+p[2]]
				if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
					t.Errorf("voxel %v = %g, want %g", p, g, w)
				}
			}
			if got := voxelSHA(whole); got != want.SHA256 {
				t.Fatalf("voxel sha256 %s, want %s", got, want.SHA256)
			}
			for _, box := range testBoxes(h.Shape) {
				if d := diffBox(readAll(t, f, box)[0], whole[0], h.Shape, box); d != "" {
					t.Fatalf("region %v: %s", box, d)
				}
			}
		})
	}
}

// lz4Frame is one frame's header, as the fixture checks see it.
type lz4Frame struct {
	token      byte
	clen, olen int
}

// lz4Frames lists the frames of an LZ4Block stream (no checks: the
// fixtures are well formed, or the conformance test fails).
func lz4Frames(t *testing.T, b []byte) []lz4Frame {
	t.Helper()
	var fs []lz4Frame
	for len(b) >= lz4BlockHeader {
		f := lz4Frame{b[8], int(binary.LittleEndian.Uint32(b[9:])), int(binary.LittleEndian.Uint32(b[13:]))}
		fs = append(fs, f)
		b = b[lz4BlockHeader+f.clen:]
	}
	return fs
}

// TestN5LZ4FixturesCover checks that the fixtures hold what they are
// there for: a block of several frames, raw and lz4 frames, an edge
// block cut to the dataset, a block size other than N5's default.
func TestN5LZ4FixturesCover(t *testing.T) {
	var multi, raw, lz, cut bool
	levels := map[byte]bool{}
	for _, ds := range []string{"u2.n5", "f4.n5"} {
		dir := filepath.Join("testdata", "n5lz4", ds)
		m, err := readArray(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == "attributes.json" {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			nd := int(binary.BigEndian.Uint16(b[2:]))
			for i := range nd {
				if int(binary.BigEndian.Uint32(b[4+4*i:])) < m.chunks[nd-1-i] {
					cut = true
				}
			}
			fs := lz4Frames(t, b[4+4*nd:])
			multi = multi || len(fs) > 2
			for _, f := range fs[:len(fs)-1] {
				raw = raw || f.token&0xf0 == lz4BlockRaw
				lz = lz || f.token&0xf0 == lz4BlockLZ4
				levels[f.token&0x0f] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !multi || !raw || !lz || !cut || len(levels) < 2 {
		t.Fatalf("several frames %v, raw %v, lz4 %v, edge block %v, levels %v", multi, raw, lz, cut, levels)
	}
}

// lz4BlockStream writes data as LZ4BlockOutputStream does, frames of
// frameSize bytes (level from it), then the end frame.
func lz4BlockStream(data []byte, frameSize int) []byte {
	level := 0
	for 1<<(lz4BlockLevel0+level) < frameSize {
		level++
	}
	var out bytes.Buffer
	frame := func(method byte, body []byte, olen int, check uint32) {
		var h [lz4BlockHeader]byte
		copy(h[:], lz4BlockMagic)
		h[8] = method | byte(level)
		binary.LittleEndian.PutUint32(h[9:], uint32(len(body)))
		binary.LittleEndian.PutUint32(h[13:], uint32(olen))
		binary.LittleEndian.PutUint32(h[17:], check)
		out.Write(h[:])
		out.Write(body)
	}
	for len(data) > 0 {
		n := min(frameSize, len(data))
		chunk := data[:n]
		data = data[n:]
		check := xxh32.Checksum(chunk, lz4BlockSeed) & lz4BlockCheckMask
		comp := make([]byte, lz4.CompressBlockBound(n))
		if c, err := lz4.CompressBlock(chunk, comp, nil); err == nil && c > 0 && c < n {
			frame(lz4BlockLZ4, comp[:c], n, check)
		} else {
			frame(lz4BlockRaw, chunk, n, check)
		}
	}
	frame(lz4BlockRaw, nil, 0, 0)
	return out.Bytes()
}

// testLZ4Data is n bytes of which the first half compresses and the rest
// does not.
func testLZ4Data(n int) []byte {
	b := make([]byte, n)
	x := uint32(1)
	for i := range b {
		if i < n/2 {
			b[i] = byte(i / 16 % 7)
		} else {
			x = x*1664525 + 1013904223
			b[i] = byte(x >> 24)
		}
	}
	return b
}

func TestN5LZ4Decode(t *testing.T) {
	for _, tc := range []struct{ n, frame int }{{0, 1 << 16}, {1, 64}, {5000, 1024}, {3000, 1 << 16}, {200000, 1 << 16}} {
		data := testLZ4Data(tc.n)
		s := lz4BlockStream(data, tc.frame)
		got, err := n5LZ4Codec{}.decode(s, tc.n, true)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes in frames of %d: err %v, equal %v", tc.n, tc.frame, err, bytes.Equal(got, data))
		}
		// Not the last codec: the bound is an upper one.
		got, err = n5LZ4Codec{}.decode(s, tc.n+100, false)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes, bound %d: err %v", tc.n, tc.n+100, err)
		}
	}
}

// TestN5LZ4Malformed damages a stream of three frames (1024-byte frames
// of 2500 bytes: lz4, lz4 then raw; frame 1 at byte off1) and checks each
// damage is an error naming the frame and what is wrong.
func TestN5LZ4Malformed(t *testing.T) {
	data := testLZ4Data(2500)
	good := lz4BlockStream(data, 1024)
	fs := lz4Frames(t, good)
	if len(fs) != 4 || fs[0].token != lz4BlockLZ4 || fs[2].token != lz4BlockRaw {
		t.Fatalf("frames %+v, want lz4, …, raw, end", fs)
	}
	off1 := lz4BlockHeader + fs[0].clen
	off2 := off1 + lz4BlockHeader + fs[1].clen
	end := len(good) - lz4BlockHeader
	put := func(at int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[at:], v); return b }
	}
	cases := []struct {
		name   string
		damage func([]byte) []byte
		size   int
		want   []string
	}{
		{"bad magic", func(b []byte) []byte { b[off1+3] = 'x'; return b }, 2500, []string{"frame 1", "magic"}},
		{"method", func(b []byte) []byte { b[off1+8] = 0x30; return b }, 2500, []string{"frame 1", "compression method 0x30"}},
		{"negative compressed length", put(off1+9, 0xffffff00), 2500, []string{"frame 1", "compressed length -256"}},
		{"negative decompressed length", put(off1+13, 0x80000000), 2500, []string{"frame 1", "decompressed length -2147483648"}},
		{"over the level's block size", put(off1+13, 1025), 2500, []string{"frame 1", "over the token's block size 1024"}},
		{"past the block", nil, 2000, []string{"frame 1", "past the block's 2000 bytes"}},
		{"raw lengths disagree", put(off2+9, uint32(fs[2].clen-1)), 2500, []string{"frame 2", "raw, but compressed length"}},
		{"zero compressed length", put(off1+9, 0), 2500, []string{"frame 1", "compressed length 0 with decompressed length 1024"}},
		{"compressed length past the stream", put(off1+9, 1<<20), 2500, []string{"frame 1", "truncated"}},
		{"truncated header", func(b []byte) []byte { return b[:off2+10] }, 2500, []string{"frame 2", "header truncated: 10 of its 21 bytes"}},
		{"truncated data", func(b []byte) []byte { return b[:off2+30] }, 2500, []string{"frame 2", "only 9 bytes follow"}},
		{"checksum", func(b []byte) []byte { b[off2+lz4BlockHeader+5] ^= 1; return b }, 2500, []string{"frame 2", "checksum"}},
		{"corrupt lz4 data", func(b []byte) []byte {
			for i := off1 + lz4BlockHeader; i < off2; i++ {
				b[i] = 0xff
			}
			return b
		}, 2500, []string{"frame 1", "lz4:"}},
		{"no end frame", func(b []byte) []byte { return b[:end] }, 2500, []string{"frame 3", "without its end frame"}},
		{"end frame checksum", put(end+17, 1), 2500, []string{"frame 3", "end frame with checksum"}},
		{"after the end frame", func(b []byte) []byte { return append(b, 0) }, 2500, []string{"frame 3", "1 bytes after the end frame"}},
		{"ends early", nil, 3000, []string{"frame 3", "ends at 2500 bytes, the block holds 3000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(good)
			if tc.damage != nil {
				b = tc.damage(b)
			}
			_, err := n5LZ4Codec{}.decode(b, tc.size, true)
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

// TestN5LZ4ChecksumMask: lz4-java stores the low 28 bits of XXH32 (the
// Checksum view masks getValue with 0xFFFFFFF); the whole 32-bit value
// is not what it writes, and is refused where the two differ.
func TestN5LZ4ChecksumMask(t *testing.T) {
	for n := 1; ; n++ {
		data := testLZ4Data(n)
		full := xxh32.Checksum(data, lz4BlockSeed)
		if full>>28 == 0 {
			continue
		}
		s := lz4BlockStream(data, 1024)
		if _, err := (n5LZ4Codec{}).decode(s, n, true); err != nil {
			t.Fatalf("masked checksum: %v", err)
		}
		binary.LittleEndian.PutUint32(s[17:], full)
		if _, err := (n5LZ4Codec{}).decode(s, n, true); err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("whole 32-bit checksum %#x: err %v", full, err)
		}
		return
	}
}
