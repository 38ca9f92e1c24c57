package evaluation

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	_ "github.com/voxtrain/voxtrain/nifti" // registers .nii, .nii.gz, .hdr/.img with volume
	"github.com/voxtrain/voxtrain/volume"
)

// Pair is a prediction file and the reference of the same name.
type Pair struct {
	Name                  string // the file name both share
	Prediction, Reference string
}

// MatchFiles pairs the files of predDir and refDir by name, as nnU-Net's
// compute_metrics_on_folder does: the files of both folders whose names end
// with ending (none: the label file ending of the first file in refDir, in
// name order, among volume.Endings: .nii.gz, .nii, .hdr, .nrrd, .mha,
// .tif, …). Every reference needs a prediction and every prediction a
// reference; an error names the files without one. Other files (a
// summary.json, a postprocessing.json, a .tif's spacing .json) are
// ignored.
func MatchFiles(predDir, refDir, ending string) ([]Pair, error) {
	return matchFiles(predDir, refDir, ending, true)
}

// MatchPredictions pairs every prediction of predDir with its reference in
// refDir as MatchFiles does, but references without a prediction are left
// out, as compute_metrics_on_folder's chill=True (what nnU-Net's
// accumulate_cv_results scores a subset of the folds with).
func MatchPredictions(predDir, refDir, ending string) ([]Pair, error) {
	return matchFiles(predDir, refDir, ending, false)
}

