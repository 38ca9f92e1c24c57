package data

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"
	"github.com/voxtrain/voxtrain/zarr"
)

// Chunked cases (every file a Zarr, OME-Zarr or N5 store) are read by the
// gz source lazily: a sample reads only the chunks its region overlaps,
// through store handles that stay open for the loader's life and share
// one byte-bounded cache of decoded chunks (data.cache_bytes), so the
// patches that overlap a chunk decode it once between them, whichever
// worker reads them. Learning a case's meta decodes no whole image: the
// label is read chunk by chunk (a uint8 map of the whole case, for the
// foreground index), and z-score statistics come from fingerprintBoxes,
// a deterministic sample of the image's chunks.
//
// A Spec that preprocesses whole cases (crop_to_nonzero,
// use_mask_for_norm, resample_order nnunet) reads chunked cases whole, as
// it does every other format's.

// chunkFiles keeps a loader's chunked stores open, all reading through
// one cache of decoded chunks. Handles hold only metadata, so keeping
// every case's open costs little; the cache's bytes are bounded.
type chunkFiles struct {
	cache *zarr.Cache
	mu    sync.Mutex
	files map[string]volume.File
}

func newChunkFiles(cacheBytes int64) *chunkFiles {
	return &chunkFiles{cache: zarr.NewCache(cacheBytes), files: map[string]volume.File{}}
}

// open returns the open store path, opening it on first use. Handles are
// safe for concurrent reads.
func (h *chunkFiles) open(path string) (volume.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.openLocked(path)
}

func (h *chunkFiles) openLocked(path string) (volume.File, error) {
	if f, ok := h.files[path]; ok {
		return f, nil
	}
	// A derived volume (a manifest crop's window of its raw volume, its
	// masked, resampled or bit-packed label, a region label read through
	// its table) reads the handles of the files it names, kept under their
	// own paths: the crops of one raw volume share its handle, and so its
	// chunks' cache entries.
	if f, ok, err := volume.OpenDerived(path, h.openLocked, false); err != nil {
		return nil, err
	} else if ok {
		h.files[path] = f
		return f, nil
	}
	f, err := zarr.OpenWith(path, zarr.Options{Cache: h.cache})
	if err != nil {
		return nil, err
	}
	h.files[path] = f
	return f, nil
}

// close closes every handle and drops the cached chunks.
func (h *chunkFiles) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, f := range h.files {
		// A derived volume's Close is its files', closed under their own
		// paths.
		if volume.FilePath(p) == p {
			f.Close()
		}
		delete(h.files, p)
	}
	h.cache = zarr.NewCache(0)
}

// chunkedCase reports whether every file of c is a chunked store, which
// the gz source then reads region by region.
func chunkedCase(c Case) bool {
	for _, p := range c.Files() {
		if volume.FormatName(p) != "zarr" {
			return false
		}
		p, _, _, _ = volume.SplitResample(p)
		p, mask, _, ok, _ := volume.SplitMask(p)
		if ok && volume.FormatName(mask) != "zarr" {
			return false
		}
		if files, ok, _ := volume.SplitPacked(p); ok {
			for _, f := range files {
				if volume.FormatName(f) != "zarr" {
					return false
				}
			}
		}
	}
	return true
}

// chunkedFiles are a chunked case's open files, checked against each
// other as decodeCase checks them.
type chunkedFiles struct {
	images []volume.File
	label  volume.File // nil without a label
	hdr    volume.Header
	chunk  [3]int
}

func (s *gzSource) openChunked(c Case) (*chunkedFiles, error) {
	cf := &chunkedFiles{}
	nch := 0
	for fi, p := range c.Images {
		f, err := s.files.open(p)
		if err != nil {
			return nil, err
		}
		h := f.Header()
		if fi == 0 {
			cf.hdr = h
			if ck, ok := f.(volume.Chunked); ok {
				cf.chunk = ck.ChunkShape()
			}
			if len(c.Images) > 1 && h.Channels != 1 {
				return nil, fmt.Errorf("%s: a 4D image (%d volumes) in a case listed as one file per channel", p, h.Channels)
			}
		} else if h.Shape != cf.hdr.Shape || h.Channels != 1 {
			return nil, fmt.Errorf("%s: shape %v (%d channels) differs from the first channel's %v", p, h.Shape, h.Channels, cf.hdr.Shape)
		}
		nch += h.Channels
		cf.images = append(cf.images, f)
	}
	if want := s.l.channels; want != 0 && nch != want {
		return nil, fmt.Errorf("case %s: the files hold %d channels, the dataset declares %d", c.ID, nch, want)
	}
	if c.Label != "" {
		f, err := s.files.open(c.Label)
		if err != nil {
			return nil, err
		}
		if h := f.Header(); h.Shape != cf.hdr.Shape || h.Channels != 1 {
			return nil, fmt.Errorf("%s: label shape %v (%d volumes) does not match the image's %v", c.Label, h.Shape, h.Channels, cf.hdr.Shape)
		}
		cf.label = f
	}
	return cf, nil
}

