package config

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/volume"
	"go.yaml.in/yaml/v3"
)

// Data is the `data:` section: where the cases are, how folds are drawn,
// how samples are made and from which voxel source.
type Data struct {
	// Dataset is a folder holding either an MSD dataset.json with a
	// "training" list, or the nnU-Net layout (imagesTr/CASE_0000.nii.gz,
	// labelsTr/CASE.nii.gz).
	Dataset string `yaml:"dataset"`
	// Format is "auto" (MSD when dataset.json has a training list, else
	// nnU-Net), "msd" or "nnunet".
	Format string `yaml:"format"`
	// Cases lists the cases explicitly instead of discovering them under
	// Dataset; relative paths are relative to Dataset (or, without one, to
	// the config file's folder).
	Cases []CaseSpec `yaml:"cases"`
	// Manifest is a dataset manifest (YAML) for large volumes annotated in
	// crops, as cellmap's EM data: raw volumes (any readable format; Zarr,
	// OME-Zarr, N5 read lazily) and the label crops placed inside them by
	// voxel offset, physical translation or the crop file's own origin.
	// Each crop becomes a case whose image is the raw volume's box under
	// the crop, sampled with cellmap's class-frequency weight unless the
	// crop gives one. Instead of dataset and cases; the format is in
	// README.md ("Dataset manifests"), and relative paths in it are
	// relative to the manifest's folder.
	Manifest string `yaml:"manifest"`

	// Fold selects the validation fold, 0 ≤ fold < num_folds; -1 trains
	// on every case and validates on none.
	Fold int `yaml:"fold"`
	// NumFolds is k of the k-fold split. Generated folds are nnU-Net v2's:
	// scikit-learn's KFold(num_folds, shuffle=True, random_state=12345)
	// over the sorted case IDs.
	NumFolds int `yaml:"num_folds"`
	// SplitsFile holds the folds in nnU-Net's splits_final.json format;
	// when given it is written on first use, then reused. Empty: an
	// existing <store>/splits_final.json or <dataset>/splits_final.json
	// (nnU-Net's preprocessed folder carries one) when there is one, else
	// the generated folds, which a training writes to
	// <output_dir>/<experiment>/splits_final.json, shared by its folds and
	// runs. Nothing is ever written into the dataset or store folder, so
	// a read-only dataset works.
	SplitsFile string `yaml:"splits_file"`
	// HoldoutFraction, when above 0, replaces the k folds with one split
	// holding out this fraction of the cases for validation (fold must be
	// 0, or -1 for every case): of nnU-Net's seeded permutation of the
	// sorted case IDs (RandomState(12345)), the first
	// ⌊n·(1−holdout_fraction)⌋ train, the rest validate. 0.2 is nnU-Net's
	// own random 80:20 split (its do_split for fold 0 beyond the splits
	// file). 0 (the default): k-fold cross-validation. The split is
	// written, when generated, to
	// <output_dir>/<experiment>/splits_holdout_<fraction>.json; an
	// existing splits_final.json in the dataset or store (k folds) is not
	// used.
	HoldoutFraction float64 `yaml:"holdout_fraction"`

	// Workers is the number of worker goroutines, or "auto" (unset: the
	// default, min(8, cores−1), at least 1; 0 makes every sample on the
	// consumer's goroutine, as PyTorch's num_workers=0).
	Workers Workers `yaml:"workers"`
	// PrefetchFactor is the number of batches per worker that may be in
	// flight: prefetch depth = workers × prefetch_factor.
	PrefetchFactor int `yaml:"prefetch_factor"`
	// OversampleForeground is the fraction of each batch (its last
	// round(batch × p) slots) whose patch is centred on foreground
	// (nnU-Net's oversample_foreground_percent).
	OversampleForeground float64 `yaml:"oversample_foreground"`
	// CaseWeights gives per-case sampling weights by case ID (default 1).
	CaseWeights map[string]float64 `yaml:"case_weights"`

	// Source is where voxels come from: "auto" (the prepared store when it
	// exists, else "cache"), "gz" (read the case files for every sample:
	// a .nii.gz up to the region's last plane; a Zarr/N5 store only the
	// chunks the region overlaps, through a chunk cache of cache_bytes the
	// workers share, with z-score statistics from a sampled fingerprint
	// when the case has over 256³ voxels), "cache" (decode once, keep
	// decoded volumes in memory within cache_bytes) or "store".
	Source string `yaml:"source"`
	// CacheBytes is the byte budget of the decoded-volume cache (source
	// cache), or of the decoded-chunk cache of Zarr/N5 stores (source
	// gz), e.g. "4GiB" (0 disables the cache).
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// Store is the prepared-store folder (empty: <dataset>/.voxtrain-store).
	Store string `yaml:"store"`
	// StoreChunk is the edge of the store's cubic chunks.
	StoreChunk int `yaml:"store_chunk"`
	// StoreCodec is the store's chunk compression: "s2-shuffle" (S2 over
	// float32 byte planes, the fastest compressed codec to read by
	// measurement), "s2", "zstd" or "zstd-shuffle" (smaller, slower to
	// read), or "raw": uncompressed chunks read through a memory map, the
	// fastest of all at 4 bytes a voxel on disk (see docs/BENCHMARKS.md).
	StoreCodec string `yaml:"store_codec"`

	// Normalization is the deterministic intensity normalisation per image
	// channel, nnU-Net's schemes: "zscore" (the case's mean and std), "ct"
	// (clip to ct_window, then subtract ct_mean and divide by ct_std: the
	// dataset's foreground 0.5/99.5 percentiles, mean and std, as in
	// nnU-Net's dataset fingerprint) or "none". One value applies to every
	// channel.
	Normalization StringList `yaml:"normalization"`
	// CTWindow is [low, high] for "ct" normalisation. When absent it is
	// computed from the dataset (see CTStd).
	CTWindow []float64 `yaml:"ct_window"`
	// CTMean and CTStd are the dataset foreground statistics for "ct".
	// When ct_std is absent, the mean and std are computed from the
	// dataset, as is ct_window when absent, and a given ct_mean is kept;
	// when ct_std is given, ct_mean is taken as given (0 when unset). A
	// file that gives ct_std: 0 with ct normalisation is an error (no
	// std is 0; leave the key out to compute it). Computed statistics follow nnU-Net's dataset fingerprint
	// (see package data) and are written into the run's config.yaml.
	CTMean float64 `yaml:"ct_mean"`
	CTStd  float64 `yaml:"ct_std"`
	// CTMeanGiven records that the file gave ct_mean (Parse sets it), so
	// that a given 0 is kept as the mean rather than computed; in a
	// section built in code a zero CTMean counts as not given.
	CTMeanGiven bool `yaml:"-"`
	// IgnoreLabel is loss.ignore_label as the data section sees it (0:
	// none; Parse and Default copy it from the loss section): a
	// manifest's masked-out voxels read as it (see package data). In a
	// section built in code it is set by hand.
	IgnoreLabel int `yaml:"-"`
	// MultiLabel is model.targets multi_label as the data section sees it
	// (Parse and Default copy it): labels are then bit-packed bytes, bit c
	// for class c, built from a manifest crop's per-class arrays or a
	// dataset.json's nnU-Net regions (see package data). In a section
	// built in code it is set by hand.
	MultiLabel bool `yaml:"-"`
	// TargetSpacing, when set, resamples every case after normalisation to
	// this voxel size, [d, h, w] in the files' units in (D, H, W) = NIfTI
	// (z, y, x) order, as nnU-Net's preprocessing (images trilinear,
	// labels nearest). Absent: no resampling. An axis of 0 keeps each
	// case's own spacing along it: nnU-Net's 2d configurations resample
	// the slices in-plane and never across them. The cases must state one
	// unit (a case stating none is taken to be in the others'): a dataset
	// mixing millimetres and micrometres is refused (data.SameUnit).
	TargetSpacing []float64 `yaml:"target_spacing,omitempty"`
	// SpacingUnit is the length unit target_spacing is in, the unit the
	// training cases state ("millimeter", "micrometer", "nanometer", … or
	// "mm", "um", "nm": any spelling volume.NormalizeUnit reads); train
	// plan writes it when the cases state one. With target_spacing,
	// training refuses cases that state another unit (a case stating none
	// is taken to be in it), and prediction converts target_spacing into
	// each input's unit before it resamples the input or compares its
	// spacing (a model trained on millimetre NIfTI files predicting an
	// OME-Zarr in micrometres). Empty: unknown, and target_spacing is
	// taken to be in each file's own unit, as before units were recorded.
	SpacingUnit string `yaml:"spacing_unit,omitempty"`
	// CropToNonzero crops every case, before normalisation, to the
	// bounding box of its nonzero mask (voxels nonzero in any channel,
	// holes filled), as nnU-Net's preprocessing always does; predictions
	// are pasted back into the input's full grid (background outside).
	CropToNonzero bool `yaml:"crop_to_nonzero"`
	// UseMaskForNorm is nnU-Net's use_mask_for_norm, per image channel
	// (one value: all): a "zscore" channel marked true takes its mean and
	// std over the nonzero mask only and is 0 outside it, as nnU-Net's
	// ZScoreNormalization. nnU-Net's planner sets it when cropping keeps
	// less than 3/4 of the median image (train plan writes it).
	UseMaskForNorm BoolList `yaml:"use_mask_for_norm,omitempty"`
	// ResampleOrder is how target_spacing resamples: "linear" (images
	// trilinear, labels nearest; the cheapest) or "nnunet" (nnU-Net's
	// resample_data_or_seg: images cubic spline, labels one-hot linear,
	// and for anisotropic spacing, ratio > 3, in-plane only with nearest
	// along the out-of-plane axis).
	ResampleOrder string `yaml:"resample_order"`

	// OnError is "fail" (stop with an error naming the file) or "skip"
	// (log once, quarantine the case, draw a replacement).
	OnError string `yaml:"on_error"`
	// WatchdogTimeout reports a sample that takes longer.
	WatchdogTimeout time.Duration `yaml:"watchdog_timeout"`
	// HardTimeout, when set, makes the stream fail when one sample takes
	// longer; its worker, stuck in a read that may never return, is then
	// abandoned and replaced rather than waited for.
	HardTimeout time.Duration `yaml:"hard_timeout"`
}

