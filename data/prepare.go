package data

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"

	"github.com/voxtrain/voxtrain/data/store"
)

// prepVersion changes whenever the preprocessing code changes what it
// produces, so stores made by older code are rebuilt.
const prepVersion = 3

// PrepareOptions configures Prepare.
type PrepareOptions struct {
	// Workers decode cases in parallel (default: the config's worker
	// count, at least 1).
	Workers int
	// Logger receives progress (default slog.Default()).
	Logger *slog.Logger
	// Quiet logs only rebuilt cases, not every current one.
	Quiet bool
}

// PrepareReport summarises a Prepare run.
type PrepareReport struct {
	Dir string
	// Cases in the dataset; Written were (re)built; Current were kept.
	Cases, Written, Current int
	// RawBytes and StoredBytes total the store's voxel bytes before and
	// after compression.
	RawBytes, StoredBytes int64
	Elapsed               time.Duration
	Codec                 string
	Chunk                 int
	// CT holds the ct normalisation statistics computed from the dataset
	// (or read from their cache) for this run; nil when the config gives
	// them or does not use ct normalisation.
	CT *CTStatistics
	// TargetSpacing is the voxel size cases were resampled to (nil: none).
	TargetSpacing *[3]float64
}

// fingerprint is everything that decides a prepared case's bytes besides
// its source files.
func fingerprint(p preprocess.Spec, channels int) []byte {
	b, _ := json.Marshal(struct {
		Version  int             `json:"version"`
		Channels int             `json:"channels"`
		Prep     preprocess.Spec `json:"prep"`
	}{prepVersion, channels, p})
	return b
}

// Prepare writes (or brings up to date) the prepared store of cfg: every
// case of the dataset decoded once, preprocessed (channel stacking,
// normalisation, resampling to data.target_spacing when set), cut into
// chunks and compressed. ct statistics the config leaves to compute are
// computed first (see Config.CTStd). A case is rebuilt when
// one of its files changed (size and mtime, confirmed by content hash) or
// the preprocessing changed; the rest are kept.
func Prepare(ctx context.Context, cfg config.Data, opt PrepareOptions) (*PrepareReport, error) {
	t0 := time.Now()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Workers <= 0 {
		opt.Workers = max(1, cfg.WorkerCount())
	}
	ds, ch, err := openWithChannels(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkTargetUnit(cfg, ds); err != nil {
		return nil, err
	}
	// ct statistics left to compute come from the dataset (cached), and
	// enter the fingerprint through the spec like given ones.
	cfg, ct, err := resolveCT(ctx, cfg, ds, ch, opt.Workers, opt.Logger)
	if err != nil {
		return nil, err
	}
	rep, err := prepareStore(ctx, cfg, ds, ch, opt)
	if err != nil {
		return nil, err
	}
	rep.CT = ct
	rep.Elapsed = time.Since(t0)
	return rep, nil
}

// prepareStore is Prepare once the dataset is open (ds, with ch channels)
// and cfg's ct statistics are resolved: it brings the store up to date
// with opt.Workers goroutines (at least one).
func prepareStore(ctx context.Context, cfg config.Data, ds *Dataset, ch int, opt PrepareOptions) (*PrepareReport, error) {
	if err := storable(ds); err != nil {
		return nil, err
	}
	opt.Workers = max(1, opt.Workers)
	p := preprocess.SpecOf(cfg)
	dir := cfg.StoreDir()
	w, err := store.NewWriter(dir, fingerprint(p, ch), cfg.StoreChunk, cfg.StoreCodec)
	if err != nil {
		return nil, err
	}
	rep := &PrepareReport{Dir: dir, Cases: len(ds.Cases), Codec: cfg.StoreCodec, Chunk: cfg.StoreChunk, TargetSpacing: p.Target}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	jobs := make(chan int)
	for i := 0; i < opt.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var src Volume // a worker's decode buffers, reused
			for c := range jobs {
				written, err := prepareCase(w, ds.Cases[c], ch, &p, &src, opt)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if written {
					rep.Written++
				} else {
					rep.Current++
				}
				mu.Unlock()
			}
		}()
	}
	for c := range ds.Cases {
		if ctx.Err() != nil {
			break
		}
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	keep := map[string]bool{}
	for _, c := range ds.Cases {
		keep[c.ID] = true
	}
	if len(errs) == 0 {
		w.Remove(keep) // cases no longer in the dataset
	}
	if err := w.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("prepare %s: %w", dir, errors.Join(errs...))
	}
	for _, c := range ds.Cases {
		if e := w.Entry(c.ID); e != nil {
			rep.RawBytes += e.RawBytes
			rep.StoredBytes += e.StoredBytes
		}
	}
	return rep, nil
}

// prepareCase rebuilds one case unless it is current.
// storable checks that every case of ds is made of whole files, which
// the prepared store can fingerprint (size, mtime, content hash) to tell
// when a case must be prepared again. A window of a chunked volume (a
// manifest's crop), a derived label (masked, resampled, bit-packed) or a
// chunked store (Zarr, N5: a folder of chunks, possibly terabytes) is
// not: such datasets read their chunks lazily through source gz, which
// needs no store.
func storable(ds *Dataset) error {
	for _, c := range ds.Cases {
		for _, f := range c.Files() {
			why := ""
			if volume.FilePath(f) != f {
				why = "a window or derived volume of " + volume.FilePath(f)
			} else if st, err := os.Stat(f); err == nil && st.IsDir() {
				why = "a folder: a chunked store or a stack of slices"
			}
			if why != "" {
				return fmt.Errorf("data.source: the prepared store holds cases made of whole files, and case %s reads %s (%s); use data.source: gz, which reads its chunks lazily", c.ID, f, why)
			}
		}
	}
	return nil
}

