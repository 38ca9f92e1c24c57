package tiff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/internal/atomicfile"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

var update = flag.Bool("update", false, "rewrite testdata/writer/*.tif with today's writer (then rerun testdata/writer/check_tifffile.py)")

// writerFixture is one file of testdata/writer: a deterministic label map
// written by this package's writer.
type writerFixture struct {
	file  string
	h     volume.Header
	big   bool // forced BigTIFF: encodeLabels alone, no sidecar
	seeds int
}

var writerFixtures = []writerFixture{
	// Pages of two strips (109 rows of 600), the ImageJ unit "micron".
	{file: "labels.tif", h: diagHeader([3]int{5, 150, 600}, [3]float64{2.5, 0.75, 0.3}, "micrometer"), seeds: 1},
	{file: "labels_bigtiff.tif", h: diagHeader([3]int{3, 20, 30}, [3]float64{40, 4, 4}, "nanometer"), big: true, seeds: 2},
}

// fixtureLabels is arithmetic, not a random generator, so that the
// fixture is the same whatever Go version regenerates it: nested boxes of
// classes 1..3 on background, and a sparse speckle of values up to 255.
func fixtureLabels(shape [3]int, seed int) []uint8 {
	d, h, w := shape[0], shape[1], shape[2]
	l := make([]uint8, d*h*w)
	for z := range d {
		for y := range h {
			for x := range w {
				v := 0
				for k := 1; k <= 3; k++ {
					m := k * 2
					if z >= k/2 && y >= m && y < h-m && x >= 2*m && x < w-m {
						v = k
					}
				}
				i := (z*h+y)*w + x
				if (i*2654435761+seed)%97 == 0 {
					v = (i*seed + 7) % 256
				}
				l[i] = uint8(v)
			}
		}
	}
	return l
}

// writeFixture writes f into dir.
func writeFixture(dir string, f writerFixture) error {
	p := filepath.Join(dir, f.file)
	labels := fixtureLabels(f.h.Shape, f.seeds)
	if !f.big {
		return WriteLabels(p, f.h, labels)
	}
	s := f.h.Spacing
	unit, err := imagejUnit(f.h.Unit)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := encodeLabels(&b, f.h.Shape, s, imagejDescription(f.h.Shape[0], s[0], unit), labels, true); err != nil {
		return err
	}
	return atomicfile.WriteFileUmask(p, b.Bytes(), 0o666)
}

// tifffileRecord is what testdata/writer/check_tifffile.py recorded of a
// file with tifffile.
type tifffileRecord struct {
	File           string      `json:"file"`
	Tool           string      `json:"tool"`
	Warnings       []string    `json:"warnings"`
	BigTIFF        bool        `json:"is_bigtiff"`
	ImageJ         bool        `json:"is_imagej"`
	Pages          int         `json:"pages"`
	Shape          []int       `json:"shape"`
	Axes           string      `json:"axes"`
	Dtype          string      `json:"dtype"`
	Compression    int         `json:"compression"`
	Predictor      int         `json:"predictor"`
	Photometric    int         `json:"photometric"`
	RowsPerStrip   int         `json:"rowsperstrip"`
	XResolution    [2]uint32   `json:"x_resolution"`
	YResolution    [2]uint32   `json:"y_resolution"`
	ResUnit        int         `json:"resolution_unit"`
	IJSpacing      float64     `json:"imagej_spacing"`
	IJUnit         *string     `json:"imagej_unit"`
	IJSlices       int         `json:"imagej_slices"`
	SHA256         string      `json:"sha256_uint8"`
	SidecarSpacing *[3]float64 `json:"sidecar_spacing"`
}