// readImages reads box of every channel into dst (one slice of
// box.Voxels() per channel).
func (cf *chunkedFiles) readImages(box volume.Box, dst [][]float32) error {
	ch := 0
	for _, f := range cf.images {
		n := f.Header().Channels
		if err := f.ReadRegion(box, dst[ch:ch+n]); err != nil {
			return err
		}
		ch += n
	}
	return nil
}

// readLabel reads the whole label map a chunk-sized box at a time, so no
// more than a chunk's float32 values are held besides the map.
func (cf *chunkedFiles) readLabel(path string) ([]uint8, error) {
	shape := cf.hdr.Shape
	// The label is held whole (its foreground index is built on it):
	// a label too large for memory is refused naming it.
	if err := volume.CheckInMemory(shape, 1); err != nil {
		return nil, fmt.Errorf("%s: the whole label map is read: %w", path, err)
	}
	lbl := make([]uint8, shape[0]*shape[1]*shape[2])
	step := cf.chunk
	for a := range step {
		if step[a] <= 0 {
			step[a] = shape[a]
		}
	}
	var buf []uint8
	for _, b := range tiles(shape, step) {
		buf = grow(buf, b.Voxels())
		if err := cf.label.ReadLabels(b, buf); err != nil {
			return nil, err
		}
		sz := b.Size()
		k := 0
		for z := b.Lo[0]; z < b.Hi[0]; z++ {
			for y := b.Lo[1]; y < b.Hi[1]; y++ {
				o := (z*shape[1]+y)*shape[2] + b.Lo[2]
				copy(lbl[o:o+sz[2]], buf[k:k+sz[2]])
				k += sz[2]
			}
		}
	}
	return lbl, nil
}

// chunkedMeta learns a chunked case's meta without decoding its images
// whole (see the comment at the top of this file).
func (s *gzSource) chunkedMeta(c int) (*caseMeta, error) {
	cs := s.l.ds.Cases[c]
	cf, err := s.openChunked(cs)
	if err != nil {
		return nil, err
	}
	spec := &s.l.spec
	h := cf.hdr
	st, err := fingerprintStats(spec, cs, h.Shape, cf.chunk, s.l.channels, cf.readImages)
	if err != nil {
		return nil, err
	}
	m := &caseMeta{shape: h.Shape, srcShape: h.Shape, stats: st, spacing: h.Spacing, affine: h.Affine}
	grid := &Volume{Shape: h.Shape}
	if cf.label != nil {
		if grid.Label, err = cf.readLabel(cs.Label); err != nil {
			return nil, err
		}
	}
	if spec.Target != nil {
		target, err := spec.TargetIn(h.Unit, h.Spacing)
		if err == nil {
			err = checkSpacing(h.Spacing, *target)
		}
		if err != nil {
			return nil, fmt.Errorf("case %s (%s): %w", cs.ID, cs.Images[0], err)
		}
		if to := preprocess.ResampledShape(h.Shape, h.Spacing, *target); to != h.Shape {
			m.shape = to
			m.resample = preprocess.NewResampler(h.Shape, to)
			src := grid.Label
			grid = &Volume{Shape: to}
			if src != nil {
				if err := volume.CheckInMemory(to, 1); err != nil {
					return nil, fmt.Errorf("case %s: %s resampled to %v: %w", cs.ID, cs.Label, to, err)
				}
				grid.Label = make([]uint8, to[0]*to[1]*to[2])
				m.resample.Nearest(grid.Label, src, [3]int{}, to)
			}
		}
	}
	if err := indexForeground(spec, cs, grid); err != nil {
		return nil, err
	}
	m.fg = grid.FG
	s.metas[c].Store(m)
	return m, nil
}

