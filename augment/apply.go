package augment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
)

// Input is the volume a sample reads from: a whole decoded case, or a
// sub-box of it read from a chunked store. Image channels and label are
// Shape[0]·Shape[1]·Shape[2] voxels each, W fastest; element (0, 0, 0) is
// voxel Origin of the full volume. A sub-box must contain the Plan's volume.Box.
type Input struct {
	Image  [][]float32
	Label  []uint8 // nil if the case has no label
	Shape  [3]int
	Origin [3]int
}

// Dest receives one augmented sample: Image has one slice per channel of
// exactly Patch[0]·Patch[1]·Patch[2] voxels (a slot of an NCDHW batch
// buffer); Label, if not nil, receives class indices as float32. With no
// source label, Label is filled with the label border value.
type Dest struct {
	Image [][]float32
	Label []float32
}

// Workspace is one worker goroutine's scratch. The zero value is ready; it
// grows on first use and then Apply allocates nothing. Not safe for
// concurrent use: one per goroutine.
type Workspace struct {
	// Workers > 1 splits each sample over that many goroutines, by slabs of
	// output planes. The output bytes do not depend on it.
	Workers int

	slots  []*workerSlot // pointers: a slot's rng points at its own pcg
	stats  []planeStats
	kern   [3][]float32
	vol    []float32
	vol2   []float32
	taps   [3]lowResTaps
	sample Plan
	job    planeJob
}

// workerSlot is one goroutine's private scratch within a Workspace.
type workerSlot struct {
	spatial spatialScratch
	line    []float32
	plane   []float32
	pcg     rand.PCG
	rng     *rand.Rand
}

// planeJob is a unit of per-plane work; run handles planes [lo, hi) on
// worker slot w.
type planeJob struct {
	kind              jobKind
	a                 *Augmenter
	s                 *Plan
	src               *region
	dst               [][]float32
	dlab              []float32
	x, y              []float32
	p, m              [3]int
	c                 int
	sign, f0, f1, f2  float32
	f3                float32
	clip              bool
	g                 float64
	k                 []float32
	taps              *lowResTaps
	border, labBorder float32
	regionStore       region
}

type jobKind int

const (
	jobSpatial jobKind = iota
	jobStats
	jobNoise
	jobScale
	jobContrast
	jobGamma
	jobAffine
	jobBlurW
	jobBlurH
	jobBlurD
	jobCopy
	jobDown
	jobUpW
	jobUpH
	jobUpD
)

func (ws *Workspace) slot(w int) *workerSlot {
	return ws.slots[w]
}

func (ws *Workspace) grow(n, plane, line int) {
	for len(ws.slots) < max(1, ws.Workers) {
		sl := &workerSlot{}
		sl.rng = rand.New(&sl.pcg)
		ws.slots = append(ws.slots, sl)
	}
	for _, sl := range ws.slots {
		if cap(sl.plane) < plane {
			sl.plane = make([]float32, plane)
		}
		if cap(sl.line) < line {
			sl.line = make([]float32, line)
		}
	}
	if cap(ws.stats) < n {
		ws.stats = make([]planeStats, n)
	}
	for i := range ws.kern {
		if cap(ws.kern[i]) < 65 {
			ws.kern[i] = make([]float32, 0, 65)
		}
	}
}

func (ws *Workspace) scratchVols(n int) {
	if cap(ws.vol) < n {
		ws.vol = make([]float32, n)
		ws.vol2 = make([]float32, n)
	}
}

