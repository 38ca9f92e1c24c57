// Package ensemble averages saved class probabilities of several
// predictions of the same cases, as nnU-Net v2's nnUNetv2_ensemble
// (ensemble_folders): each folder holds, per case, CASE.npz (the array
// "probabilities", (C, z, y, x), as train predict --save-probabilities and
// train validate --save-probabilities write it) beside the case's label
// file; the ensemble's labels are those of the mean probabilities, turned
// into labels as train predict does (infer.ProbabilityLabels), written with
// the first folder's label file's header.
package ensemble

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/voxtrain/voxtrain/infer"
	"github.com/voxtrain/voxtrain/internal/npy"
	"github.com/voxtrain/voxtrain/internal/samepath"
	"github.com/voxtrain/voxtrain/volume"
)

// Options say how probabilities become labels and what is written.
type Options struct {
	// MultiLabel: the channels are sigmoid probabilities (model.targets
	// multi_label), each thresholded at 0.5; RegionsClassOrder, with
	// MultiLabel, paints nnU-Net regions (nil: bit-packed labels). Else
	// argmax over the channels (softmax).
	MultiLabel        bool
	RegionsClassOrder []int
	// SaveProbabilities also writes the mean probabilities as OUT/CASE.npz
	// (nnUNetv2_ensemble's --save_npz).
	SaveProbabilities bool
	// Log receives a line per case (nil: none).
	Log io.Writer
}

// Case is one case to ensemble: its probabilities in every folder and
// the first folder's label file, whose header and ending the output takes.
type Case struct {
	ID            string
	Probabilities []string
	Labels        string
}

// FindCases lists the cases of the folders dirs: every CASE.npz of any of
// them, which must be in all of them (nnU-Net's rule: a case missing from
// one folder is an error naming the case and the folder), each with its
// label file in dirs[0]. Cases are sorted by ID.
func FindCases(dirs []string) ([]Case, error) {
	if len(dirs) == 0 {
		return nil, errors.New("ensemble: no folder")
	}
	have := make([]map[string]bool, len(dirs))
	all := map[string]bool{}
	for k, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return nil, fmt.Errorf("ensemble: %w", err)
		}
		have[k] = map[string]bool{}
		for _, e := range ents {
			if id, ok := strings.CutSuffix(e.Name(), ".npz"); ok && !e.IsDir() {
				have[k][id] = true
				all[id] = true
			}
		}
		if len(have[k]) == 0 {
			return nil, fmt.Errorf("%s: no CASE.npz probabilities (predict or validate with --save-probabilities)", d)
		}
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var errs []error
	for k, d := range dirs {
		var missing []string
		for _, id := range ids {
			if !have[k][id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%s lacks the probabilities of %d case(s) the other folders have: %s", d, len(missing), list(missing)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cases := make([]Case, len(ids))
	for i, id := range ids {
		c := Case{ID: id}
		for _, d := range dirs {
			c.Probabilities = append(c.Probabilities, filepath.Join(d, id+".npz"))
		}
		// The first label file found wins (".nii" leaves "x.nii.gz" out:
		// the ID is exact).
		for _, e := range volume.Endings() {
			if p := filepath.Join(dirs[0], id+e); isFile(p) {
				c.Labels = p
				break
			}
		}
		if c.Labels == "" {
			return nil, fmt.Errorf("case %s: %s has %s.npz but no label file %s.nii.gz (or .nii, .hdr, .nrrd, .mha, .tif, …), whose grid the ensemble's labels take", id, dirs[0], id, id)
		}
		cases[i] = c
	}
	return cases, nil
}

// list is names, the first ten of them and how many more.
func list(names []string) string {
	if len(names) > 10 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
	}
	return strings.Join(names, ", ")
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// Folders ensembles every case of the folders dirs (FindCases) into the
// folder out: OUT/CASE<ending of dirs[0]'s label file>, and OUT/CASE.npz
// with o.SaveProbabilities. One case is in memory at a time (the running
// sum and the file being added). out must be none of dirs. It returns
// the label files written, in case order.
func Folders(dirs []string, out string, o Options) ([]string, error) {
	if len(dirs) < 2 {
		return nil, fmt.Errorf("ensemble: %d folder(s), want at least 2", len(dirs))
	}
	for _, d := range dirs {
		if samepath.Same(d, out) {
			return nil, fmt.Errorf("ensemble: the output folder %s is the input folder %s (it would overwrite its predictions)", out, d)
		}
	}
	cases, err := FindCases(dirs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, fmt.Errorf("ensemble: %w", err)
	}
	var written []string
	for i, c := range cases {
		p, err := Merge(c, out, o)
		if err != nil {
			return written, err
		}
		written = append(written, p)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "[%d/%d] %s\n", i+1, len(cases), c.ID)
		}
	}
	return written, nil
}

