package ensemble

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/npy"
	"github.com/voxtrain/voxtrain/nifti"
	"github.com/voxtrain/voxtrain/volume/volumetest"
)

// grid is the synthetic cases' (z, y, x).
var grid = [3]int{3, 4, 5}

// writeCase writes case id into dir: c channels of random probabilities
// (summing to 1 per voxel) as id.npz and a label file id.nii.gz with a
// distinctive header (pixdim, sform). It returns the probabilities.
func writeCase(t *testing.T, dir, id string, c int, seed uint64, g [3]int) []float32 {
	t.Helper()
	n := g[0] * g[1] * g[2]
	rng := rand.New(rand.NewPCG(seed, 7))
	p := make([]float32, c*n)
	for i := 0; i < n; i++ {
		var s float32
		for k := 0; k < c; k++ {
			p[k*n+i] = rng.Float32() + 0.01
			s += p[k*n+i]
		}
		for k := 0; k < c; k++ {
			p[k*n+i] /= s
		}
	}
	if err := infer.WriteProbabilities(filepath.Join(dir, id+".npz"), p, g); err != nil {
		t.Fatal(err)
	}
	h, err := nifti.NewHeader([]int{g[2], g[1], g[0]}, nifti.Uint8)
	if err != nil {
		t.Fatal(err)
	}
	h.Pixdim[1], h.Pixdim[2], h.Pixdim[3] = 0.5, 0.75, 2
	h.Srow[0][3] = 12.5
	if err := nifti.WriteFloat32(filepath.Join(dir, id+".nii.gz"), h, make([]float32, n)); err != nil {
		t.Fatal(err)
	}
	return p
}

