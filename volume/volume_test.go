package volume

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestBox(t *testing.T) {
	b := Box{Lo: [3]int{1, 2, 3}, Hi: [3]int{4, 4, 8}}
	if b.Size() != [3]int{3, 2, 5} || b.Voxels() != 30 || b.Empty() {
		t.Errorf("box %v: size %v, voxels %d, empty %v", b, b.Size(), b.Voxels(), b.Empty())
	}
	if (Box{Lo: [3]int{2, 0, 0}, Hi: [3]int{1, 5, 5}}).Empty() != true || (Box{Lo: [3]int{2, 0, 0}, Hi: [3]int{1, 5, 5}}).Size() != [3]int{0, 5, 5} {
		t.Error("an inverted axis is empty, of size 0")
	}
	w := Whole([3]int{4, 4, 8})
	if !w.Contains(b) || b.Contains(w) || !b.Contains(Box{}) {
		t.Error("Contains")
	}
}

type fakeFile struct{ File }

func TestRegisterAndOpen(t *testing.T) {
	Register(Format{Name: "fake", Match: func(p string) bool { return strings.HasSuffix(p, ".fake") },
		Open: func(p string) (File, error) { return fakeFile{}, nil }})
	if f, err := Open("a.fake"); err != nil || f == nil {
		t.Fatalf("Open a.fake: %v", err)
	}
	if _, err := Open("a.unknown"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "a.unknown") || !strings.Contains(err.Error(), "fake") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestURLsOnlyToFormatsThatReadThem: a URL goes to a format that says it
// reads URLs, never to one that reads files only.
func TestURLsOnlyToFormatsThatReadThem(t *testing.T) {
	Register(Format{Name: "filefake", Match: func(p string) bool { return strings.HasSuffix(p, ".ffake") },
		Open: func(p string) (File, error) { return fakeFile{}, nil }})
	Register(Format{Name: "urlfake", Match: func(p string) bool { return strings.HasSuffix(p, ".ufake") },
		Open: func(p string) (File, error) { return fakeFile{}, nil }, URLs: true})
	for _, c := range []struct {
		path     string
		url, ok  bool
		readsURL bool
	}{
		{"HTTPS://h.org/a.ufake", true, true, true},
		{"http://h.org/a.ffake", true, false, false},
		{"/data/http://a.ffake", false, true, false},
		{"a.ufake", false, true, false},
	} {
		_, err := Open(c.path)
		if IsURL(c.path) != c.url || (err == nil) != c.ok || ReadsURL(c.path) != c.readsURL {
			t.Errorf("%s: IsURL %v, Open err %v, ReadsURL %v", c.path, IsURL(c.path), err, ReadsURL(c.path))
		}
	}
}

// TestCheckShapeOverflow: axes whose product wraps an int64 are too many
// voxels to address, and so is anything past 2^53; a volume past 2^31
// voxels (an OpenOrganelle s0, 2^36, 2^53 itself) is addressable.
func TestCheckShapeOverflow(t *testing.T) {
	for _, s := range [][3]int{{1 << 32, 1 << 32, 1}, {1 << 31, 1 << 31, 4}, {1 << 31, 1 << 22, 2}, {1, 0, 1}, {-1, 4, 4}} {
		if CheckShape(s) == nil {
			t.Errorf("CheckShape(%v) accepted", s)
		}
	}
	for _, s := range [][3]int{{1 << 10, 1 << 10, 1 << 10}, {1 << 16, 1 << 16, 1}, {12000, 1600, 6368}, {4096, 4096, 4096}, {1 << 31, 1 << 22, 1}} {
		if err := CheckShape(s); err != nil {
			t.Error(err)
		}
	}
}

// TestCheckInMemory: up to 2^31−1 values (voxels × channels) may be
// decoded at once; past that the error wraps ErrTooLarge, gives the
// shape and says to read by region.
func TestCheckInMemory(t *testing.T) {
	for _, c := range []struct {
		shape    [3]int
		channels int
		ok       bool
	}{
		{[3]int{1024, 1024, 2047}, 1, true},
		{[3]int{1, 1, MaxInMemory}, 1, true},
		{[3]int{1, 1, MaxInMemory + 1}, 1, false},
		{[3]int{1024, 1024, 1023}, 2, true},
		{[3]int{1024, 1024, 1024}, 2, false}, // 2^31 values
		{[3]int{1024, 1024, 1024}, 1, true},
		{[3]int{1024, 1024, 2048}, 1, false},
		{[3]int{1 << 32, 1 << 32, 1 << 32}, 1, false}, // wraps an int64
	} {
		err := CheckInMemory(c.shape, c.channels)
		if (err == nil) != c.ok {
			t.Errorf("CheckInMemory(%v, %d): %v, want ok %v", c.shape, c.channels, err, c.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("%d×%d×%d voxels", c.shape[0], c.shape[1], c.shape[2])) || !strings.Contains(err.Error(), "by region")) {
			t.Errorf("CheckInMemory(%v, %d): %q, want ErrTooLarge naming the shape and reading by region", c.shape, c.channels, err)
		}
	}
}

// TestToLabels: integers 0..255 become bytes; a fraction, a negative or a
// value above 255 is an error naming the file, the voxel and the value.
func TestToLabels(t *testing.T) {
	dst := make([]uint8, 3)
	if err := ToLabels(dst, []float32{0, 2, 255}, "l.nii"); err != nil || dst[1] != 2 || dst[2] != 255 {
		t.Fatalf("%v %v", dst, err)
	}
	for _, bad := range []float32{1.5, -1, 256} {
		err := ToLabels(dst, []float32{0, bad}, "l.nii")
		if err == nil || !strings.Contains(err.Error(), "l.nii: voxel 1 has value") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestWriteLabelsDispatch: a label map goes to the writer of the format
// its name matches (by WriteMatch where set, so a format that matches
// folders does not claim a folder name); endings are found longest
// first; a format without a writer, or no format, is an error naming the
// file.
func TestWriteLabelsDispatch(t *testing.T) {
	var wrote []string
	Register(Format{Name: "wfake", Match: func(p string) bool {
		return strings.HasSuffix(strings.ToLower(p), ".wfake") || strings.HasSuffix(p, ".wfake.gz") || strings.HasSuffix(p, "dir")
	},
		WriteMatch: func(p string) bool {
			return strings.HasSuffix(strings.ToLower(p), ".wfake") || strings.HasSuffix(p, ".wfake.gz")
		},
		Open: func(p string) (File, error) { return fakeFile{}, nil },
		WriteLabels: func(p string, h Header, l []uint8) error {
			wrote = append(wrote, fmt.Sprintf("%s %v %v", p, h.Shape, l))
			return nil
		},
		Endings: []string{".wfake", ".wfake.gz"},
		Files:   func(p string) []string { return []string{p, p + ".side"} }})
	Register(Format{Name: "rfake", Match: func(p string) bool { return strings.HasSuffix(p, ".rfake") },
		Open: func(p string) (File, error) { return fakeFile{}, nil }, Endings: []string{".rfake"}})

	h := Header{Shape: [3]int{1, 1, 2}}
	if err := WriteLabels("a.WFAKE", h, []uint8{1, 2}); err != nil || !slices.Equal(wrote, []string{"a.WFAKE [1 1 2] [1 2]"}) {
		t.Errorf("write: %v, %q", err, wrote)
	}
	for path, want := range map[string]string{
		"a.wfake": "1 labels for a 1×1×2 grid", "a.rfake": "a.rfake: voxtrain writes no rfake label maps",
		"a.png": "a.png: no volume format", "somedir": "somedir: no volume format",
	} {
		if err := WriteLabels(path, h, []uint8{1}[:min(1, len(path))]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WriteLabels(%s): %v, want %q", path, err, want)
		}
	}
	if !Writes("b.wfake.gz") || Writes("b.rfake") || Writes("somedir") || Writes("b.png") {
		t.Error("Writes")
	}
	if got := WrittenFiles("b.wfake"); !slices.Equal(got, []string{"b.wfake", "b.wfake.side"}) {
		t.Errorf("WrittenFiles: %q", got)
	}
	if got := WrittenFiles("b.rfake"); !slices.Equal(got, []string{"b.rfake"}) {
		t.Errorf("WrittenFiles of a format with no Files: %q", got)
	}
	for name, want := range map[string]string{"c.wfake.gz": ".wfake.gz", "C.WFAKE": ".WFAKE", "c.rfake": ".rfake", "c.gz": "", ".rfake": ""} {
		if got := FileEnding(name); got != want {
			t.Errorf("FileEnding(%s) = %q, want %q", name, got, want)
		}
	}
	e := Endings()
	if i, j := slices.Index(e, ".wfake.gz"), slices.Index(e, ".wfake"); i < 0 || j < 0 || i > j {
		t.Errorf("Endings %q: want .wfake.gz before .wfake", e)
	}
}
