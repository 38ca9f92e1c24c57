package data

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the `data:` section of a voxtrain config. The zero value is
// usable once Dataset (or Cases) is set: every other field has a default,
// applied by Defaults.
type Config struct {
	// Dataset is a folder holding either an MSD dataset.json with a
	// "training" list, or the nnU-Net layout (imagesTr/CASE_0000.nii.gz,
	// labelsTr/CASE.nii.gz).
	Dataset string `yaml:"dataset"`
	// Format is "auto" (default: MSD when dataset.json has a training
	// list, else nnU-Net), "msd" or "nnunet".
	Format string `yaml:"format"`
	// Cases lists the cases explicitly instead of discovering them under
	// Dataset; relative paths are relative to Dataset (or the working
	// directory when Dataset is empty).
	Cases []CaseSpec `yaml:"cases"`

	// Fold selects the validation fold, 0 ≤ fold < num_folds; -1 trains
	// on every case and validates on none.
	Fold int `yaml:"fold"`
	// NumFolds is k of the k-fold split (default 5).
	NumFolds int `yaml:"num_folds"`
	// SplitsFile holds the folds; written on first use, then reused so a
	// fold is the same cases on every machine (default
	// <store or dataset>/splits_final.json).
	SplitsFile string `yaml:"splits_file"`
	// Seed drives shuffling and every sample's randomness.
	Seed uint64 `yaml:"seed"`

	// Workers is the number of worker goroutines, or "auto" (default
	// min(8, cores−1), at least 1).
	Workers Workers `yaml:"workers"`
	// PrefetchFactor is the number of batches per worker that may be in
	// flight (default 2): prefetch depth = workers × prefetch_factor.
	PrefetchFactor int `yaml:"prefetch_factor"`
	// IterationsPerEpoch is the number of batches per epoch, cases drawn
	// with replacement (nnU-Net's 250); 0 makes an epoch one pass over the
	// training cases in a fresh random order.
	IterationsPerEpoch int `yaml:"iterations_per_epoch"`
	// OversampleForeground is the fraction of each batch (its last
	// round(batch × p) slots) whose patch is centred on foreground
	// (default 0.33, as nnU-Net). An explicit 0 turns it off.
	OversampleForeground *float64 `yaml:"oversample_foreground"`
	// CaseWeights gives per-case sampling weights by case ID (default 1).
	CaseWeights map[string]float64 `yaml:"case_weights"`

	// Source is where voxels come from: "auto" (default: the prepared
	// store when it exists and is current, else "cache"), "gz" (decode the
	// NIfTI files for every sample), "cache" (decode once, keep decoded
	// volumes in memory within cache_bytes) or "store".
	Source string `yaml:"source"`
	// CacheBytes is the byte budget of the decoded-volume cache, e.g.
	// "4GiB" (default 4GiB; 0 disables the cache).
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// Store is the prepared-store folder (default <dataset>/.voxtrain-store).
	Store string `yaml:"store"`
	// StoreChunk is the edge of the store's cubic chunks (default 64).
	StoreChunk int `yaml:"store_chunk"`
	// StoreCodec is the store's chunk compression: "s2-shuffle" (default:
	// S2 over float32 byte planes, the fastest compressed codec to read by
	// measurement), "s2", "zstd" or "zstd-shuffle" (smaller, slower to
	// read), or "raw": uncompressed chunks read through a memory map, the
	// fastest of all at 4 bytes a voxel on disk (see docs/BENCHMARKS.md).
	StoreCodec string `yaml:"store_codec"`

	// Normalization is the deterministic intensity normalisation per image
	// channel, nnU-Net's schemes (augment.ZScore, augment.CTNormalize):
	// "zscore" (default: the case's mean and std), "ct" (clip to
	// ct_window, then subtract ct_mean and divide by ct_std: the dataset's
	// foreground 0.5/99.5 percentiles, mean and std, as in nnU-Net's
	// dataset fingerprint) or "none". One value applies to every channel.
	Normalization StringList `yaml:"normalization"`
	// CTWindow is [low, high] for "ct" normalisation. When absent it is
	// computed from the dataset (see CTStd).
	CTWindow []float64 `yaml:"ct_window"`
	// CTMean and CTStd are the dataset foreground statistics for "ct".
	// When ct_std is absent (0), the mean and std are computed from the
	// dataset, as is ct_window when absent, and a given non-zero ct_mean
	// is kept; when ct_std is given, ct_mean is taken as given (0 when
	// unset). Computed statistics follow nnU-Net's dataset fingerprint:
	// 10,000 foreground (label > 0) voxels drawn with replacement from
	// every labelled case of the dataset (all folds, so one store serves
	// every fold) by a fixed-seed generator, pooled; the window is their
	// 0.5 and 99.5 percentiles, the mean and std their population mean and
	// std. They are cached in <store>/ct_statistics.json, logged, and part
	// of the prepared store's fingerprint. Only one channel may use "ct"
	// with computed statistics.
	CTMean float64 `yaml:"ct_mean"`
	CTStd  float64 `yaml:"ct_std"`
	// TargetSpacing, when set, resamples every case after normalisation to
	// this voxel size, [d, h, w] in the files' units in (D, H, W) = NIfTI
	// (z, y, x) order, as nnU-Net's preprocessing: the shape becomes
	// round(shape·spacing/target) per axis (at least 1), images are
	// interpolated trilinearly, labels by nearest neighbour, the grids'
	// outer faces coincide (see ResampledShape and ResampleLinear), and the
	// foreground index is built on the resampled label. Every source (gz,
	// cache, store) gives the same voxels. Absent: no resampling.
	TargetSpacing []float64 `yaml:"target_spacing,omitempty"`

	// OnError is "fail" (default: stop with an error naming the file) or
	// "skip" (log once, quarantine the case, draw a replacement).
	OnError string `yaml:"on_error"`
	// WatchdogTimeout reports a sample that takes longer (default 120s).
	WatchdogTimeout time.Duration `yaml:"watchdog_timeout"`
	// HardTimeout, when set, makes the stream fail when one sample takes
	// longer.
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

// Workers is a worker count or "auto". The zero value (not set) means the
// default, min(8, cores−1), at least 1; an explicit 0 runs every sample on
// the consumer's goroutine inside Next (no prefetch, as PyTorch's
// num_workers=0).
type Workers struct {
	N    int
	Auto bool
	Set  bool
}

// UnmarshalYAML accepts an integer ≥ 0 or the string "auto".
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

// String returns "auto" or the count.
func (w Workers) String() string {
	if w.Auto {
		return "auto"
	}
	if !w.Set {
		return "default"
	}
	return strconv.Itoa(w.N)
}

// DefaultWorkers is min(8, cores−1), at least 1.
func DefaultWorkers() int {
	return max(1, min(8, runtime.NumCPU()-1))
}

// ByteSize is a size in bytes that YAML may give as an integer or with a
// unit ("512MiB", "4GiB", "2GB"). Set records that it was given, so an
// explicit 0 differs from absent.
type ByteSize struct {
	N   int64
	Set bool
}

// UnmarshalYAML parses an integer or a size with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Value == "default" {
		*b = ByteSize{}
		return nil
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = ByteSize{N: v, Set: true}
	return nil
}

