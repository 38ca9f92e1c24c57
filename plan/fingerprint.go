package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/data"
)

// Fingerprint is a dataset's summary the planner works from, nnU-Net v2's
// dataset_fingerprint.json (DatasetFingerprintExtractor in
// nnunetv2/experiment_planning/dataset_fingerprint/fingerprint_extractor.py)
// with its key names, plus two keys of ours (CaseIDs, ClassFrequencies).
// Axes are (D, H, W) = NIfTI (z, y, x), the order nnU-Net's SimpleITK
// reader gives too.
type Fingerprint struct {
	// Spacings is each case's voxel size.
	Spacings [][3]float64 `json:"spacings"`
	// ShapesAfterCrop is each case's shape after cropping to the bounding
	// box of its nonzero voxels (any channel ≠ 0), nnU-Net's crop_to_nonzero.
	ShapesAfterCrop [][3]int `json:"shapes_after_crop"`
	// ForegroundIntensityPropertiesPerChannel holds, by channel index as a
	// string, the statistics of the image intensities under the label
	// (label > 0) inside the crop, every case weighted equally.
	ForegroundIntensityPropertiesPerChannel map[string]IntensityStats `json:"foreground_intensity_properties_per_channel"`
	// MedianRelativeSizeAfterCropping is the median over cases of (voxels
	// in the crop) / (voxels in the image).
	MedianRelativeSizeAfterCropping float64 `json:"median_relative_size_after_cropping"`

	// CaseIDs names the cases, in the order of the lists above (ours).
	CaseIDs []string `json:"case_ids"`
	// ClassFrequencies is, by label value as a string, the fraction of all
	// cropped voxels of the dataset that carry it (ours; nnU-Net's
	// fingerprint has no class statistics).
	ClassFrequencies map[string]float64 `json:"class_frequencies"`
	// SpacingUnit is the unit of Spacings, the one the cases state
	// (volume.Header.Unit's spelling; ours; "" when none states one, as
	// nnU-Net's fingerprint, whose SimpleITK spacings are millimetres).
	SpacingUnit string `json:"spacing_unit,omitempty"`
}

// IntensityStats are one channel's foreground intensity statistics, with
// nnU-Net's key names.
type IntensityStats struct {
	Max            float64 `json:"max"`
	Mean           float64 `json:"mean"`
	Median         float64 `json:"median"`
	Min            float64 `json:"min"`
	Percentile99_5 float64 `json:"percentile_99_5"`
	Percentile00_5 float64 `json:"percentile_00_5"`
	Std            float64 `json:"std"`
}

// samplesBudget bounds the foreground intensities kept over the whole
// dataset, and minSamplesPerCase the per-case share from below. nnU-Net
// draws 10e7 / cases intensities from every case with replacement
// (num_foreground_voxels_for_intensitystats) and takes the statistics of
// the pool: with so many draws that is, up to sampling noise, the mixture
// in which every case with foreground weighs the same and each of its
// foreground voxels 1/(its count). We compute that mixture directly: mean,
// std, min and max exactly from every foreground voxel, the percentiles
// from every foreground voxel of a case that has at most
// max(minSamplesPerCase, samplesBudget/cases) of them and from that many
// drawn with replacement otherwise (memory: 12 bytes per kept voxel).
const (
	samplesBudget     = 10_000_000
	minSamplesPerCase = 10_000
	// samplesSeed seeds the per-case draw (nnU-Net's 1234), mixed with the
	// case ID so the draw depends only on the case.
	samplesSeed = 1234
)

// caseSummary is what one case contributes.
type caseSummary struct {
	spacing  [3]float64
	unit     string // the first image's spatial unit (volume.Header.Unit; "": not stated)
	cropped  [3]int
	relSize  float64
	classes  [256]int64
	channels []channelSummary
}

// channelSummary is one channel's foreground of one case: exact moments
// and extremes, and the intensities kept for the percentiles.
type channelSummary struct {
	n        int
	mean, m2 float64 // mean and sum of squared deviations
	min, max float64
	kept     []float32
}