// chunkedRegion reads box of a chunked case, and nothing else: the source
// box it needs (box itself, or what resampling box reads), normalised
// with the case's statistics, then resampled when the case is.
func (s *gzSource) chunkedRegion(w *worker, c int, m *caseMeta, box volume.Box) (augment.Input, error) {
	ps := w.scratch()
	ps.holds = 0 // ps.src is scratch here
	cf, err := s.openChunked(s.l.ds.Cases[c])
	if err != nil {
		return augment.Input{}, err
	}
	if cf.hdr.Shape != m.srcShape {
		return augment.Input{}, fmt.Errorf("case %s changed shape while training (%v, was %v)", s.l.ds.Cases[c].ID, cf.hdr.Shape, m.srcShape)
	}
	if box.Empty() {
		// The patch lies wholly outside the volume: any voxel will do.
		box = volume.Box{Hi: [3]int{1, 1, 1}}
	}
	from := box
	if m.resample != nil {
		for a := range 3 {
			from.Lo[a], from.Hi[a] = m.resample.SourceSpan(a, box.Lo[a], box.Hi[a])
		}
	}
	fsz := from.Size()
	n := from.Voxels()
	src := &ps.src
	src.Image = resizeChannels(src.Image, len(m.stats), n)
	if err := cf.readImages(from, src.Image); err != nil {
		return augment.Input{}, err
	}
	for ch := range src.Image {
		s.l.spec.NormalizeBox(ch, src.Image[ch], fsz, volume.Whole(fsz), m.stats[ch])
	}
	src.Label = nil
	if cf.label != nil {
		src.Label = grow(ps.bufLbl, n)
		ps.bufLbl = src.Label
		if err := cf.label.ReadLabels(from, src.Label); err != nil {
			return augment.Input{}, err
		}
	}
	if m.resample == nil {
		return augment.Input{Image: src.Image, Label: src.Label, Shape: fsz, Origin: box.Lo}, nil
	}
	sz := box.Size()
	bn := box.Voxels()
	ps.regImg = resizeChannels(ps.regImg, len(src.Image), bn)
	for ch := range src.Image {
		m.resample.LinearFrom(ps.regImg[ch], src.Image[ch], from, box.Lo, box.Hi)
	}
	var lbl []uint8
	if src.Label != nil {
		ps.regLbl = grow(ps.regLbl, bn)
		m.resample.NearestFrom(ps.regLbl, src.Label, from, box.Lo, box.Hi)
		lbl = ps.regLbl
	}
	return augment.Input{Image: ps.regImg, Label: lbl, Shape: sz, Origin: box.Lo}, nil
}

// The sampled fingerprint: a chunked case of more than fingerprintVoxels
// voxels takes its z-score mean and std from fingerprintBoxes (boxes
// of whole chunks) rather than from every voxel; a smaller one from all
// of them, as every other format does.
const fingerprintBoxes = 64

// fingerprintVoxels is 16 Mi voxels (256³); a variable for tests.
var fingerprintVoxels = 1 << 24