// MarshalYAML writes the size in bytes, or "default" when unset.
func (b ByteSize) MarshalYAML() (any, error) {
	if !b.Set {
		return "default", nil
	}
	return b.N, nil
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
	if err != nil || f < 0 || f*float64(mul) > 1<<62 {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 512MiB, 4GiB)", s)
	}
	return int64(f * float64(mul)), nil
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

// ResolvePaths makes the section's relative paths (dataset, store,
// splits_file, and the case files of an explicit list without a dataset
// folder) relative to base, the folder of the config file they were
// written in, so a config works from any working directory.
func (c *Config) ResolvePaths(base string) {
	rel := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
	rel(&c.Dataset)
	rel(&c.Store)
	rel(&c.SplitsFile)
	if c.Dataset == "" {
		for i := range c.Cases {
			for j := range c.Cases[i].Image {
				rel(&c.Cases[i].Image[j])
			}
			rel(&c.Cases[i].Label)
		}
	}
}

// ParseConfig decodes a `data:` section (the mapping itself). Unknown keys
// are an error with their line number.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("data: %w", err)
	}
	return c, nil
}

// Defaults used when a field is left unset.
const (
	DefaultNumFolds        = 5
	DefaultPrefetchFactor  = 2
	DefaultOversample      = 0.33
	DefaultCacheBytes      = 4 << 30
	DefaultStoreChunk      = 64
	DefaultWatchdogTimeout = 120 * time.Second
)

// Defaults returns c with every unset field given its default.
func (c Config) Defaults() Config {
	if c.Format == "" {
		c.Format = "auto"
	}
	if c.NumFolds == 0 {
		c.NumFolds = DefaultNumFolds
	}
	if c.PrefetchFactor == 0 {
		c.PrefetchFactor = DefaultPrefetchFactor
	}
	if c.OversampleForeground == nil {
		p := DefaultOversample
		c.OversampleForeground = &p
	}
	if c.Source == "" {
		c.Source = "auto"
	}
	if !c.CacheBytes.Set {
		c.CacheBytes = ByteSize{N: DefaultCacheBytes, Set: true}
	}
	if c.StoreChunk == 0 {
		c.StoreChunk = DefaultStoreChunk
	}
	if c.StoreCodec == "" {
		c.StoreCodec = "s2-shuffle"
	}
	if len(c.Normalization) == 0 {
		c.Normalization = StringList{"zscore"}
	}
	if c.OnError == "" {
		c.OnError = "fail"
	}
	if c.WatchdogTimeout == 0 {
		c.WatchdogTimeout = DefaultWatchdogTimeout
	}
	return c
}