func prepareCase(w *store.Writer, c Case, channels int, p *preprocess.Spec, src *Volume, opt PrepareOptions) (bool, error) {
	files := c.Files()
	ok, now, why, err := store.Current(w.Entry(c.ID), files)
	if err != nil {
		return false, fmt.Errorf("case %s: %w", c.ID, err)
	}
	if ok {
		w.Touch(c.ID, now)
		if !opt.Quiet {
			opt.Logger.Debug("data: store case current", "case", c.ID)
		}
		return false, nil
	}
	srcs := make([]store.SourceFile, len(files))
	for i, f := range files {
		if srcs[i], err = store.Stat(f, nil); err != nil {
			return false, fmt.Errorf("case %s: %w", c.ID, err)
		}
	}
	v, _, err := readCase(c, channels, p, nil, src)
	if err != nil {
		return false, err
	}
	if err := w.Put(c.ID, srcs, v.Shape, v.Image, v.Label, encodeMeta(v)); err != nil {
		return false, err
	}
	opt.Logger.Info("data: store case written", "case", c.ID, "reason", why)
	return true, nil
}

// encodeMeta serialises what planning needs besides voxels: spacing,
// affine, the foreground index, the source shape and, for a cropped case,
// the crop box (little-endian). The source shape and the box come last so
// that stores written before them existed (no resampling: the source
// shape is the shape; no crop) still decode.
func encodeMeta(v *Volume) []byte {
	b := encodeMetaBody(v)
	for _, n := range v.sourceShape() {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
	}
	if v.Crop != (volume.Box{}) {
		for _, n := range append(v.Crop.Lo[:], v.Crop.Hi[:]...) {
			b = binary.LittleEndian.AppendUint32(b, uint32(n))
		}
	}
	return b
}

func encodeMetaBody(v *Volume) []byte {
	var b []byte
	for _, s := range v.Spacing {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s))
	}
	for _, row := range v.Affine {
		for _, x := range row {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	if v.FG == nil {
		return binary.LittleEndian.AppendUint32(b, math.MaxUint32)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v.FG.Classes)))
	for k, cl := range v.FG.Classes {
		b = append(b, cl)
		b = binary.LittleEndian.AppendUint32(b, uint32(v.FG.Counts[k]))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v.FG.Locations[k])))
		for _, l := range v.FG.Locations[k] {
			b = binary.LittleEndian.AppendUint32(b, uint32(l))
		}
	}
	return b
}

func decodeMeta(b []byte, shape [3]int) (caseMeta, error) {
	m, rest, err := decodeMetaBody(b, shape)
	if err != nil {
		return m, err
	}
	m.srcShape = shape
	if len(rest) >= 12 {
		for a := range m.srcShape {
			m.srcShape[a] = int(binary.LittleEndian.Uint32(rest[4*a:]))
			if m.srcShape[a] < 1 {
				return m, errors.New("corrupt case metadata (run train prepare again)")
			}
		}
	}
	if len(rest) >= 12+24 {
		for a := range 3 {
			m.crop.Lo[a] = int(binary.LittleEndian.Uint32(rest[12+4*a:]))
			m.crop.Hi[a] = int(binary.LittleEndian.Uint32(rest[24+4*a:]))
			if m.crop.Lo[a] >= m.crop.Hi[a] || m.crop.Hi[a] > m.srcShape[a] {
				return m, errors.New("corrupt case metadata (run train prepare again)")
			}
		}
	}
	return m, nil
}

func decodeMetaBody(b []byte, shape [3]int) (caseMeta, []byte, error) {
	m := caseMeta{shape: shape}
	bad := errors.New("corrupt case metadata (run train prepare again)")
	if len(b) < 8*19+4 {
		return m, nil, bad
	}
	for i := range m.spacing {
		m.spacing[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for i := range m.affine {
		for j := range m.affine[i] {
			m.affine[i][j] = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		}
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if n == math.MaxUint32 {
		return m, b, nil
	}
	if n > 255 {
		return m, nil, bad
	}
	fg := &preprocess.ForegroundIndex{Shape: shape}
	vox := shape[0] * shape[1] * shape[2]
	for k := 0; k < int(n); k++ {
		if len(b) < 9 {
			return m, nil, bad
		}
		cl := b[0]
		cnt := int(binary.LittleEndian.Uint32(b[1:]))
		nl := int(binary.LittleEndian.Uint32(b[5:]))
		b = b[9:]
		if nl == 0 || len(b) < 4*nl {
			return m, nil, bad
		}
		locs := make([]int32, nl)
		for i := range locs {
			locs[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			if locs[i] < 0 || int(locs[i]) >= vox {
				return m, nil, bad
			}
		}
		b = b[4*nl:]
		fg.Classes = append(fg.Classes, cl)
		fg.Counts = append(fg.Counts, cnt)
		fg.Locations = append(fg.Locations, locs)
	}
	m.fg = fg
	return m, b, nil
}
