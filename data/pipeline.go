package data

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/nifti"
)

// pipeScratch is one worker's reusable memory for the patch pipeline.
type pipeScratch struct {
	ws     augment.Workspace
	sample augment.Sample
	plan   planner
	dst    [][]float32 // slot views, one per channel
	// gz source: the case decoded into reused buffers.
	vol    Volume
	bufs   readBufs
	srcImg [][]float32 // gz source: the planes a sample reads
	// store source: the sample's region.
	regImg [][]float32
	regLbl []uint8
	sc     store.Scratch
}

func (w *worker) scratch() *pipeScratch {
	if w.pipe == nil {
		w.pipe = &pipeScratch{}
	}
	return w.pipe
}

// caseMeta is what planning a sample needs: known once a case was read.
type caseMeta struct {
	shape   [3]int
	fg      *augment.ForegroundIndex
	spacing [3]float64
	affine  nifti.Matrix4
	// stats are the per-channel normalisation parameters (gz source).
	stats []chanStats
	// srcShape is the shape of the case's files (shape unless resampled).
	srcShape [3]int
	// rs maps the files' grid onto the resampled one (gz source; nil
	// when the case is not resampled, or resampling keeps its shape).
	rs *resampler
}

// planner draws one sample's plan once the source knows the case's shape
// and foreground index. It lives in the worker's scratch (a closure would
// allocate per sample).
type planner struct {
	aug     *augment.Augmenter
	s       *augment.Sample
	r       *rand.Rand
	forceFG bool
	dur     time.Duration
}

// plan returns the region of the volume the sample reads.
func (p *planner) plan(shape [3]int, fg *augment.ForegroundIndex) (augment.Box, error) {
	t0 := time.Now()
	err := p.aug.Plan(p.s, p.r, shape, fg, p.forceFG)
	p.dur = time.Since(t0)
	return p.s.Box, err
}

// source hands a worker the voxels of one sample. It calls p.plan once it
// knows the case's shape and foreground index.
type source interface {
	voxels(w *worker, c int, p *planner) (augment.Source, error)
	// volume returns case c whole (validation); the caller must not keep
	// worker scratch, so sources copy where they would share it.
	volume(w *worker, c int) (*Volume, error)
}

// patchTask makes augmented (or, for validation, plain) patches.
type patchTask struct {
	l   *Loader
	aug *augment.Augmenter
	src source
}

func (t *patchTask) describe(c int) string {
	cs := t.l.ds.Cases[c]
	return fmt.Sprintf("%s (%s)", cs.ID, strings.Join(cs.Files(), ", "))
}

func (t *patchTask) run(w *worker, r *rand.Rand, smp Sample, img, lbl []float32) error {
	ps := w.scratch()
	vox := len(lbl)
	ps.dst = ps.dst[:0]
	for ch := 0; ch*vox < len(img); ch++ {
		ps.dst = append(ps.dst, img[ch*vox:(ch+1)*vox])
	}
	ps.plan = planner{aug: t.aug, s: &ps.sample, r: r, forceFG: smp.ForceFG}
	t0 := time.Now()
	src, err := t.src.voxels(w, smp.Case, &ps.plan)
	t1 := time.Now()
	w.addStage(StageRead, t1.Sub(t0)-ps.plan.dur)
	w.addStage(StagePlan, ps.plan.dur)
	if err != nil {
		return err
	}
	if err := t.aug.Apply(&ps.sample, src, augment.Dest{Image: ps.dst, Label: lbl}, &ps.ws); err != nil {
		return fmt.Errorf("%s: %w", t.describe(smp.Case), err)
	}
	w.addStage(StageAugment, time.Since(t1))
	return nil
}

// cacheSource decodes each case once and keeps it in the memory cache.
type cacheSource struct {
	l     *Loader
	cache *volumeCache
}

func (s *cacheSource) voxels(w *worker, c int, p *planner) (augment.Source, error) {
	v, err := s.cache.get(c)
	if err != nil {
		return augment.Source{}, err
	}
	if _, err := p.plan(v.Shape, v.FG); err != nil {
		return augment.Source{}, err
	}
	return augment.Source{Image: v.Image, Label: v.Label, Shape: v.Shape}, nil
}