// TestWriterConformance: the files in testdata/writer were written by
// this writer and read by tifffile (check_tifffile.py, tifffile.json).
// Today's writer must write the same content (decoded: the compressor's
// bytes may change), and what tifffile read must be our header and
// labels: the shape as pages of rows of columns, uint8, Adobe deflate, no
// predictor, BlackIsZero, ImageJ's spacing and unit, 1/resolution the
// pixel size, the array's checksum, and the sidecar's spacing.
func TestWriterConformance(t *testing.T) {
	const dir = "testdata/writer"
	tmp := t.TempDir()
	for _, f := range writerFixtures {
		if *update {
			if err := writeFixture(dir, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeFixture(tmp, f); err != nil {
			t.Fatal(err)
		}
	}
	var doc struct {
		Files []tifffileRecord `json:"files"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "tifffile.json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) != len(writerFixtures) {
		t.Fatalf("tifffile.json records %d files, want %d: rerun check_tifffile.py", len(doc.Files), len(writerFixtures))
	}
	for i, f := range writerFixtures {
		t.Run(f.file, func(t *testing.T) {
			want := fixtureLabels(f.h.Shape, f.seeds)
			committed, cl := volumetest.ReadLabels(t, filepath.Join(dir, f.file))
			today, tl := volumetest.ReadLabels(t, filepath.Join(tmp, f.file))
			if committed != today || !bytes.Equal(cl, tl) || !bytes.Equal(tl, want) {
				t.Errorf("today's writer writes another file: header %+v, committed %+v (labels equal: %v, as made: %v)", today, committed, bytes.Equal(cl, tl), bytes.Equal(tl, want))
			}
			r := doc.Files[i]
			if r.File != f.file {
				t.Fatalf("tifffile.json lists %s at %d, want %s", r.File, i, f.file)
			}
			h := committed
			if len(r.Warnings) != 0 {
				t.Errorf("tifffile warned: %q", r.Warnings)
			}
			if r.BigTIFF != f.big || !r.ImageJ || r.Pages != h.Shape[0] || r.IJSlices != h.Shape[0] || r.Axes != "ZYX" {
				t.Errorf("tifffile: BigTIFF %v ImageJ %v, %d pages, slices=%d, axes %s; want BigTIFF %v, ImageJ, %d pages and slices, ZYX",
					r.BigTIFF, r.ImageJ, r.Pages, r.IJSlices, r.Axes, f.big, h.Shape[0])
			}
			if len(r.Shape) != 3 || [3]int(r.Shape) != h.Shape || r.Dtype != "uint8" {
				t.Errorf("tifffile read %v %s, want %v uint8", r.Shape, r.Dtype, h.Shape)
			}
			if r.Compression != 8 || r.Predictor != 1 || r.Photometric != 1 || r.ResUnit != 1 || r.RowsPerStrip != rowsPerStrip(h.Shape[2], h.Shape[1]) {
				t.Errorf("tifffile: compression %d predictor %d photometric %d resolution unit %d rows per strip %d",
					r.Compression, r.Predictor, r.Photometric, r.ResUnit, r.RowsPerStrip)
			}
			sum := sha256.Sum256(want)
			if r.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("tifffile's array: sha256 %s, want that of the labels written, %s", r.SHA256, hex.EncodeToString(sum[:]))
			}
			// tifffile's resolution is (pixels, per unit): the pixel size is
			// its inverse.
			got := [3]float64{r.IJSpacing, float64(r.YResolution[1]) / float64(r.YResolution[0]), float64(r.XResolution[1]) / float64(r.XResolution[0])}
			for a := range 3 {
				if math.Abs(got[a]-h.Spacing[a]) > 1e-9*h.Spacing[a] {
					t.Errorf("tifffile's spacing %v, ours %v", got, h.Spacing)
				}
			}
			if r.IJUnit == nil {
				t.Errorf("tifffile read no ImageJ unit, ours %q", h.Unit)
			} else if volume.NormalizeUnit(*r.IJUnit) != h.Unit {
				t.Errorf("tifffile's ImageJ unit %q, ours %q", *r.IJUnit, h.Unit)
			}
			switch {
			case f.big && r.SidecarSpacing != nil:
				t.Errorf("a sidecar %v beside a file written without", *r.SidecarSpacing)
			case !f.big && (r.SidecarSpacing == nil || *r.SidecarSpacing != h.Spacing):
				t.Errorf("sidecar spacing %v, want %v", r.SidecarSpacing, h.Spacing)
			}
		})
	}
}
