package data

import (
	"fmt"
	"sync/atomic"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// gzSource decodes the case's files for every sample, into the worker's
// reused buffers, reading no further than the sample needs: a .nii.gz is
// inflated only up to the last plane the sample's region reads. What is a
// pure function of the case — its shape, foreground index and
// normalisation statistics — is learnt on its first read (which decodes it
// whole) and kept, so every later read plans first and then decodes,
// normalises (and, with a target spacing, resamples) only its region.
//
// Chunked cases (Zarr, N5) are read region by region instead, through
// store handles and a chunk cache the workers share (source_chunked.go).
type gzSource struct {
	l     *Loader
	metas []atomic.Pointer[caseMeta]
	// chunked marks the cases read region by region; files holds their
	// open stores (nil when there are none).
	chunked []bool
	files   *chunkFiles
}

func newGZSource(l *Loader) *gzSource {
	s := &gzSource{l: l, metas: make([]atomic.Pointer[caseMeta], len(l.ds.Cases)), chunked: make([]bool, len(l.ds.Cases))}
	for i, c := range l.ds.Cases {
		if s.chunked[i] = chunkedCase(c); s.chunked[i] && s.files == nil {
			s.files = newChunkFiles(int64(l.cfg.CacheBytes))
		}
	}
	return s
}

// lazy reports whether case c is read region by region (a chunked case
// whose preprocessing needs no whole case).
func (s *gzSource) lazy(c int) bool { return s.chunked[c] && !s.l.spec.Whole() }

// meta returns case c's metadata, learning it on the case's first read:
// the case is decoded whole into the worker's buffers (where region then
// finds it), its normalisation statistics computed on the files' grid, and
// its foreground index built on the label (resampled to the target grid
// first when there is one), as readCase computes them.
func (s *gzSource) meta(w *worker, c int) (*caseMeta, error) {
	if m := s.metas[c].Load(); m != nil {
		return m, nil
	}
	if s.lazy(c) {
		return s.chunkedMeta(c)
	}
	ps := w.scratch()
	cs := s.l.ds.Cases[c]
	if s.l.spec.Whole() {
		return s.wholeMeta(ps, c)
	}
	src := &ps.src
	ps.holds = 0
	if err := decodeCase(cs, s.l.channels, src, &ps.bufs, 0); err != nil {
		return nil, err
	}
	spec := &s.l.spec
	st, err := caseStats(spec, cs, src, nil)
	if err != nil {
		return nil, err
	}
	m := &caseMeta{shape: src.Shape, srcShape: src.Shape, stats: st, spacing: src.Spacing, affine: src.Affine}
	grid := &Volume{Shape: src.Shape, Label: src.Label}
	if spec.Target != nil {
		target, err := spec.TargetIn(src.Unit, src.Spacing)
		if err == nil {
			err = checkSpacing(src.Spacing, *target)
		}
		if err != nil {
			return nil, fmt.Errorf("case %s (%s): %w", cs.ID, cs.Images[0], err)
		}
		if to := preprocess.ResampledShape(src.Shape, src.Spacing, *target); to != src.Shape {
			m.shape = to
			m.resample = preprocess.NewResampler(src.Shape, to)
			grid = &Volume{Shape: to}
			if src.Label != nil {
				grid.Label = make([]uint8, to[0]*to[1]*to[2])
				m.resample.Nearest(grid.Label, src.Label, [3]int{}, to)
			}
		}
	}
	if err := indexForeground(spec, cs, grid); err != nil {
		return nil, err
	}
	m.fg = grid.FG
	s.metas[c].Store(m)
	ps.holds = c + 1
	return m, nil
}

// region decodes the planes box reads (unless meta just decoded the case
// whole) and normalises them with the case's statistics; with a target
// spacing it then resamples box from them. Every voxel of the result
// depends only on its source neighbours, so the bytes equal those of a
// whole-case read.
func (s *gzSource) region(w *worker, c int, m *caseMeta, box volume.Box) (augment.Input, error) {
	if s.lazy(c) {
		return s.chunkedRegion(w, c, m, box)
	}
	ps := w.scratch()
	if s.l.spec.Whole() {
		return s.wholeRegion(ps, c, m)
	}
	src := &ps.src
	// The source planes the region reads: [0, hi) are decoded (a stream is
	// read from its start), [lo, hi) normalised.
	lo, hi := 0, max(box.Hi[0], 1)
	if m.resample != nil {
		if box.Empty() {
			// The patch lies wholly outside the volume: any voxel will do.
			box = volume.Box{Hi: [3]int{1, 1, 1}}
		}
		lo, hi = m.resample.SourceSpan(0, box.Lo[0], box.Hi[0])
	}
	if ps.holds != c+1 {
		if err := decodeCase(s.l.ds.Cases[c], s.l.channels, src, &ps.bufs, hi); err != nil {
			return augment.Input{}, err
		}
		if src.Shape != m.srcShape {
			return augment.Input{}, fmt.Errorf("case %s changed shape while training (%v, was %v)", s.l.ds.Cases[c].ID, src.Shape, m.srcShape)
		}
	}
	ps.holds = 0 // normalised in place below
	norm := box
	if m.resample != nil {
		norm = volume.Box{Lo: [3]int{lo, 0, 0}, Hi: [3]int{hi, src.Shape[1], src.Shape[2]}}
	}
	for ch := range src.Image {
		s.l.spec.NormalizeBox(ch, src.Image[ch], src.Shape, norm, m.stats[ch])
	}
	if m.resample == nil {
		n := hi * src.Shape[1] * src.Shape[2]
		ps.regImg = ps.regImg[:0]
		for _, im := range src.Image {
			ps.regImg = append(ps.regImg, im[:n])
		}
		var lbl []uint8
		if src.Label != nil {
			lbl = src.Label[:n]
		}
		return augment.Input{Image: ps.regImg, Label: lbl, Shape: [3]int{hi, src.Shape[1], src.Shape[2]}}, nil
	}
	sz := box.Size()
	n := sz[0] * sz[1] * sz[2]
	ps.regImg = resizeChannels(ps.regImg, len(src.Image), n)
	for ch := range src.Image {
		m.resample.Linear(ps.regImg[ch], src.Image[ch], box.Lo, box.Hi)
	}
	var lbl []uint8
	if src.Label != nil {
		ps.regLbl = grow(ps.regLbl, n)
		m.resample.Nearest(ps.regLbl, src.Label, box.Lo, box.Hi)
		lbl = ps.regLbl
	}
	return augment.Input{Image: ps.regImg, Label: lbl, Shape: sz, Origin: box.Lo}, nil
}

func (s *gzSource) volume(w *worker, c int) (*Volume, error) {
	v, _, err := readCase(s.l.ds.Cases[c], s.l.channels, &s.l.spec, nil, nil)
	return v, err
}

// wholeMeta learns case c's metadata when the Spec preprocesses whole
// cases (cropping, the nonzero mask, cubic splines: none can be computed
// on a region alone): the case is preprocessed whole as readCase does,
// and kept in the worker's scratch for region.
func (s *gzSource) wholeMeta(ps *pipeScratch, c int) (*caseMeta, error) {
	ps.prepHolds = 0
	v, _, err := readCase(s.l.ds.Cases[c], s.l.channels, &s.l.spec, &ps.prep, &ps.src)
	if err != nil {
		return nil, err
	}
	m := &caseMeta{shape: v.Shape, srcShape: v.SourceShape, crop: v.Crop, fg: v.FG, spacing: v.Spacing, affine: v.Affine}
	s.metas[c].Store(m)
	ps.prepHolds = c + 1
	return m, nil
}

// wholeRegion returns case c preprocessed whole (read again unless the
// worker holds it): augmentation reads only the box of it. Every sample
// then decodes and preprocesses the whole case; the cache and the
// prepared store do it once.
func (s *gzSource) wholeRegion(ps *pipeScratch, c int, m *caseMeta) (augment.Input, error) {
	if ps.prepHolds != c+1 {
		ps.prepHolds = 0
		v, _, err := readCase(s.l.ds.Cases[c], s.l.channels, &s.l.spec, &ps.prep, &ps.src)
		if err != nil {
			return augment.Input{}, err
		}
		if v.Shape != m.shape {
			return augment.Input{}, fmt.Errorf("case %s changed shape while training (%v, was %v)", s.l.ds.Cases[c].ID, v.Shape, m.shape)
		}
		ps.prepHolds = c + 1
	}
	v := &ps.prep
	return augment.Input{Image: v.Image, Label: v.Label, Shape: v.Shape}, nil
}