func (s *cacheSource) volume(w *worker, c int) (*Volume, error) { return s.cache.get(c) }

// gzSource decodes the case's files for every sample, into the worker's
// reused buffers. After a case's first read it keeps what is a pure
// function of the case — its shape, foreground index and normalisation
// statistics — so later reads plan first and normalise only the region
// the sample reads. A case resampled to a target spacing is decoded up to
// the last source plane the sample's region interpolates from, those
// planes normalised, and only the region resampled.
type gzSource struct {
	l    *Loader
	meta []atomic.Pointer[caseMeta]
}

func (s *gzSource) voxels(w *worker, c int, p *planner) (augment.Source, error) {
	ps := w.scratch()
	v := &ps.vol
	m := s.meta[c].Load()
	decoded := false
	if m == nil {
		if s.l.prep.Target != nil {
			return s.firstResampled(ps, c, p)
		}
		// The first read of a case decodes it whole for what the later
		// reads keep: its statistics and foreground index. Only the
		// sample's region is normalised, as on any other read.
		var err error
		if m, err = s.learn(ps, c); err != nil {
			return augment.Source{}, err
		}
		decoded = true
	}
	box, err := p.plan(m.shape, m.fg)
	if err != nil {
		return augment.Source{}, err
	}
	if m.rs != nil {
		return s.resampledRegion(ps, c, m, box)
	}
	// Inflate only up to the last plane the sample reads.
	planes := max(box.Hi[0], 1)
	if !decoded {
		if err := decodeCase(s.l.ds.Cases[c], s.l.channels, v, &ps.bufs, planes); err != nil {
			return augment.Source{}, err
		}
		if v.Shape != m.shape {
			return augment.Source{}, fmt.Errorf("case %s changed shape while training (%v, was %v)", s.l.ds.Cases[c].ID, v.Shape, m.shape)
		}
	}
	for ch := range v.Image {
		s.l.prep.applyBox(ch, v.Image[ch], v.Shape, box, m.stats[ch])
	}
	n := planes * v.Shape[1] * v.Shape[2]
	ps.srcImg = ps.srcImg[:0]
	for _, im := range v.Image {
		ps.srcImg = append(ps.srcImg, im[:n])
	}
	var lbl []uint8
	if v.Label != nil {
		lbl = v.Label[:n]
	}
	return augment.Source{Image: ps.srcImg, Label: lbl, Shape: [3]int{planes, v.Shape[1], v.Shape[2]}}, nil
}

// learn decodes case c whole into the worker's volume, unnormalised, and
// records what later reads reuse: its shape, per-channel normalisation
// statistics and foreground index (the same readCase computes).
func (s *gzSource) learn(ps *pipeScratch, c int) (*caseMeta, error) {
	cs := s.l.ds.Cases[c]
	v := &ps.vol
	if err := decodeCase(cs, s.l.channels, v, &ps.bufs, 0); err != nil {
		return nil, err
	}
	st, err := s.l.prep.caseStats(cs, v)
	if err != nil {
		return nil, err
	}
	if err := s.l.prep.indexForeground(cs, v); err != nil {
		return nil, err
	}
	m := &caseMeta{shape: v.Shape, fg: v.FG, stats: st, srcShape: v.SourceShape}
	s.meta[c].Store(m)
	return m, nil
}

// firstResampled is the first read of a case resampled to a target
// spacing: the whole case is decoded, normalised and resampled (readCase),
// and its resampler kept for later reads.
func (s *gzSource) firstResampled(ps *pipeScratch, c int, p *planner) (augment.Source, error) {
	v, st, err := readCase(s.l.ds.Cases[c], s.l.channels, &s.l.prep, &ps.vol, &ps.bufs)
	if err != nil {
		return augment.Source{}, err
	}
	m := &caseMeta{shape: v.Shape, fg: v.FG, stats: st, srcShape: v.SourceShape}
	if v.SourceShape != v.Shape {
		m.rs = newResampler(v.SourceShape, v.Shape)
	}
	s.meta[c].Store(m)
	if _, err := p.plan(v.Shape, v.FG); err != nil {
		return augment.Source{}, err
	}
	return augment.Source{Image: v.Image, Label: v.Label, Shape: v.Shape}, nil
}