// CaseSpec is one explicitly listed case.
type CaseSpec struct {
	// ID names the case (default: the label's, else the first image's,
	// file name without extension).
	ID string `yaml:"id"`
	// Image is one file (3D, or 4D with channels on the 4th axis) or a
	// list of 3D files, one per channel.
	Image StringList `yaml:"image"`
	// Label is the label map ("" for none).
	Label string `yaml:"label"`
	// Weight is the sampling weight (default 1).
	Weight float64 `yaml:"weight"`
}

// WorkerCount resolves Workers to the number of pool goroutines: the
// default when unset, and for "auto" the default as the ceiling the tuner
// may use. 0 means synchronous (samples made inside Next).
func (d Data) WorkerCount() int {
	if d.Workers.Auto || !d.Workers.Set {
		return DefaultWorkers()
	}
	return d.Workers.N
}

// StoreDir is the prepared store's folder: store, else
// <dataset>/.voxtrain-store (with a manifest, beside it).
func (d Data) StoreDir() string {
	if d.Store != "" {
		return d.Store
	}
	if d.Dataset == "" && d.Manifest != "" {
		return filepath.Join(filepath.Dir(d.Manifest), ".voxtrain-store")
	}
	return filepath.Join(d.Dataset, ".voxtrain-store")
}