// Merge ensembles one case into the folder out and returns the label file
// written.
func Merge(c Case, out string, o Options) (string, error) {
	var sum npy.Array
	for k, p := range c.Probabilities {
		a, err := readProbabilities(p)
		if err != nil {
			return "", err
		}
		if k == 0 {
			sum = a
			continue
		}
		if !slices.Equal(a.Shape, sum.Shape) {
			return "", fmt.Errorf("case %s: %s has probabilities of shape %v, %s of shape %v", c.ID, c.Probabilities[0], sum.Shape, p, a.Shape)
		}
		for j, x := range a.Data {
			sum.Data[j] += x
		}
	}
	// nnU-Net's average_probabilities: the float32 sum divided by the
	// number of folders.
	k := float32(len(c.Probabilities))
	for j := range sum.Data {
		sum.Data[j] /= k
	}
	lf, err := volume.Open(c.Labels) // any format a prediction is written in
	if err != nil {
		return "", fmt.Errorf("case %s: %w", c.ID, err)
	}
	grid := lf.Header().Shape // (D, H, W) = (z, y, x)
	lf.Close()
	if len(sum.Shape) != 4 || sum.Shape[1] != grid[0] || sum.Shape[2] != grid[1] || sum.Shape[3] != grid[2] {
		return "", fmt.Errorf("case %s: %s has probabilities of shape %v, the label file %s a grid of %v (z, y, x)", c.ID, c.Probabilities[0], sum.Shape, c.Labels, grid)
	}
	classes := sum.Shape[0]
	if o.MultiLabel && o.RegionsClassOrder != nil && len(o.RegionsClassOrder) != classes {
		return "", fmt.Errorf("case %s: %d probability channels, but regions_class_order has %d regions", c.ID, classes, len(o.RegionsClassOrder))
	}
	n := grid[0] * grid[1] * grid[2]
	if !o.MultiLabel && classes > 1 {
		if err := softmaxLike(sum.Data, classes, n); err != nil {
			return "", fmt.Errorf("case %s (%s): %w: these look like a region-based or multi-label model's sigmoid outputs; give the dataset.json with its regions, or --multi-label", c.ID, c.Probabilities[0], err)
		}
	}
	labels := infer.ProbabilityLabels(sum.Data, classes, n, o.MultiLabel, o.RegionsClassOrder)
	ending := strings.TrimPrefix(filepath.Base(c.Labels), c.ID)
	if o.SaveProbabilities {
		// Before the labels, as predict writes them.
		if err := infer.WriteProbabilities(filepath.Join(out, c.ID+".npz"), sum.Data, grid); err != nil {
			return "", fmt.Errorf("case %s: %w", c.ID, err)
		}
	}
	dst := filepath.Join(out, c.ID+ending)
	if err := infer.WriteLabels(dst, c.Labels, labels); err != nil {
		return "", fmt.Errorf("case %s: %w", c.ID, err)
	}
	return dst, nil
}

// softmaxLike checks that c channels of n probabilities are
// distributions (summing to 1 within float32 rounding) at every 61st
// voxel: argmax over channels is right only for softmax outputs, and the
// sigmoid channels of region-based or multi-label models, ensembled
// without saying so, would be labelled as classes without an error.
func softmaxLike(p []float32, c, n int) error {
	for i := 0; i < n; i += 61 {
		var s float64
		for k := range c {
			s += float64(p[k*n+i])
		}
		if math.Abs(s-1) > 1e-3 {
			return fmt.Errorf("voxel %d's %d probabilities sum to %.4g, not 1", i, c, s)
		}
	}
	return nil
}

// readProbabilities reads the "probabilities" array of an .npz, (C, z, y,
// x).
func readProbabilities(path string) (npy.Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return npy.Array{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return npy.Array{}, err
	}
	arrs, err := npy.ReadNPZ(f, fi.Size())
	if err != nil {
		return npy.Array{}, fmt.Errorf("%s: %w", path, err)
	}
	a, ok := arrs[infer.ProbabilitiesName]
	if !ok {
		return npy.Array{}, fmt.Errorf("%s: no array %q", path, infer.ProbabilitiesName)
	}
	if len(a.Shape) != 4 {
		return npy.Array{}, fmt.Errorf("%s: probabilities of shape %v, want (C, z, y, x)", path, a.Shape)
	}
	return a, nil
}