func readNPZ(t *testing.T, path string) npy.Array {
	t.Helper()
	a, err := readProbabilities(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestFoldersMeanAndArgmax: the ensemble's labels are argmax of the mean
// of the folders' probabilities, computed here; its .npz is that mean; the
// label files keep the first folder's header.
func TestFoldersMeanAndArgmax(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")}
	ids := []string{"case_1", "case_2"}
	probs := map[string][][]float32{}
	for k, d := range dirs {
		for i, id := range ids {
			probs[id] = append(probs[id], writeCase(t, d, id, 3, uint64(10*k+i), grid))
		}
	}
	out := filepath.Join(root, "ens")
	var log strings.Builder
	written, err := Folders(dirs, out, Options{SaveProbabilities: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(out, "case_1.nii.gz"), filepath.Join(out, "case_2.nii.gz")}; !slices.Equal(written, want) {
		t.Errorf("wrote %v, want %v", written, want)
	}
	if !strings.Contains(log.String(), "[2/2] case_2") {
		t.Errorf("log:\n%s", log.String())
	}
	n := grid[0] * grid[1] * grid[2]
	for _, id := range ids {
		mean := make([]float32, 3*n)
		for j := range mean {
			mean[j] = (probs[id][0][j] + probs[id][1][j] + probs[id][2][j]) / 3
		}
		got := readNPZ(t, filepath.Join(out, id+".npz"))
		if !slices.Equal(got.Shape, []int{3, grid[0], grid[1], grid[2]}) {
			t.Fatalf("%s: saved shape %v", id, got.Shape)
		}
		for j := range mean {
			if math.Abs(float64(got.Data[j]-mean[j])) > 1e-6 {
				t.Fatalf("%s: saved probability %d is %v, the mean %v", id, j, got.Data[j], mean[j])
			}
		}
		h, labels, err := nifti.ReadFloat32(filepath.Join(out, id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := nifti.ReadHeader(filepath.Join(dirs[0], id+".nii.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if h.Dim != ref.Dim || h.Pixdim != ref.Pixdim || h.Srow != ref.Srow || h.Datatype != nifti.Uint8 {
			t.Errorf("%s: header dim %v pixdim %v srow_x %v, the first folder's %v %v %v", id, h.Dim, h.Pixdim, h.Srow, ref.Dim, ref.Pixdim, ref.Srow)
		}
		want := infer.Argmax(mean, 3, n)
		seen := map[uint8]bool{}
		for i, l := range labels {
			if uint8(l) != want[i] {
				t.Fatalf("%s: label %d is %v, argmax of the mean %d", id, i, l, want[i])
			}
			seen[want[i]] = true
		}
		if len(seen) < 2 {
			t.Errorf("%s: every label is the same; the test cannot tell argmax from a constant", id)
		}
	}
}

// TestFoldersRegions: multi-label probabilities with regions_class_order
// paint the regions as predict does (later regions over earlier ones).
func TestFoldersRegions(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	var ps [][]float32
	for k, d := range dirs {
		ps = append(ps, writeCase(t, d, "br_1", 3, uint64(k+5), grid))
	}
	out := filepath.Join(root, "ens")
	order := []int{1, 2, 3}
	if _, err := Folders(dirs, out, Options{MultiLabel: true, RegionsClassOrder: order}); err != nil {
		t.Fatal(err)
	}
	n := grid[0] * grid[1] * grid[2]
	mean := make([]float32, 3*n)
	for j := range mean {
		mean[j] = (ps[0][j] + ps[1][j]) / 2
	}
	want := infer.MultiLabelLabels(mean, 3, n, order)
	_, labels, err := nifti.ReadFloat32(filepath.Join(out, "br_1.nii.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range labels {
		if uint8(l) != want[i] {
			t.Fatalf("label %d is %v, the regions painted from the mean %d", i, l, want[i])
		}
	}
	if _, err := Folders(dirs, filepath.Join(root, "ens2"), Options{MultiLabel: true, RegionsClassOrder: []int{1, 2}}); err == nil ||
		!strings.Contains(err.Error(), "3 probability channels, but regions_class_order has 2") {
		t.Errorf("regions_class_order of the wrong length: %v", err)
	}
}

// TestFoldersErrors: a case missing from a folder, probabilities of
// different shapes, a first folder without the label file, an output that
// is an input and a folder without probabilities are errors naming them.
func TestFoldersErrors(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	writeCase(t, a, "c1", 2, 1, grid)
	writeCase(t, a, "c2", 2, 2, grid)
	writeCase(t, b, "c1", 2, 3, grid)
	check := func(what string, dirs []string, out string, want ...string) {
		t.Helper()
		_, err := Folders(dirs, out, Options{})
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", what, err, w)
			}
		}
	}
	check("a case missing", []string{a, b}, filepath.Join(root, "o1"), b, "c2")
	writeCase(t, b, "c2", 2, 4, [3]int{3, 4, 6})
	check("shapes differ", []string{a, b}, filepath.Join(root, "o2"), "case c2", filepath.Join(a, "c2.npz"), filepath.Join(b, "c2.npz"), "[2 3 4 5]", "[2 3 4 6]")
	check("output is an input", []string{a, b}, b, "the output folder "+b+" is the input folder")
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	check("no probabilities", []string{a, empty}, filepath.Join(root, "o3"), empty, "no CASE.npz")
	check("one folder", []string{a}, filepath.Join(root, "o4"), "1 folder(s), want at least 2")
	check("a missing folder", []string{a, filepath.Join(root, "nope")}, filepath.Join(root, "o5"), filepath.Join(root, "nope"))
	c, d := filepath.Join(root, "c"), filepath.Join(root, "d")
	writeCase(t, c, "c1", 2, 1, grid)
	writeCase(t, d, "c1", 2, 1, grid)
	if err := os.Remove(filepath.Join(c, "c1.nii.gz")); err != nil {
		t.Fatal(err)
	}
	check("no label file", []string{c, d}, filepath.Join(root, "o6"), "case c1", c, "no label file c1.nii.gz")
}

// TestFoldersRefuseSigmoidAsSoftmax: probabilities that are not
// distributions (a region-based model's sigmoid channels) ensembled as
// softmax classes are refused, naming the case and saying what to give;
// with the regions they ensemble.
func TestFoldersRefuseSigmoidAsSoftmax(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	n := grid[0] * grid[1] * grid[2]
	for _, d := range dirs {
		writeCase(t, d, "br_2", 3, 9, grid)
		p := make([]float32, 3*n)
		for j := range p {
			p[j] = 0.9 // nested regions: every sigmoid channel high
		}
		if err := infer.WriteProbabilities(filepath.Join(d, "br_2.npz"), p, grid); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Folders(dirs, filepath.Join(root, "ens"), Options{})
	if err == nil || !strings.Contains(err.Error(), "case br_2") || !strings.Contains(err.Error(), "sum to 2.7") || !strings.Contains(err.Error(), "regions") {
		t.Errorf("sigmoid channels ensembled as softmax: %v, want an error naming the case, the sum and the regions", err)
	}
	if _, err := Folders(dirs, filepath.Join(root, "ens2"), Options{MultiLabel: true, RegionsClassOrder: []int{1, 2, 3}}); err != nil {
		t.Errorf("with the regions: %v", err)
	}
}

// TestFoldersOtherFormats: folders of NRRD or TIFF predictions (a dataset
// whose file_ending is .nrrd or .tif, as predict and validate write them)
// are ensembled into files of the same ending and grid.
func TestFoldersOtherFormats(t *testing.T) {
	for _, ending := range []string{".nrrd", ".tif"} {
		root := t.TempDir()
		dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
		for k, d := range dirs {
			writeCase(t, d, "c1", 3, uint64(k), grid)
			// The label file in the folders' format, on the same grid.
			nii := filepath.Join(d, "c1.nii.gz")
			if err := infer.WriteLabels(filepath.Join(d, "c1"+ending), nii, make([]uint8, grid[0]*grid[1]*grid[2])); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(nii); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(root, "ens")
		written, err := Folders(dirs, out, Options{})
		if err != nil {
			t.Fatalf("%s: %v", ending, err)
		}
		if want := []string{filepath.Join(out, "c1"+ending)}; !slices.Equal(written, want) {
			t.Errorf("%s: wrote %v, want %v", ending, written, want)
		}
		h, labels := volumetest.ReadLabels(t, written[0])
		if h.Shape != grid || len(labels) != grid[0]*grid[1]*grid[2] {
			t.Errorf("%s: ensemble of shape %v, want %v", ending, h.Shape, grid)
		}
	}
}