// NeedsCTStatistics reports whether the section uses ct normalisation and
// leaves some of its statistics to compute from the dataset: no ct_window,
// or no ct_std (ct_mean goes with ct_std).
func (d Data) NeedsCTStatistics() bool {
	if len(d.CTWindow) != 0 && d.CTStd != 0 {
		return false
	}
	for _, n := range d.Normalization {
		if n == "ct" {
			return true
		}
	}
	return false
}

// Target returns target_spacing as (D, H, W), or nil when unset.
func (d Data) Target() *[3]float64 {
	if len(d.TargetSpacing) != 3 {
		return nil
	}
	return &[3]float64{d.TargetSpacing[0], d.TargetSpacing[1], d.TargetSpacing[2]}
}

// TargetUnit returns spacing_unit as volume.Header.Unit spells it
// ("mm" → "millimeter"; "" when unset).
func (d Data) TargetUnit() string { return volume.NormalizeUnit(d.SpacingUnit) }

// Workers is a worker count or "auto". The zero value (not set) means the
// default count, min(8, cores−1), at least 1; an explicit 0 runs every
// sample on the consumer's goroutine inside Next (no prefetch, as
// PyTorch's num_workers=0).
type Workers struct {
	N    int
	Auto bool
	Set  bool
}

// UnmarshalYAML accepts an integer ≥ 0, "auto" or "default".
func (w *Workers) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseWorkers(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: workers: %w", n.Line, err)
	}
	*w = v
	return nil
}

