package volume

import (
	"errors"
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

// TestCheckShapeOverflow: axes whose product wraps an int64 are still too
// many voxels.
func TestCheckShapeOverflow(t *testing.T) {
	for _, s := range [][3]int{{1 << 32, 1 << 32, 1}, {1 << 31, 1 << 31, 4}, {1 << 16, 1 << 16, 1}} {
		if CheckShape(s) == nil {
			t.Errorf("CheckShape(%v) accepted", s)
		}
	}
	if err := CheckShape([3]int{1 << 10, 1 << 10, 1 << 10}); err != nil {
		t.Error(err)
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