// each runs job over planes [0, n), split over the workspace's workers.
func (ws *Workspace) each(n int) {
	k := min(max(1, ws.Workers), n)
	if k <= 1 {
		ws.run(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for w := 1; w < k; w++ {
		go func(w int) {
			defer wg.Done()
			ws.run(w, w*n/k, (w+1)*n/k)
		}(w)
	}
	ws.run(0, 0, n/k)
	wg.Wait()
}

func (ws *Workspace) run(w, lo, hi int) {
	j := &ws.job
	sl := ws.slot(w)
	plane := j.p[1] * j.p[2]
	switch j.kind {
	case jobSpatial:
		spatialPlanes(j.s, j.src, j.dst, j.dlab, j.border, j.labBorder, j.a.cubic, &sl.spatial, lo, hi)
	case jobStats:
		statsPlanes(j.x, plane, j.sign, ws.stats, lo, hi)
	case jobNoise:
		noisePlanes(j.x, plane, j.f0, j.s.noiseSeed, j.c, &sl.pcg, sl.rng, lo, hi)
	case jobScale:
		scalePlanes(j.x, plane, j.f0, lo, hi)
	case jobContrast:
		contrastPlanes(j.x, plane, j.f0, j.f1, j.f2, j.f3, j.clip, lo, hi)
	case jobGamma:
		gammaPlanes(j.x, plane, j.sign, j.f0, j.f1, j.f2, j.g, lo, hi)
	case jobAffine:
		affinePlanes(j.x, plane, j.sign, j.f0, j.f1, j.f2, lo, hi)
	case jobBlurW:
		blurW(j.x, j.p, j.k, sl.line, lo, hi)
	case jobBlurH:
		blurH(j.x, j.p, j.k, sl.plane, lo, hi)
	case jobBlurD:
		blurD(j.x, j.y, j.p, j.k, lo, hi)
	case jobCopy:
		copy(j.y[lo*plane:hi*plane], j.x[lo*plane:hi*plane])
	case jobDown:
		downsamplePlanes(j.y, j.x, j.p, j.m, lo, hi)
	case jobUpW:
		upW(j.y, j.x, j.m[1], j.m[2], j.p[2], j.taps, lo, hi)
	case jobUpH:
		upH(j.y, j.x, j.m[1], j.p[1], j.p[2], j.taps, lo, hi)
	case jobUpD:
		upD(j.y, j.x, plane, j.taps, lo, hi)
	}
}

// Apply executes a planned sample: the spatial pass from src into dst, then
// the intensity transforms on dst, in nnU-Net's order (noise, blur,
// brightness, contrast, low resolution, inverted gamma, gamma). src may be
// the full volume or a sub-box containing s.Box; dst must not overlap it.
// Nothing is allocated once ws has grown (with ws.Workers > 1, a few small
// objects per pass for the goroutines).
func (a *Augmenter) Apply(s *Plan, src Input, dst Dest, ws *Workspace) error {
	if err := a.check(s, &src, &dst); err != nil {
		return err
	}
	p := s.Patch
	plane := p[1] * p[2]
	ws.grow(p[0], plane, p[2]+65)

	j := &ws.job
	*j = planeJob{kind: jobSpatial, a: a, s: s, p: p, dst: dst.Image, dlab: dst.Label,
		border: float32(a.cfg.BorderValue), labBorder: float32(a.cfg.LabelBorderValue)}
	j.regionStore = region{img: src.Image, lab: src.Label, d: src.Shape[0], h: src.Shape[1], w: src.Shape[2], origin: src.Origin}
	j.src = &j.regionStore
	if src.Label == nil {
		j.dlab = nil
		for i := range dst.Label {
			dst.Label[i] = j.labBorder
		}
	}
	ws.each(p[0])

	for c, x := range dst.Image {
		a.intensity(ws, s, c, x)
	}
	*j = planeJob{}
	return nil
}

// Run plans and applies one sample from a whole volume with the
// workspace's own Plan: the common case when the case is in memory.
func (a *Augmenter) Run(ws *Workspace, rng *rand.Rand, src Input, fg *preprocess.ForegroundIndex, forceFG bool, dst Dest) error {
	if src.Origin != [3]int{} {
		return errors.New("augment: Run needs the whole volume (Origin 0); use Plan and Apply for a sub-box")
	}
	if err := a.Draw(&ws.sample, rng, src.Shape, fg, forceFG); err != nil {
		return err
	}
	return a.Apply(&ws.sample, src, dst, ws)
}

func (a *Augmenter) check(s *Plan, src *Input, dst *Dest) error {
	if s == nil || s.Patch != a.patch || len(s.ch) != a.channels {
		return errors.New("augment: Apply: sample was not planned by this Augmenter")
	}
	if len(src.Image) != a.channels {
		return fmt.Errorf("augment: Apply: source has %d image channels, want %d", len(src.Image), a.channels)
	}
	if len(dst.Image) != a.channels {
		return fmt.Errorf("augment: Apply: destination has %d image channels, want %d", len(dst.Image), a.channels)
	}
	for i, n := range src.Shape {
		if n <= 0 {
			return fmt.Errorf("augment: Apply: source shape %v: axis %d is %d", src.Shape, i, n)
		}
	}
	region := volume.Box{Lo: src.Origin}
	for i := range 3 {
		region.Hi[i] = src.Origin[i] + src.Shape[i]
		if src.Origin[i] < 0 || region.Hi[i] > s.Shape[i] {
			return fmt.Errorf("augment: Apply: source region %v+%v lies outside the volume %v", src.Origin, src.Shape, s.Shape)
		}
	}
	if !region.Contains(s.Box) {
		return fmt.Errorf("augment: Apply: source region [%v, %v) does not contain the sample's box [%v, %v)", region.Lo, region.Hi, s.Box.Lo, s.Box.Hi)
	}
	// The region is indexed with int32 (spatial.go's taps).
	if err := volume.CheckInMemory(src.Shape, 1); err != nil {
		return fmt.Errorf("augment: Apply: source region %v+%v: %w", src.Origin, src.Shape, err)
	}
	n := src.Shape[0] * src.Shape[1] * src.Shape[2]
	for c, img := range src.Image {
		if len(img) != n {
			return fmt.Errorf("augment: Apply: source channel %d has %d voxels, shape %v needs %d", c, len(img), src.Shape, n)
		}
	}
	if src.Label != nil && len(src.Label) != n {
		return fmt.Errorf("augment: Apply: source label has %d voxels, shape %v needs %d", len(src.Label), src.Shape, n)
	}
	m := a.patch[0] * a.patch[1] * a.patch[2]
	for c, img := range dst.Image {
		if len(img) != m {
			return fmt.Errorf("augment: Apply: destination channel %d has %d voxels, patch %v needs %d", c, len(img), a.patch, m)
		}
	}
	if dst.Label != nil && len(dst.Label) != m {
		return fmt.Errorf("augment: Apply: destination label has %d voxels, patch %v needs %d", len(dst.Label), a.patch, m)
	}
	return nil
}

// statsOf returns the statistics of sign·x.
func (ws *Workspace) statsOf(x []float32, p [3]int, sign float32) planeStats {
	j := &ws.job
	j.kind, j.x, j.p, j.sign = jobStats, x, p, sign
	ws.each(p[0])
	return combineStats(ws.stats[:p[0]])
}

// intensity applies channel c's drawn intensity transforms to x in place.
func (a *Augmenter) intensity(ws *Workspace, s *Plan, c int, x []float32) {
	cp := &s.ch[c]
	p := s.Patch
	j := &ws.job
	if cp.noise > 0 {
		*j = planeJob{kind: jobNoise, s: s, x: x, p: p, f0: cp.noise, c: c}
		ws.each(p[0])
	}
	if cp.blur != [3]float32{} {
		a.blur(ws, x, p, cp.blur)
	}
	if cp.brightness != 0 {
		*j = planeJob{kind: jobScale, x: x, p: p, f0: cp.brightness}
		ws.each(p[0])
	}
	if cp.contrast != 0 {
		st := ws.statsOf(x, p, 1)
		*j = planeJob{kind: jobContrast, x: x, p: p, f0: float32(st.mean), f1: cp.contrast,
			f2: st.min, f3: st.max, clip: a.cfg.Contrast.PreserveRange}
		ws.each(p[0])
	}
	if cp.lowRes != 0 {
		a.lowRes(ws, x, p, cp.lowRes)
	}
	if cp.gammaInv != 0 {
		gamma(ws, x, p, float64(cp.gammaInv), -1, a.cfg.GammaInverted.RetainStats)
	}
	if cp.gamma != 0 {
		gamma(ws, x, p, float64(cp.gamma), 1, a.cfg.Gamma.RetainStats)
	}
}

// gamma is batchgeneratorsv2's GammaTransform on sign·x (sign −1: the
// inverted image): map to [0, 1] by min and range, raise to g, map back,
// and with retain restore the mean and (unbiased) standard deviation.
func gamma(ws *Workspace, x []float32, p [3]int, g float64, sign float32, retain bool) {
	const eps = 1e-7
	st := ws.statsOf(x, p, sign)
	rng := st.max - st.min
	j := &ws.job
	*j = planeJob{kind: jobGamma, x: x, p: p, sign: sign, f0: st.min, f1: max(rng, eps), f2: rng, g: g}
	ws.each(p[0])
	if !retain {
		return
	}
	after := ws.statsOf(x, p, sign)
	f := float32(st.std() / math.Max(after.std(), eps))
	*j = planeJob{kind: jobAffine, x: x, p: p, sign: sign, f0: float32(after.mean), f1: f, f2: float32(st.mean)}
	ws.each(p[0])
}

// blur is a separable Gaussian blur, W then H then D, with torch's reflect
// padding; an axis with sigma 0 is left alone.
func (a *Augmenter) blur(ws *Workspace, x []float32, p [3]int, sigma [3]float32) {
	j := &ws.job
	for ax := 2; ax >= 0; ax-- {
		if sigma[ax] <= 0 || p[ax] == 1 {
			continue
		}
		ws.kern[ax] = gaussKernel(ws.kern[ax], float64(sigma[ax]))
		k := ws.kern[ax]
		switch ax {
		case 2:
			*j = planeJob{kind: jobBlurW, x: x, p: p, k: k}
			ws.each(p[0])
		case 1:
			*j = planeJob{kind: jobBlurH, x: x, p: p, k: k}
			ws.each(p[0])
		case 0:
			ws.scratchVols(p[0] * p[1] * p[2])
			*j = planeJob{kind: jobCopy, x: x, y: ws.vol, p: p}
			ws.each(p[0])
			*j = planeJob{kind: jobBlurD, x: x, y: ws.vol, p: p, k: k}
			ws.each(p[0])
		}
	}
}

// lowRes is batchgeneratorsv2's SimulateLowResolutionTransform: nearest-
// exact downsampling by scale on the configured axes, then linear
// (align_corners=False) upsampling back, separably W, H, D.
func (a *Augmenter) lowRes(ws *Workspace, x []float32, p [3]int, scale float32) {
	var m [3]int
	same := true
	for i := range 3 {
		m[i] = p[i]
		if a.lrAxes[i] {
			m[i] = lowResSize(p[i], scale)
		}
		same = same && m[i] == p[i]
	}
	if same {
		return
	}
	ws.scratchVols(p[0] * p[1] * p[2])
	for i := range 3 {
		ws.taps[i].build(m[i], p[i])
	}
	j := &ws.job
	small, t1 := ws.vol, ws.vol2
	*j = planeJob{kind: jobDown, x: x, y: small, p: p, m: m}
	ws.each(m[0])
	*j = planeJob{kind: jobUpW, x: small, y: t1, p: p, m: m, taps: &ws.taps[2]}
	ws.each(m[0])
	t2 := ws.vol // small is no longer needed
	*j = planeJob{kind: jobUpH, x: t1, y: t2, p: p, m: m, taps: &ws.taps[1]}
	ws.each(m[0])
	*j = planeJob{kind: jobUpD, x: t2, y: x, p: p, m: m, taps: &ws.taps[0]}
	ws.each(p[0])
}
