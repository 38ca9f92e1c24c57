package npy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// values is the fixtures' array: (arange(n) − 17) / 7 as float32, n the
// product of shape (see testdata/make_fixtures.py).
func values(shape ...int) Array {
	n := 1
	for _, s := range shape {
		n *= s
	}
	a := Array{Shape: shape, Data: make([]float32, n)}
	for i := range a.Data {
		a.Data[i] = float32(float64(i-17) / 7)
	}
	return a
}

func sameArray(t *testing.T, what string, got, want Array) {
	t.Helper()
	if !slices.Equal(got.Shape, want.Shape) || !slices.Equal(got.Data, want.Data) {
		t.Errorf("%s: shape %v data %v…, want shape %v data %v…", what, got.Shape, got.Data[:min(4, len(got.Data))],
			want.Shape, want.Data[:min(4, len(want.Data))])
	}
}

// TestReadNumpyFiles reads what numpy wrote: np.savez (stored),
// np.savez_compressed (deflated) and np.save of a 0-d array.
func TestReadNumpyFiles(t *testing.T) {
	for _, name := range []string{"numpy_savez.npz", "numpy_compressed.npz"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadNPZ(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 2 {
			t.Errorf("%s: %d arrays, want 2", name, len(got))
		}
		sameArray(t, name+" probabilities", got["probabilities"], values(2, 3, 4, 5))
		sameArray(t, name+" one", got["one"], values(3))
	}
	f, err := os.Open(filepath.Join("testdata", "numpy_scalar.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	sameArray(t, "numpy_scalar.npy", a, values())
}

// TestWriteMatchesGolden: the archive written here is byte for byte
// testdata/go_written.npz, the file make_fixtures.py has numpy load and
// compare (so numpy reads what Write writes). NPY_UPDATE=1 rewrites it.
func TestWriteMatchesGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteNPZ(&b, Named{"probabilities", values(2, 3, 4, 5)}, Named{"one", values(3)}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "go_written.npz")
	if os.Getenv("NPY_UPDATE") == "1" {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("WriteNPZ wrote %d bytes differing from %s (%d bytes)", b.Len(), golden, len(want))
	}
	// Every header pads the preamble to 64 bytes, as numpy's.
	for _, a := range []Array{values(2, 3, 4, 5), values(3), values(), values(0)} {
		if h := header(a); len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Errorf("shape %v: header of %d bytes %q", a.Shape, len(h), h)
		}
	}
	if h := string(header(values(3))); !strings.Contains(h, "'shape': (3,)") {
		t.Errorf("a one-dimensional shape is a one-tuple: %q", h)
	}
}

// TestRoundTrip: arrays of several shapes come back as written.
func TestRoundTrip(t *testing.T) {
	arrays := []Named{{"a", values(4, 1, 2, 3)}, {"empty", values(0, 5)}, {"s", values()}}
	var b bytes.Buffer
	if err := WriteNPZ(&b, arrays...); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNPZ(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arrays {
		sameArray(t, a.Name, got[a.Name], a.Array)
	}
}

// TestErrors: a shape the data does not fill, a bad name, and files that
// are not what Read reads are errors saying so.
func TestErrors(t *testing.T) {
	var b bytes.Buffer
	for _, c := range []struct {
		a    Named
		want string
	}{
		{Named{"x", Array{Shape: []int{2, 3}, Data: make([]float32, 5)}}, "shape [2 3] holds 6 values, the data has 5"},
		{Named{"a/b", values(1)}, "array name"},
		{Named{"x", Array{Shape: []int{-1}}}, "negative dimension"},
	} {
		if err := WriteNPZ(&b, c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteNPZ %v: %v, want %q", c.a.Shape, err, c.want)
		}
	}
	good := func() []byte {
		var b bytes.Buffer
		if err := Write(&b, values(2)); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		raw  []byte
		want string
	}{
		{[]byte("PK\x03\x04\x14\x00\x00\x00"), "not a .npy file"},
		{[]byte("\x93NUM"), "short file"},
		{[]byte(strings.Replace(string(good()), "<f4", "<f8", 1)), `dtype "<f8"`},
		{[]byte(strings.Replace(string(good()), "False", "True ", 1)), "Fortran-order"},
		{good()[:len(good())-3], "data of shape [2]"},
	} {
		if _, err := Read(bytes.NewReader(c.raw)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read: %v, want %q", err, c.want)
		}
	}
	if _, err := ReadNPZ(bytes.NewReader(good()), int64(len(good()))); err == nil || !strings.Contains(err.Error(), "npz") {
		t.Errorf("ReadNPZ of a .npy: %v", err)
	}
}