// resampledRegion returns the voxels of box (on the resampled grid) of
// case c: the source planes the box interpolates from are decoded and
// normalised with the case's whole-volume statistics, then only the box
// is resampled. Every resampled voxel depends only on its source
// neighbours, so the bytes equal those of a whole-case read.
func (s *gzSource) resampledRegion(ps *pipeScratch, c int, m *caseMeta, box augment.Box) (augment.Source, error) {
	if box.Empty() {
		// The patch lies wholly outside the volume: any voxel will do.
		box = augment.Box{Hi: [3]int{1, 1, 1}}
	}
	zlo, zhi := m.rs.ax[0].span(box.Lo[0], box.Hi[0])
	cs := s.l.ds.Cases[c]
	src := &ps.bufs.src
	if err := decodeCase(cs, s.l.channels, src, &ps.bufs, zhi); err != nil {
		return augment.Source{}, err
	}
	if src.Shape != m.srcShape {
		return augment.Source{}, fmt.Errorf("case %s changed shape while training (%v, was %v)", cs.ID, src.Shape, m.srcShape)
	}
	planes := augment.Box{Lo: [3]int{zlo, 0, 0}, Hi: [3]int{zhi, src.Shape[1], src.Shape[2]}}
	for ch := range src.Image {
		s.l.prep.applyBox(ch, src.Image[ch], src.Shape, planes, m.stats[ch])
	}
	sz := box.Size()
	n := sz[0] * sz[1] * sz[2]
	ps.regImg = resizeChannels(ps.regImg, len(src.Image), n)
	for ch := range src.Image {
		m.rs.linear(ps.regImg[ch], src.Image[ch], box.Lo, box.Hi)
	}
	var lbl []uint8
	if src.Label != nil {
		ps.regLbl = grow(ps.regLbl, n)
		m.rs.nearest(ps.regLbl, src.Label, box.Lo, box.Hi)
		lbl = ps.regLbl
	}
	return augment.Source{Image: ps.regImg, Label: lbl, Shape: sz, Origin: box.Lo}, nil
}

func (s *gzSource) volume(w *worker, c int) (*Volume, error) {
	v, _, err := readCase(s.l.ds.Cases[c], s.l.channels, &s.l.prep, nil, nil)
	return v, err
}

// storeSource reads only the chunks of the prepared store that a sample's
// region overlaps.
type storeSource struct {
	l     *Loader
	cases []*store.Case
	meta  []caseMeta
}

func (s *storeSource) voxels(w *worker, c int, p *planner) (augment.Source, error) {
	ps := w.scratch()
	m := &s.meta[c]
	box, err := p.plan(m.shape, m.fg)
	if err != nil {
		return augment.Source{}, err
	}
	if box.Empty() {
		// The patch lies wholly outside the volume (only border values):
		// any voxel will do as the source.
		box = augment.Box{Hi: [3]int{1, 1, 1}}
	}
	sz := box.Size()
	n := sz[0] * sz[1] * sz[2]
	sc := s.cases[c]
	ps.regImg = resizeChannels(ps.regImg, sc.Channels, n)
	var lbl []uint8
	if sc.HasLabel {
		ps.regLbl = grow(ps.regLbl, n)
		lbl = ps.regLbl
	}
	if err := sc.ReadRegion(box.Lo, box.Hi, ps.regImg, lbl, &ps.sc); err != nil {
		return augment.Source{}, err
	}
	return augment.Source{Image: ps.regImg, Label: lbl, Shape: sz, Origin: box.Lo}, nil
}

func (s *storeSource) volume(w *worker, c int) (*Volume, error) {
	sc := s.cases[c]
	img, lbl, err := sc.DecodeAll(&w.scratch().sc)
	if err != nil {
		return nil, err
	}
	m := &s.meta[c]
	return &Volume{Shape: sc.Shape, SourceShape: m.srcShape, Image: img, Label: lbl, FG: m.fg, Spacing: m.spacing, Affine: m.affine}, nil
}