// Extract computes ds's fingerprint, decoding cases on workers goroutines
// (at most workers decoded cases in memory at once); the result does not
// depend on workers. channels is the channel count (0: what the files
// hold). Every case needs a label.
func Extract(ctx context.Context, ds *data.Dataset, channels, workers int) (*Fingerprint, error) {
	n := len(ds.Cases)
	if n == 0 {
		return nil, fmt.Errorf("fingerprint: %s has no cases", where(ds))
	}
	for _, c := range ds.Cases {
		if c.Label == "" {
			return nil, fmt.Errorf("fingerprint: case %s (%s) has no label map; planning needs every case labelled", c.ID, c.Images[0])
		}
	}
	keep := max(minSamplesPerCase, samplesBudget/n)
	sums := make([]*caseSummary, n)
	errs := make([]error, n)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if cctx.Err() != nil {
					continue
				}
				sums[i], errs[i] = summarizeCase(ds.Cases[i], channels, keep)
				if errs[i] != nil {
					cancel()
				}
			}
		}()
	}
feed:
	for i := range ds.Cases {
		select {
		case jobs <- i:
		case <-cctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs { // the first failing case in dataset order
		if err != nil {
			return nil, fmt.Errorf("fingerprint: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return combine(ds, sums)
}

// where names a dataset in messages.
func where(ds *data.Dataset) string {
	if ds.Root == "" {
		return "the case list"
	}
	return ds.Root
}

// summarizeCase decodes one case (intensities as stored, no normalisation
// or resampling) and summarises it.
func summarizeCase(c data.Case, channels, keep int) (*caseSummary, error) {
	v, err := data.ReadCase(config.Data{Normalization: config.StringList{"none"}}, c, channels)
	if err != nil {
		return nil, err
	}
	lo, hi := nonzeroBox(v.Image, v.Shape)
	s := &caseSummary{spacing: v.Spacing, unit: v.Unit}
	vox := 1
	for a := range 3 {
		s.cropped[a] = hi[a] - lo[a]
		vox *= s.cropped[a]
	}
	s.relSize = float64(vox) / float64(v.Shape[0]*v.Shape[1]*v.Shape[2])
	s.channels = make([]channelSummary, len(v.Image))
	fg := make([][]float32, len(v.Image))
	H, W := v.Shape[1], v.Shape[2]
	for d := lo[0]; d < hi[0]; d++ {
		for h := lo[1]; h < hi[1]; h++ {
			row := (d*H + h) * W
			for w := lo[2]; w < hi[2]; w++ {
				l := v.Label[row+w]
				s.classes[l]++
				if l == 0 {
					continue
				}
				for ch, im := range v.Image {
					x := im[row+w]
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						return nil, fmt.Errorf("%s: case %s has a non-finite intensity (%g) in channel %d's foreground", c.Images[min(ch, len(c.Images)-1)], c.ID, x, ch)
					}
					fg[ch] = append(fg[ch], x)
				}
			}
		}
	}
	for ch, xs := range fg {
		s.channels[ch] = summarizeChannel(xs, c.ID, keep)
	}
	return s, nil
}

// nonzeroBox is the bounding box [lo, hi) of the voxels where any channel
// is nonzero, nnU-Net's create_nonzero_mask and get_bbox_from_mask. (Its
// hole filling does not change the box: a hole lies inside it.) An image
// that is zero everywhere keeps its whole extent.
func nonzeroBox(img [][]float32, shape [3]int) (lo, hi [3]int) {
	lo = shape
	H, W := shape[1], shape[2]
	for d := range shape[0] {
		for h := range H {
			row := (d*H + h) * W
			for w := range W {
				nz := false
				for _, im := range img {
					if im[row+w] != 0 {
						nz = true
						break
					}
				}
				if !nz {
					continue
				}
				p := [3]int{d, h, w}
				for a := range 3 {
					lo[a] = min(lo[a], p[a])
					hi[a] = max(hi[a], p[a]+1)
				}
			}
		}
	}
	if hi == ([3]int{}) {
		return [3]int{}, shape
	}
	return lo, hi
}

// summarizeChannel computes a case's exact foreground moments and keeps
// its intensities for the percentiles: all of them, or keep drawn with
// replacement by a generator seeded from the case ID.
func summarizeChannel(xs []float32, id string, keep int) channelSummary {
	cs := channelSummary{n: len(xs), min: math.Inf(1), max: math.Inf(-1)}
	if len(xs) == 0 {
		return cs
	}
	var sum float64
	for _, x := range xs {
		sum += float64(x)
		cs.min = math.Min(cs.min, float64(x))
		cs.max = math.Max(cs.max, float64(x))
	}
	cs.mean = sum / float64(len(xs))
	for _, x := range xs {
		d := float64(x) - cs.mean
		cs.m2 += d * d
	}
	if len(xs) <= keep {
		cs.kept = xs
		return cs
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	r := rand.New(rand.NewPCG(samplesSeed, h.Sum64()))
	cs.kept = make([]float32, keep)
	for k := range cs.kept {
		cs.kept[k] = xs[r.IntN(len(xs))]
	}
	return cs
}

// combine assembles the fingerprint from the per-case summaries.
func combine(ds *data.Dataset, sums []*caseSummary) (*Fingerprint, error) {
	// The planner's median spacing, and the target spacing every case is
	// resampled to, are numbers compared across cases (nnU-Net, which
	// reads spacings through SimpleITK in millimetres, never sees this):
	// data.SameUnit refuses cases in different units.
	units := make([]string, len(sums))
	for i, s := range sums {
		units[i] = s.unit
	}
	unit, err := data.SameUnit(ds, units)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	fp := &Fingerprint{
		ForegroundIntensityPropertiesPerChannel: map[string]IntensityStats{},
		ClassFrequencies:                        map[string]float64{},
		SpacingUnit:                             unit,
	}
	rel := make([]float64, len(sums))
	var classes [256]int64
	var total int64
	for i, s := range sums {
		fp.CaseIDs = append(fp.CaseIDs, ds.Cases[i].ID)
		fp.Spacings = append(fp.Spacings, s.spacing)
		fp.ShapesAfterCrop = append(fp.ShapesAfterCrop, s.cropped)
		rel[i] = s.relSize
		for l, k := range s.classes {
			classes[l] += k
			total += k
		}
		if len(s.channels) != len(sums[0].channels) {
			return nil, fmt.Errorf("fingerprint: case %s has %d channels, case %s %d", ds.Cases[i].ID, len(s.channels), ds.Cases[0].ID, len(sums[0].channels))
		}
	}
	fp.MedianRelativeSizeAfterCropping = percentile(rel, 50)
	for l, k := range classes {
		if k > 0 {
			fp.ClassFrequencies[strconv.Itoa(l)] = float64(k) / float64(total)
		}
	}
	for ch := range sums[0].channels {
		per := make([]channelSummary, len(sums))
		for i, s := range sums {
			per[i] = s.channels[ch]
		}
		st, err := pooledStats(per)
		if err != nil {
			return nil, fmt.Errorf("fingerprint: %s channel %d: %w", where(ds), ch, err)
		}
		fp.ForegroundIntensityPropertiesPerChannel[strconv.Itoa(ch)] = st
	}
	return fp, nil
}

// pooledStats is the mixture of the cases with foreground, each weighing
// the same (see samplesBudget).
func pooledStats(per []channelSummary) (IntensityStats, error) {
	type wv struct {
		v float32
		w float64
	}
	var (
		cases  int
		pool   []wv
		mean   float64
		st     = IntensityStats{Min: math.Inf(1), Max: math.Inf(-1)}
		caseOf []channelSummary
	)
	for _, cs := range per {
		if cs.n > 0 {
			cases++
			caseOf = append(caseOf, cs)
		}
	}
	if cases == 0 {
		return st, errors.New("no case has foreground voxels (label > 0) inside its nonzero region")
	}
	wc := 1 / float64(cases)
	for _, cs := range caseOf {
		mean += wc * cs.mean
		st.Min = math.Min(st.Min, cs.min)
		st.Max = math.Max(st.Max, cs.max)
		w := wc / float64(len(cs.kept))
		for _, x := range cs.kept {
			pool = append(pool, wv{x, w})
		}
	}
	// Law of total variance: within-case plus between-case.
	var variance float64
	for _, cs := range caseOf {
		d := cs.mean - mean
		variance += wc * (cs.m2/float64(cs.n) + d*d)
	}
	st.Mean, st.Std = mean, math.Sqrt(variance)
	slices.SortFunc(pool, func(a, b wv) int { return cmp.Compare(a.v, b.v) })
	quantile := func(q float64) float64 {
		var acc float64
		for _, p := range pool {
			acc += p.w
			if acc >= q-1e-12 {
				return float64(p.v)
			}
		}
		return float64(pool[len(pool)-1].v)
	}
	st.Percentile00_5 = quantile(0.005)
	st.Median = quantile(0.5)
	st.Percentile99_5 = quantile(0.995)
	return st, nil
}

// percentile is numpy's percentile (linear interpolation) of xs, q in
// [0, 100]; xs is not changed.
func percentile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	h := q / 100 * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}