// MarshalYAML writes "auto", the count, or "default" when unset, so a
// resolved config reads back as it was.
func (w Workers) MarshalYAML() (any, error) {
	switch {
	case w.Auto:
		return "auto", nil
	case !w.Set:
		return "default", nil
	}
	return w.N, nil
}

// ParseWorkers parses "auto", "default" (unset) or a non-negative integer.
func ParseWorkers(s string) (Workers, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "auto":
		return Workers{Auto: true, Set: true}, nil
	case "default":
		return Workers{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return Workers{}, fmt.Errorf("%q is not a worker count (an integer ≥ 0, or auto)", s)
	}
	return Workers{N: n, Set: true}, nil
}

// String returns "auto", "default" or the count.
func (w Workers) String() string {
	if w.Auto {
		return "auto"
	}
	if !w.Set {
		return "default"
	}
	return strconv.Itoa(w.N)
}

// DefaultWorkers is the worker count when data.workers is unset:
// min(8, cores−1), at least 1.
func DefaultWorkers() int {
	return max(1, min(8, runtime.NumCPU()-1))
}

// ByteSize is a size in bytes that YAML may give as an integer or with a
// unit ("512MiB", "4GiB", "2GB").
type ByteSize int64

// UnmarshalYAML parses an integer or a size with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = ByteSize(v)
	return nil
}

// MarshalYAML writes whole binary units ("4GiB") where exact, else bytes.
func (b ByteSize) MarshalYAML() (any, error) {
	for _, u := range []struct {
		suf string
		mul int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b > 0 && int64(b)%u.mul == 0 {
			return strconv.FormatInt(int64(b)/u.mul, 10) + u.suf, nil
		}
	}
	return int64(b), nil
}

// ParseByteSize parses "123", "64KiB", "512MiB", "4GiB", "1TiB" or the
// decimal "KB", "MB", "GB", "TB".
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suf string
		mul int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.mul
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mul) > 1<<62 || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 512MiB, 4GiB)", s)
	}
	return int64(f * float64(mul)), nil
}

// BoolList is a YAML boolean or sequence of booleans.
type BoolList []bool

// UnmarshalYAML accepts true or [true, false].
func (l *BoolList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		*l = BoolList{b}
		return nil
	}
	var out []bool
	if err := n.Decode(&out); err != nil {
		return err
	}
	*l = out
	return nil
}

// StringList is a YAML scalar or sequence of strings.
type StringList []string

// UnmarshalYAML accepts "a" or [a, b].
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: want a string", c.Line)
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list of strings", n.Line)
}