// statsBoxes returns the boxes a case's normalisation statistics are
// computed from, in raster order: the whole volume when it has at most
// fingerprintVoxels voxels or its chunking is unknown; else
// fingerprintBoxes distinct tiles of a grid of chunk-aligned boxes (chunks
// grown, doubling along each axis in turn, to about
// fingerprintVoxels/fingerprintBoxes voxels), chosen by a generator
// seeded with the FNV-1a hash of the case ID: the same boxes on every
// run, for every worker count, in every process that reads the case.
func statsBoxes(id string, shape, chunk [3]int) []volume.Box {
	whole := volume.Whole(shape)
	if whole.Voxels() <= fingerprintVoxels || chunk[0] <= 0 || chunk[1] <= 0 || chunk[2] <= 0 {
		return []volume.Box{whole}
	}
	step := chunk
	vox := func() int { return step[0] * step[1] * step[2] }
	for grew := true; grew && vox() < fingerprintVoxels/fingerprintBoxes; {
		grew = false
		for a := range 3 {
			if step[a] < shape[a] && vox() < fingerprintVoxels/fingerprintBoxes {
				step[a] = min(2*step[a], shape[a])
				grew = true
			}
		}
	}
	// The tiles are indexed, not listed: a 10^11-voxel raw has ~4·10^5 of
	// them and only fingerprintBoxes are read.
	var n [3]int
	for a := range 3 {
		n[a] = (shape[a] + step[a] - 1) / step[a]
	}
	count := n[0] * n[1] * n[2]
	tile := func(i int) volume.Box {
		lo := [3]int{i / (n[1] * n[2]) * step[0], i / n[2] % n[1] * step[1], i % n[2] * step[2]}
		return volume.Box{Lo: lo, Hi: [3]int{min(lo[0]+step[0], shape[0]), min(lo[1]+step[1], shape[1]), min(lo[2]+step[2], shape[2])}}
	}
	idx := make([]int, 0, min(count, fingerprintBoxes))
	if count <= fingerprintBoxes {
		for i := range count {
			idx = append(idx, i)
		}
	} else {
		h := fnv.New64a()
		h.Write([]byte(id))
		r := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
		pick := map[int]bool{}
		for len(pick) < fingerprintBoxes {
			pick[r.IntN(count)] = true
		}
		for i := range pick {
			idx = append(idx, i)
		}
		slices.Sort(idx)
	}
	out := make([]volume.Box, len(idx))
	for k, i := range idx {
		out[k] = tile(i)
	}
	return out
}

// tiles cuts the volume of shape into boxes of step (cut at its edges),
// in raster order.
func tiles(shape, step [3]int) []volume.Box {
	var out []volume.Box
	for z := 0; z < shape[0]; z += step[0] {
		for y := 0; y < shape[1]; y += step[1] {
			for x := 0; x < shape[2]; x += step[2] {
				out = append(out, volume.Box{Lo: [3]int{z, y, x},
					Hi: [3]int{min(z+step[0], shape[0]), min(y+step[1], shape[1]), min(x+step[2], shape[2])}})
			}
		}
	}
	return out
}

// fingerprintStats returns the normalisation parameters of a case's nch
// channels (shape, stored in chunks of chunk) from statsBoxes: read fills
// one slice per channel with a box's voxels. With one box (the whole
// volume) it is exactly caseStats; with several, a z-score's mean and
// population std are those of the boxes' voxels together (per-box mean
// and std, combined in the boxes' order), and the other schemes' do not
// depend on voxels.
func fingerprintStats(spec *preprocess.Spec, c Case, shape, chunk [3]int, nch int, read func(volume.Box, [][]float32) error) ([]preprocess.CTStats, error) {
	boxes := statsBoxes(c.ID, shape, chunk)
	var buf [][]float32
	type acc struct{ n, mean, m2 float64 }
	accs := make([]acc, nch)
	st := make([]preprocess.CTStats, nch)
	for _, b := range boxes {
		buf = resizeChannels(buf, nch, b.Voxels())
		if err := read(b, buf); err != nil {
			return nil, err
		}
		if len(boxes) == 1 {
			return caseStats(spec, c, &Volume{Image: buf}, nil)
		}
		for ch, x := range buf {
			if spec.Scheme(ch) != "zscore" {
				continue
			}
			m, sd, err := preprocess.MeanStd(x, nil)
			if err != nil {
				return nil, fmt.Errorf("case %s channel %d: %w", c.ID, ch, err)
			}
			// Chan et al.'s pairwise combination of means and sums of
			// squared deviations.
			a, nb := &accs[ch], float64(len(x))
			d := m - a.mean
			n := a.n + nb
			a.mean += d * nb / n
			a.m2 += sd*sd*nb + d*d*a.n*nb/n
			a.n = n
		}
	}
	for ch := range st {
		if spec.Scheme(ch) != "zscore" {
			var err error
			if st[ch], err = spec.Stats(ch, nil, nil); err != nil {
				return nil, fmt.Errorf("case %s channel %d: %w", c.ID, ch, err)
			}
			continue
		}
		a := accs[ch]
		st[ch] = preprocess.CTStats{Mean: a.mean, Std: math.Sqrt(a.m2 / a.n), Lower: math.Inf(-1), Upper: math.Inf(1)}
	}
	return st, nil
}