// Validate reports the first invalid field of a defaulted config, naming it.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("data.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Dataset == "" && len(c.Cases) == 0 {
		bad("dataset", "neither a dataset folder nor a cases list is given")
	}
	switch c.Format {
	case "auto", "msd", "nnunet":
	default:
		bad("format", "%q is not auto, msd or nnunet", c.Format)
	}
	if c.NumFolds < 2 {
		bad("num_folds", "%d, want ≥ 2", c.NumFolds)
	}
	if c.Fold < -1 || c.Fold >= c.NumFolds {
		bad("fold", "%d, want -1 (all cases) or 0..%d", c.Fold, c.NumFolds-1)
	}
	if c.PrefetchFactor < 1 {
		bad("prefetch_factor", "%d, want ≥ 1", c.PrefetchFactor)
	}
	if c.IterationsPerEpoch < 0 {
		bad("iterations_per_epoch", "%d, want ≥ 0", c.IterationsPerEpoch)
	}
	if p := *c.OversampleForeground; p < 0 || p > 1 {
		bad("oversample_foreground", "%g, want 0..1", p)
	}
	for id, w := range c.CaseWeights {
		if w < 0 || w != w {
			bad("case_weights", "case %s has weight %g, want ≥ 0", id, w)
		}
	}
	switch c.Source {
	case "auto", "gz", "cache", "store":
	default:
		bad("source", "%q is not auto, gz, cache or store", c.Source)
	}
	if c.CacheBytes.N < 0 {
		bad("cache_bytes", "negative")
	}
	if c.StoreChunk < 8 || c.StoreChunk > 512 {
		bad("store_chunk", "%d, want 8..512", c.StoreChunk)
	}
	switch c.StoreCodec {
	case "s2", "zstd", "s2-shuffle", "zstd-shuffle", "raw":
	default:
		bad("store_codec", "%q is not s2, zstd, s2-shuffle, zstd-shuffle or raw", c.StoreCodec)
	}
	ctChecked := false
	for _, n := range c.Normalization {
		switch n {
		case "zscore", "none":
		case "ct":
			if ctChecked {
				continue
			}
			ctChecked = true
			// Absent values (an empty window, a zero std) are computed from
			// the dataset; given ones must be usable.
			if w := c.CTWindow; len(w) != 0 && (len(w) != 2 || !(w[0] < w[1]) || math.IsInf(w[0], 0) || math.IsInf(w[1], 0)) {
				bad("ct_window", "ct normalisation needs [low, high] with low < high (or no ct_window, to compute it from the dataset), got %v", c.CTWindow)
			}
			if c.CTStd < 0 || math.IsNaN(c.CTStd) || math.IsInf(c.CTStd, 0) {
				bad("ct_std", "ct normalisation needs the dataset's foreground std (> 0, or no ct_std, to compute it from the dataset), got %g", c.CTStd)
			}
			if math.IsNaN(c.CTMean) || math.IsInf(c.CTMean, 0) {
				bad("ct_mean", "%g is not a finite mean", c.CTMean)
			}
		default:
			bad("normalization", "%q is not zscore, ct or none", n)
		}
	}
	if c.TargetSpacing != nil {
		if err := checkTarget(c.TargetSpacing); err != nil {
			bad("target_spacing", "%v", err)
		}
	}
	switch c.OnError {
	case "fail", "skip":
	default:
		bad("on_error", "%q is not fail or skip", c.OnError)
	}
	if c.WatchdogTimeout < 0 {
		bad("watchdog_timeout", "negative")
	}
	if c.HardTimeout < 0 {
		bad("hard_timeout", "negative")
	}
	for i, cs := range c.Cases {
		if len(cs.Image) == 0 {
			bad(fmt.Sprintf("cases[%d].image", i), "missing")
		}
		if cs.Weight < 0 {
			bad(fmt.Sprintf("cases[%d].weight", i), "%g, want ≥ 0", cs.Weight)
		}
	}
	return errors.Join(errs...)
}

// WorkerCount resolves Workers to the number of pool goroutines: the
// default when unset, and for "auto" the default as the ceiling the tuner
// may use. 0 means synchronous (samples made inside Next).
func (c Config) WorkerCount() int {
	if c.Workers.Auto || !c.Workers.Set {
		return DefaultWorkers()
	}
	return c.Workers.N
}
