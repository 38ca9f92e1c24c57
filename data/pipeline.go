package data

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/data/store"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// A sample is made in three steps, the same for every voxel source:
//
//	meta   what planning needs of the case: its shape, foreground index
//	       and normalisation statistics (learnt on a case's first read)
//	plan   the augmentation draws its parameters and the region it reads
//	region the source delivers that region, preprocessed
//
// then augmentation samples the patch from the region into the batch slot.

// voxelSource is where a sample's voxels come from: the NIfTI files
// (gzSource), the decoded-volume cache (cacheSource) or the prepared store
// (storeSource).
type voxelSource interface {
	// meta returns what planning a sample of case c needs.
	meta(w *worker, c int) (*caseMeta, error)
	// region returns box (on the case's grid) of case c, preprocessed, as
	// augmentation's input; m is what meta returned.
	region(w *worker, c int, m *caseMeta, box volume.Box) (augment.Input, error)
	// volume returns case c whole (validation); the caller must not keep
	// worker scratch, so sources copy where they would share it.
	volume(w *worker, c int) (*Volume, error)
}

// caseMeta is what planning a sample needs: known once a case was read.
type caseMeta struct {
	shape   [3]int
	fg      *preprocess.ForegroundIndex
	spacing [3]float64
	affine  volume.Affine
	// stats are the per-channel normalisation parameters (gz source).
	stats []preprocess.CTStats
	// srcShape is the shape of the case's files (shape unless cropped or
	// resampled); crop the box of them the case holds (zero: whole).
	srcShape [3]int
	crop     volume.Box
	// resample maps the files' grid onto the resampled one (gz source;
	// nil when the case is not resampled, or resampling keeps its shape).
	resample *preprocess.Resampler
	// whole is the case in memory (cache source).
	whole *Volume
}

// pipeScratch is one worker's reusable memory for the patch pipeline.
type pipeScratch struct {
	ws   augment.Workspace
	plan augment.Plan
	dst  [][]float32 // slot views, one per channel
	meta caseMeta    // the cache source's, per sample
	// gz source: the case as decoded (files' grid), and which case it
	// holds whole and unnormalised (c+1; 0: none), left by meta for region.
	src   Volume
	holds int
	bufs  readBufs
	// gz source with a Spec that preprocesses whole cases: the case
	// preprocessed, and which it is (c+1; 0: none).
	prep      Volume
	prepHolds int
	// the region handed to augmentation (gz prefix views, resampled or
	// store regions)
	regImg [][]float32
	regLbl []uint8
	// a chunked case's source region's label (gz source)
	bufLbl []uint8
	sc     store.Scratch
}

func (w *worker) scratch() *pipeScratch {
	if w.pipe == nil {
		w.pipe = &pipeScratch{}
	}
	return w.pipe
}

// patchTask makes augmented (or, for validation, plain) patches.
type patchTask struct {
	l   *Loader
	aug *augment.Augmenter
	src voxelSource
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
	t0 := time.Now()
	m, err := t.src.meta(w, smp.Case)
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := t.aug.Draw(&ps.plan, r, m.shape, m.fg, smp.ForceFG); err != nil {
		return err
	}
	t2 := time.Now()
	in, err := t.src.region(w, smp.Case, m, ps.plan.Box)
	t3 := time.Now()
	w.addStage(stageRead, t1.Sub(t0)+t3.Sub(t2))
	w.addStage(stagePlan, t2.Sub(t1))
	if err != nil {
		return err
	}
	if err := t.aug.Apply(&ps.plan, in, augment.Dest{Image: ps.dst, Label: lbl}, &ps.ws); err != nil {
		return fmt.Errorf("%s: %w", t.describe(smp.Case), err)
	}
	w.addStage(stageAugment, time.Since(t3))
	return nil
}

// cacheSource decodes each case once and keeps it in the memory cache.
type cacheSource struct {
	l     *Loader
	cache *volumeCache
}

func (s *cacheSource) meta(w *worker, c int) (*caseMeta, error) {
	v, err := s.cache.get(c)
	if err != nil {
		return nil, err
	}
	m := &w.scratch().meta
	*m = caseMeta{shape: v.Shape, fg: v.FG, whole: v}
	return m, nil
}

// region returns the whole case: augmentation reads only the box of it.
func (s *cacheSource) region(_ *worker, _ int, m *caseMeta, _ volume.Box) (augment.Input, error) {
	v := m.whole
	return augment.Input{Image: v.Image, Label: v.Label, Shape: v.Shape}, nil
}

func (s *cacheSource) volume(w *worker, c int) (*Volume, error) { return s.cache.get(c) }

// storeSource reads only the chunks of the prepared store that a sample's
// region overlaps.
type storeSource struct {
	l     *Loader
	cases []*store.Case
	metas []caseMeta
}

func (s *storeSource) meta(_ *worker, c int) (*caseMeta, error) { return &s.metas[c], nil }

func (s *storeSource) region(w *worker, c int, _ *caseMeta, box volume.Box) (augment.Input, error) {
	ps := w.scratch()
	if box.Empty() {
		// The patch lies wholly outside the volume (only border values):
		// any voxel will do as the source.
		box = volume.Box{Hi: [3]int{1, 1, 1}}
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
		return augment.Input{}, err
	}
	return augment.Input{Image: ps.regImg, Label: lbl, Shape: sz, Origin: box.Lo}, nil
}

func (s *storeSource) volume(w *worker, c int) (*Volume, error) {
	sc := s.cases[c]
	img, lbl, err := sc.DecodeAll(&w.scratch().sc)
	if err != nil {
		return nil, err
	}
	m := &s.metas[c]
	return &Volume{Shape: sc.Shape, SourceShape: m.srcShape, Crop: m.crop, ResampleOrder: s.l.spec.Resample,
		Image: img, Label: lbl, FG: m.fg, Spacing: m.spacing, Affine: m.affine}, nil
}
