package tiff

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// diagHeader is a header of shape with spacing (D, H, W) on the diagonal.
func diagHeader(shape [3]int, spacing [3]float64, unit string) volume.Header {
	h := volume.Header{Shape: shape, Channels: 1, Spacing: spacing, Unit: unit}
	for i := range 3 {
		h.Affine[2-i][2-i] = spacing[i]
	}
	h.Affine[3][3] = 1
	return h
}

// testLabels are n labels of a few classes, with runs (as a segmentation
// has) and noise (so that strips differ).
func testLabels(n int, seed uint64) []uint8 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]uint8, n)
	for i := range l {
		l[i] = uint8(i / 37 % 5)
		if r.IntN(10) == 0 {
			l[i] = uint8(r.IntN(256))
		}
	}
	return l
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestWriteRoundTrip writes label maps through volume.WriteLabels and
// reads them with volume.Open: shape, spacing, unit and every label come
// back, and the nnU-Net sidecar holds the exact spacing.
func TestWriteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct {
		name    string
		shape   [3]int
		spacing [3]float64
		unit    string
	}{
		{"a.tif", [3]int{5, 6, 7}, [3]float64{2.5, 0.75, 0.5}, "micrometer"},
		{"b.tiff", [3]int{3, 200, 1000}, [3]float64{0.3, 0.7, 1.0 / 3}, "millimeter"}, // several strips a page
		{"c.TIF", [3]int{1, 4, 4}, [3]float64{40, 4, 4}, "nanometer"},
		{"d.tif", [3]int{4, 9, 8}, [3]float64{1, 1, 1}, ""},
		{"e.tif", [3]int{2, 3, 70000}, [3]float64{1.5, 1e-4, 123.456}, "angstrom"}, // a row wider than a strip's target
		{"f.tif", [3]int{2, 3, 4}, [3]float64{1, 2, 3}, "µinch"},                   // escaped \u00B5 and back
		{"g_0000.tif", [3]int{2, 3, 4}, [3]float64{0.1, 0.2, 0.3}, "centimeter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			n := c.shape[0] * c.shape[1] * c.shape[2]
			labels := testLabels(n, uint64(i))
			if !volume.Writes(p) {
				t.Fatalf("volume.Writes(%s) = false", p)
			}
			if err := volume.WriteLabels(p, diagHeader(c.shape, c.spacing, c.unit), labels); err != nil {
				t.Fatal(err)
			}
			h, got := volumetest.ReadLabels(t, p)
			if h.Shape != c.shape || h.Channels != 1 || h.Unit != c.unit {
				t.Errorf("shape %v × %d, unit %q; want %v × 1, %q", h.Shape, h.Channels, h.Unit, c.shape, c.unit)
			}
			for a := range 3 {
				if !near(h.Spacing[a], c.spacing[a]) || !near(h.Affine[2-a][2-a], c.spacing[a]) {
					t.Errorf("spacing %v affine %v, want %v", h.Spacing, h.Affine, c.spacing)
				}
			}
			if !bytes.Equal(got, labels) {
				t.Error("the labels read differ from those written")
			}
			// The TIFF alone, without its sidecar: the ImageJ metadata
			// gives the same geometry.
			alone := filepath.Join(t.TempDir(), "x.tif")
			if err := os.WriteFile(alone, mustRead(t, p), 0o644); err != nil {
				t.Fatal(err)
			}
			ha, _ := volumetest.ReadLabels(t, alone)
			if ha.Unit != c.unit {
				t.Errorf("without the sidecar: unit %q, want %q", ha.Unit, c.unit)
			}
			for a := range 3 {
				if !near(ha.Spacing[a], c.spacing[a]) {
					t.Errorf("without the sidecar: spacing %v, want %v", ha.Spacing, c.spacing)
				}
			}
			var sc struct{ Spacing []float64 }
			if err := json.Unmarshal(mustRead(t, strings.TrimSuffix(p, filepath.Ext(p))+".json"), &sc); err != nil {
				t.Fatal(err)
			}
			if len(sc.Spacing) != 3 || [3]float64(sc.Spacing) != c.spacing {
				t.Errorf("sidecar spacing %v, want exactly %v", sc.Spacing, c.spacing)
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteOblique: a TIFF keeps the voxel size (the affine's column
// norms), not the direction or the origin.
func TestWriteOblique(t *testing.T) {
	c, s := math.Cos(math.Pi/6), math.Sin(math.Pi/6)
	h := volume.Header{Shape: [3]int{2, 3, 4}, Spacing: [3]float64{9, 9, 9}, Unit: "millimeter"}
	// Columns x, y, z: spacing 0.25, 0.5, 2 rotated about z; an origin.
	h.Affine = volume.Affine{
		{0.25 * c, -0.5 * s, 0, 10},
		{0.25 * s, 0.5 * c, 0, -20},
		{0, 0, 2, 30},
		{0, 0, 0, 1},
	}
	p := filepath.Join(t.TempDir(), "o.tif")
	if err := WriteLabels(p, h, make([]uint8, 24)); err != nil {
		t.Fatal(err)
	}
	got, _ := volumetest.ReadLabels(t, p)
	want := diagHeader(h.Shape, [3]float64{2, 0.5, 0.25}, "millimeter")
	for a := range 3 {
		if !near(got.Spacing[a], want.Spacing[a]) {
			t.Errorf("spacing %v, want the column norms %v", got.Spacing, want.Spacing)
		}
	}
	for r := range 4 {
		for k := range 4 {
			if !near(got.Affine[r][k], want.Affine[r][k]) {
				t.Fatalf("affine %v, want %v (diagonal, origin 0)", got.Affine, want.Affine)
			}
		}
	}
}

// TestWriteReplaces: a second write replaces both files by rename (a hard
// link to the old TIFF keeps the old bytes), leaves no temporary file,
// and a refused write leaves the old files as they were.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.tif")
	h := diagHeader([3]int{2, 3, 4}, [3]float64{1, 1, 1}, "")
	if err := WriteLabels(p, h, make([]uint8, 24)); err != nil {
		t.Fatal(err)
	}
	old := mustRead(t, p)
	oldJSON := mustRead(t, filepath.Join(dir, "p.json"))
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Link(p, link); err != nil {
		t.Skip("no hard links here:", err)
	}
	h2 := diagHeader([3]int{2, 3, 4}, [3]float64{2, 1, 1}, "micrometer")
	if err := WriteLabels(p, h2, bytes.Repeat([]byte{3}, 24)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, link), old) {
		t.Error("the old TIFF was written in place, not replaced")
	}
	got, labels := volumetest.ReadLabels(t, p)
	if got.Spacing[0] != 2 || labels[0] != 3 {
		t.Errorf("after the second write: spacing %v, label %d", got.Spacing, labels[0])
	}
	if string(mustRead(t, filepath.Join(dir, "p.json"))) == string(oldJSON) {
		t.Error("the sidecar was not rewritten")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	now, nowJSON := mustRead(t, p), mustRead(t, filepath.Join(dir, "p.json"))
	bad := h2
	bad.Affine = volume.Affine{}
	bad.Spacing[1] = 0
	if err := WriteLabels(p, bad, make([]uint8, 24)); err == nil {
		t.Fatal("a zero spacing was written")
	}
	if !bytes.Equal(mustRead(t, p), now) || !bytes.Equal(mustRead(t, filepath.Join(dir, "p.json")), nowJSON) {
		t.Error("a refused write changed the files")
	}
}

// TestWriteErrors: every refusal names the path. (A negative diagonal
// of the affine is a flipped axis, whose voxel size is its norm: written.)
func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	ok := diagHeader([3]int{2, 3, 4}, [3]float64{1, 1, 1}, "")
	missing := filepath.Join(dir, "no", "such", "dir", "m.tif")
	for _, c := range []struct {
		name, path string
		h          volume.Header
		n          int
		says       string
	}{
		{"missing directory", missing, ok, 24, "no such file"},
		{"not a TIFF name", filepath.Join(dir, "x.nii"), ok, 24, ".tif or .tiff"},
		{"label count", filepath.Join(dir, "x.tif"), ok, 23, "23 labels for a 2×3×4 grid"},
		{"empty axis", filepath.Join(dir, "x.tif"), diagHeader([3]int{0, 3, 4}, [3]float64{1, 1, 1}, ""), 0, "axis 0 is 0"},
		{"negative spacing, no affine", filepath.Join(dir, "x.tif"), volume.Header{Shape: [3]int{2, 3, 4}, Spacing: [3]float64{1, -1, 1}}, 24, "not a positive finite voxel size"},
		{"NaN spacing", filepath.Join(dir, "x.tif"), diagHeader([3]int{2, 3, 4}, [3]float64{math.NaN(), 1, 1}, ""), 24, "not a positive finite voxel size"},
		{"no resolution", filepath.Join(dir, "x.tif"), diagHeader([3]int{2, 3, 4}, [3]float64{1, 1, 1e-12}, ""), 24, "no TIFF resolution"},
		{"control character", filepath.Join(dir, "x.tif"), diagHeader([3]int{2, 3, 4}, [3]float64{1, 1, 1}, "m\nslices=9"), 24, "control character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := WriteLabels(c.path, c.h, make([]uint8, c.n))
			if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v, want an error naming %s and saying %q", err, c.path, c.says)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused writes left %d files", len(entries))
	}
}

// TestBigTIFFDecision: the bound on a classic file's size is above what
// incompressible labels really take, and the decision flips near 4 GiB
// of voxels.
func TestBigTIFFDecision(t *testing.T) {
	for _, shape := range [][3]int{{3, 300, 301}, {2, 1, 5}, {1, 2, 70000}} {
		n := shape[0] * shape[1] * shape[2]
		noise := make([]uint8, n)
		r := rand.New(rand.NewPCG(7, 7))
		for i := range noise {
			noise[i] = uint8(r.Uint32())
		}
		desc := imagejDescription(shape[0], 1, "micron")
		var b bytes.Buffer
		if err := encodeLabels(&b, shape, [3]float64{1, 1, 1}, desc, noise, false); err != nil {
			t.Fatal(err)
		}
		rps := rowsPerStrip(shape[2], shape[1])
		if bound := classicSizeBound(shape, rps, len(desc)); uint64(b.Len()) > bound {
			t.Errorf("%v: %d bytes of incompressible labels, bound %d", shape, b.Len(), bound)
		}
	}
	for _, c := range []struct {
		shape [3]int
		big   bool
	}{
		{[3]int{500, 512, 512}, false},
		{[3]int{4000, 1000, 1000}, false}, // 3.73 GiB
		{[3]int{4096, 1024, 1024}, true},  // 4 GiB
		{[3]int{1, 65536, 65536}, true},
		{[3]int{2048, 2048, 2048}, true},
	} {
		rps := rowsPerStrip(c.shape[2], c.shape[1])
		if got := needsBigTIFF(c.shape, rps, 100); got != c.big {
			t.Errorf("needsBigTIFF(%v) = %v, want %v", c.shape, got, c.big)
		}
	}
}

// TestWriteBigTIFF writes the BigTIFF layout (forced: 4 GiB is too much
// for a test) and reads it back.
func TestWriteBigTIFF(t *testing.T) {
	shape := [3]int{3, 200, 1000}
	labels := testLabels(shape[0]*shape[1]*shape[2], 3)
	desc := imagejDescription(3, 2, "nm")
	var b bytes.Buffer
	if err := encodeLabels(&b, shape, [3]float64{2, 0.5, 0.25}, desc, labels, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte{'I', 'I', 43, 0, 8, 0, 0, 0}) {
		t.Fatalf("header % x, want a BigTIFF's", b.Bytes()[:8])
	}
	p := filepath.Join(t.TempDir(), "big.tif")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	h, got := volumetest.ReadLabels(t, p)
	if h.Shape != shape || h.Spacing != [3]float64{2, 0.5, 0.25} || h.Unit != "nanometer" || !bytes.Equal(got, labels) {
		t.Errorf("read back %v %v %q (labels equal: %v)", h.Shape, h.Spacing, h.Unit, bytes.Equal(got, labels))
	}
}

// TestRational: 1/spacing as a ratio of 32-bit integers, exact where it
// can be, else within 1e-9; refused beyond uint32.
func TestRational(t *testing.T) {
	for x, want := range map[float64][2]uint32{2: {2, 1}, 1 / 0.3: {10, 3}, 0.5: {1, 2}, 1 / 0.7: {10, 7}, 1e7: {10000000, 1}} {
		n, d, ok := rational(x)
		if !ok || [2]uint32{n, d} != want {
			t.Errorf("rational(%g) = %d/%d %v, want %d/%d", x, n, d, ok, want[0], want[1])
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		x := math.Exp(r.Float64()*30 - 15) // 3e-7 .. 3e6
		n, d, ok := rational(x)
		if !ok || math.Abs(float64(n)/float64(d)-x) > 1e-9*x {
			t.Fatalf("rational(%g) = %d/%d %v", x, n, d, ok)
		}
	}
	for _, x := range []float64{1e10, 1e-10, 0, -1, math.Inf(1), math.NaN()} {
		if n, d, ok := rational(x); ok {
			t.Errorf("rational(%g) = %d/%d, want refused", x, n, d)
		}
	}
}

// The registry writes TIFF by name only (a folder of slices is read, not
// a name to write), knows the endings, and lists the nnU-Net sidecar
// among the files a write creates, so a prediction never overwrites an
// input's.
func TestRegisteredWriter(t *testing.T) {
	dir := t.TempDir()
	slices2D := filepath.Join(dir, "stack")
	if err := os.Mkdir(slices2D, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteLabels(filepath.Join(slices2D, "z0.tif"), volume.Header{Shape: [3]int{1, 2, 2}, Spacing: [3]float64{1, 1, 1},
		Affine: volume.Affine{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}}, []uint8{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if !volume.Writes("x.TIF") || !volume.Writes("x.tiff") || volume.Writes(slices2D) || volume.FileEnding("c_0000.tif") != ".tif" {
		t.Error("TIFF names are not registered as written, or a folder of slices is")
	}
	if got := volume.WrittenFiles(filepath.Join("d", "CASE.tif")); !slices.Equal(got, []string{filepath.Join("d", "CASE.tif"), filepath.Join("d", "CASE.json")}) {
		t.Errorf("WrittenFiles(CASE.tif) = %q", got)
	}
}