// matchFiles is MatchFiles (everyRef: every reference needs a
// prediction) and MatchPredictions.
func matchFiles(predDir, refDir, ending string, everyRef bool) ([]Pair, error) {
	if ending == "" {
		all, err := LabelNames(refDir, "")
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("%s: no label files (%s); give the file ending", refDir, strings.Join(volume.Endings(), ", "))
		}
		ending = volume.FileEnding(all[0])
	}
	keep := func(dir string) (map[string]bool, error) {
		names, err := LabelNames(dir, ending)
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		return out, err
	}
	r, err := keep(refDir)
	if err != nil {
		return nil, err
	}
	p, err := keep(predDir)
	if err != nil {
		return nil, err
	}
	var noPred, noRef []string
	for n := range r {
		if !p[n] {
			noPred = append(noPred, n)
		}
	}
	for n := range p {
		if !r[n] {
			noRef = append(noRef, n)
		}
	}
	sort.Strings(noPred)
	sort.Strings(noRef)
	var errs []error
	if len(noPred) > 0 && everyRef {
		errs = append(errs, fmt.Errorf("%d reference(s) in %s without a prediction in %s: %s", len(noPred), refDir, predDir, list(noPred)))
	}
	if len(noRef) > 0 {
		errs = append(errs, fmt.Errorf("%d prediction(s) in %s without a reference in %s: %s", len(noRef), predDir, refDir, list(noRef)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%s: no files ending in %s", refDir, ending)
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("%s: no predictions ending in %s", predDir, ending)
	}
	var out []Pair
	for n := range r {
		if !p[n] {
			continue
		}
		out = append(out, Pair{Name: n, Prediction: filepath.Join(predDir, n), Reference: filepath.Join(refDir, n)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func list(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(", … (%d more)", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// LabelNames returns the names of dir's label files, sorted: its files
// (or links) whose names end in ending, or, when ending is "", in any
// label file ending (volume.Endings: .nii.gz, .nii, .hdr, .nrrd, .mha,
// .tif, …). ".nii" leaves "x.nii.gz" out; other files (a summary.json, a
// .tif's spacing .json, CASE.npz) are never label files.
func LabelNames(dir, ending string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() && e.Type()&os.ModeSymlink == 0 {
			continue
		}
		if ending != "" && strings.HasSuffix(n, ending) || ending == "" && volume.FileEnding(n) != "" {
			out = append(out, n)
		}
	}
	return out, nil
}

// LabelFile is a label map read whole: its voxels (x fastest) and geometry.
type LabelFile struct {
	Labels []uint8
	Header volume.Header
}

// ReadLabelFile reads a one-channel label map of any registered volume
// format; errors name the file.
func ReadLabelFile(path string) (*LabelFile, error) {
	f, err := volume.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := f.Header()
	if h.Channels != 1 {
		return nil, fmt.Errorf("%s: %d channels, want a one-channel label map", path, h.Channels)
	}
	if err := volume.CheckShape(h.Shape); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The whole label map is decoded: it must fit in memory.
	if err := volume.CheckInMemory(h.Shape, 1); err != nil {
		return nil, fmt.Errorf("%s: reading the whole label map: %w", path, err)
	}
	lab := make([]uint8, h.Shape[0]*h.Shape[1]*h.Shape[2])
	if err := f.ReadLabels(volume.Whole(h.Shape), lab); err != nil {
		return nil, err
	}
	return &LabelFile{Labels: lab, Header: h}, nil
}

// ReadPair reads a prediction and its reference and checks that they are
// on the same grid (an error names both files and both shapes).
func ReadPair(p Pair) (pred, ref *LabelFile, err error) {
	if pred, err = ReadLabelFile(p.Prediction); err != nil {
		return nil, nil, err
	}
	if ref, err = ReadLabelFile(p.Reference); err != nil {
		return nil, nil, err
	}
	if pred.Header.Shape != ref.Header.Shape {
		return nil, nil, fmt.Errorf("%s has shape %v (D, H, W) but its reference %s has %v", p.Prediction, pred.Header.Shape, p.Reference, ref.Header.Shape)
	}
	return pred, ref, nil
}

// Options are what Folder scores.
type Options struct {
	// Labels to score (nil: every foreground label found in any prediction
	// or reference; unused when Regions are given).
	Labels []int
	// Regions, when given, are scored instead of labels, as nnU-Net v2
	// scores a region-based dataset (Dataset.Regions): each region's mask
	// is the voxels whose label is one of its values, in the prediction
	// and the reference alike; they name themselves (Names is unused).
	Regions []Region
	// Names names the labels in the summary (may be nil).
	Names map[int]string
	// HD95 also computes the 95th-percentile Hausdorff distance, with the
	// reference's voxel size.
	HD95 bool
	// Ignore is the ignore label (0: none): reference voxels with it are
	// left out of every count, as nnU-Net's ignore_mask, and it is never
	// scored as a label.
	Ignore int
	// Transform, when set, changes each prediction before it is scored
	// (post-processing candidates).
	Transform func(pred []uint8, shape [3]int) error
	// Log receives a line per case (nil: none).
	Log io.Writer
}

// Folder scores matched files as nnU-Net's compute_metrics_on_folder does.
func Folder(pairs []Pair, o Options) (*Summary, error) {
	if len(o.Regions) > 0 {
		return folderRegions(pairs, o)
	}
	// Per case, the metrics of every label it has or o.Labels names (a
	// label in neither prediction nor reference has TN = all voxels and
	// nothing else), not the 512 KiB joint histogram.
	type scored struct {
		metrics map[int]Metrics
		total   int64
	}
	var all []scored
	present := map[int]bool{}
	for _, p := range pairs {
		pred, ref, c, err := readCounted(p, o)
		if err != nil {
			return nil, err
		}
		sc := scored{metrics: map[int]Metrics{}, total: c.total}
		var found []int
		for _, l := range c.Present() {
			if l != o.Ignore {
				found = append(found, l)
				present[l] = true
			}
		}
		labs := append(found, o.Labels...)
		for _, l := range labs {
			if _, done := sc.metrics[l]; done {
				continue
			}
			m := c.Metrics(l)
			if o.HD95 {
				if m.HD95, err = HD95(pred.Labels, ref.Labels, l, ref.Header.Shape, ref.Header.Spacing); err != nil {
					return nil, fmt.Errorf("%s: %w", p.Prediction, err)
				}
			}
			sc.metrics[l] = m
		}
		all = append(all, sc)
	}
	labels := o.Labels
	if labels == nil {
		for l := range present {
			labels = append(labels, l)
		}
		sort.Ints(labels)
		if len(labels) == 0 {
			return nil, errors.New("no foreground label in any prediction or reference; give the labels to score")
		}
	}
	cases := make([]Case, len(pairs))
	for i, p := range pairs {
		cases[i] = Case{PredictionFile: p.Prediction, ReferenceFile: p.Reference, Metrics: make([]Metrics, len(labels))}
		for j, l := range labels {
			m, ok := all[i].metrics[l]
			if !ok {
				m = FromCounts(0, 0, 0, all[i].total)
			}
			cases[i].Metrics[j] = m
		}
		if o.Log != nil {
			logCase(o.Log, p.Name, cases[i], func(j int) string { return labelShort(labels[j], o.Names) })
		}
	}
	return Summarise(labels, o.Names, o.HD95, cases), nil
}

// readCounted reads a pair, applies o.Transform to the prediction and
// returns the joint histogram, the ignore label's voxels dropped.
func readCounted(p Pair, o Options) (pred, ref *LabelFile, c *Pairs, err error) {
	if pred, ref, err = ReadPair(p); err != nil {
		return nil, nil, nil, err
	}
	if o.Transform != nil {
		if err := o.Transform(pred.Labels, pred.Header.Shape); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", p.Prediction, err)
		}
	}
	if c, err = CountPairs(pred.Labels, ref.Labels); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", p.Prediction, err)
	}
	if o.Ignore > 0 {
		c.Ignore(o.Ignore)
	}
	return pred, ref, c, nil
}

// folderRegions is Folder for o.Regions: every case scores every region,
// each from the case's one joint histogram.
func folderRegions(pairs []Pair, o Options) (*Summary, error) {
	if o.Labels != nil {
		return nil, errors.New("give labels or regions to score, not both")
	}
	if err := CheckRegions(o.Regions); err != nil {
		return nil, err
	}
	regions := append([]Region(nil), o.Regions...) // the summary's own
	cases := make([]Case, len(pairs))
	for i, p := range pairs {
		pred, ref, c, err := readCounted(p, o)
		if err != nil {
			return nil, err
		}
		cs := Case{PredictionFile: p.Prediction, ReferenceFile: p.Reference, Metrics: make([]Metrics, len(regions))}
		for j, r := range regions {
			m := c.RegionMetrics(r)
			if o.HD95 {
				if m.HD95, err = HD95Region(pred.Labels, ref.Labels, r, o.Ignore, ref.Header.Shape, ref.Header.Spacing); err != nil {
					return nil, fmt.Errorf("%s: region %s: %w", p.Prediction, r.Key(), err)
				}
			}
			cs.Metrics[j] = m
		}
		cases[i] = cs
		if o.Log != nil {
			logCase(o.Log, p.Name, cs, func(j int) string { return regions[j].short() })
		}
	}
	return SummariseRegions(regions, o.HD95, cases), nil
}

// logCase writes a case's line: its file name and each entry's Dice.
func logCase(w io.Writer, name string, c Case, short func(j int) string) {
	var parts []string
	for j, m := range c.Metrics {
		parts = append(parts, fmt.Sprintf("%s %.4f", short(j), m.Dice))
	}
	fmt.Fprintf(w, "%s  Dice %s\n", name, strings.Join(parts, "  "))
}

func labelShort(l int, names map[int]string) string {
	if n := names[l]; n != "" {
		return n
	}
	return strconv.Itoa(l)
}
