package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/preprocess"
	"github.com/voxtrain/voxtrain/volume"

	"github.com/voxtrain/voxtrain/augment"
	"github.com/voxtrain/voxtrain/data/store"
)

// Options are what the data section does not hold: the run's seed, the
// trainer's patch and batch size, the augmentation, and where batch
// memory comes from.
type Options struct {
	// Seed drives shuffling and every sample's randomness (the run's seed).
	Seed uint64
	// Iterations is the number of training batches per epoch, cases drawn
	// with replacement (nnU-Net's 250; train.iterations_per_epoch); 0
	// makes an epoch one pass over the training cases in a fresh random
	// order.
	Iterations int
	// Patch is the patch size (D, H, W); Batch the batch size (one
	// rank's, in a data-parallel job).
	Patch [3]int
	Batch int
	// Ranks and Rank shard the training and validation streams over a
	// data-parallel job of Ranks processes (0 or 1: one process): each
	// step's global batch is Ranks×Batch samples of the sequence one
	// process with that batch would draw, and rank Rank takes its
	// contiguous Batch of them (see caseSampler).
	Ranks, Rank int
	// Augment configures training augmentation (validation patches are
	// plain crops).
	Augment config.Augment
	// IgnoreLabel is loss.ignore_label (0: none): foreground-centred
	// crops never centre on its voxels.
	IgnoreLabel int
	// Alloc supplies batch buffers (default AlignedAllocator).
	Alloc Allocator
	// Held is how many batches the consumer may hold unreleased at once
	// per stream (default 2).
	Held int
	// Logger receives the pipeline's reports (default slog.Default()).
	Logger *slog.Logger
}

// Loader is a dataset opened for training: its folds, a persistent worker
// pool, a voxel source (NIfTI files, the memory cache or the prepared
// store) and the streams made from them.
type Loader struct {
	cfg      config.Data
	opt      Options
	ds       *Dataset
	train    []int
	val      []int
	channels int
	spec     preprocess.Spec
	pool     *Pool
	quar     *quarantine
	src      voxelSource
	cache    *volumeCache
	st       *store.Store
	aug      *augment.Augmenter
	valAug   *augment.Augmenter
	log      *slog.Logger
	// Source is the voxel source in use: "gz", "cache" or "store".
	Source string
}

// Open opens the dataset of cfg for training: its folds, the voxel source
// and the worker pool. It only reads: the splits file, ct statistics and
// prepared store it uses are made by Setup (a missing splits file gives
// the folds Setup would write; ct statistics must be resolved).
func Open(cfg config.Data, opt Options) (*Loader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NeedsCTStatistics() {
		return nil, errUnresolvedCT(cfg)
	}
	if opt.Batch < 1 {
		return nil, fmt.Errorf("data: batch size %d, want ≥ 1", opt.Batch)
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Alloc == nil {
		opt.Alloc = AlignedAllocator{}
	}
	ds, err := OpenDataset(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkTargetUnit(cfg, ds); err != nil {
		return nil, err
	}
	train, val, err := FoldCases(ds, cfg)
	if err != nil {
		return nil, err
	}
	ch, err := channelCount(ds)
	if err != nil {
		return nil, err
	}
	l := &Loader{cfg: cfg, opt: opt, ds: ds, train: train, val: val, channels: ch,
		spec: preprocess.SpecOf(cfg), log: opt.Logger}
	l.aug, err = augment.New(opt.Augment, opt.Patch, ch)
	if err != nil {
		return nil, err
	}
	l.valAug, err = augment.New(config.Augment{}, opt.Patch, ch)
	if err != nil {
		return nil, err
	}
	l.aug.SetIgnoreLabel(opt.IgnoreLabel)
	l.valAug.SetIgnoreLabel(opt.IgnoreLabel)
	if err := l.pickSource(); err != nil {
		return nil, err
	}
	l.pool = newPool(cfg.WorkerCount(), poolOptions{Logger: opt.Logger, Watchdog: cfg.WatchdogTimeout, HardTimeout: cfg.HardTimeout})
	l.quar = newQuarantine(opt.Logger)
	return l, nil
}

// openWithChannels opens cfg's dataset (OpenDataset) and finds its channel
// count (channelCount).
func openWithChannels(cfg config.Data) (*Dataset, int, error) {
	ds, err := OpenDataset(cfg)
	if err != nil {
		return nil, 0, err
	}
	ch, err := channelCount(ds)
	if err != nil {
		return nil, 0, err
	}
	return ds, ch, nil
}

// channelCount is the dataset's declared channel count, else what the
// first case's files hold.
func channelCount(ds *Dataset) (int, error) {
	if ds.Channels > 0 {
		return ds.Channels, nil
	}
	if len(ds.Cases) == 0 {
		return 0, errors.New("data: the dataset has no cases")
	}
	c := ds.Cases[0]
	if len(c.Images) > 1 {
		return len(c.Images), nil
	}
	f, err := volume.Open(c.Images[0])
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Header().Channels, nil
}

// pickSource opens the voxel source cfg names. "auto" reads the prepared
// store when it is there and current, else decodes into the memory cache.
func (l *Loader) pickSource() error {
	src := l.cfg.Source
	if src == "auto" {
		src = "cache"
		if usesStore(l.cfg) {
			s, err := l.openStore()
			if err == nil {
				l.src, l.Source = s, "store"
				return nil
			}
			l.log.Warn("data: not reading the prepared store (train prepare brings it up to date); decoding into the memory cache instead", "store", l.cfg.StoreDir(), "reason", err)
		}
	}
	switch src {
	case "gz":
		l.src = newGZSource(l)
	case "cache":
		l.cache = newVolumeCache(int64(l.cfg.CacheBytes), func(c int) (*Volume, error) { return l.read(c) })
		l.src = &cacheSource{l: l, cache: l.cache}
	case "store":
		s, err := l.openStore()
		if err != nil {
			return fmt.Errorf("%w (train prepare brings the store up to date)", err)
		}
		l.src = s
	}
	l.Source = src
	return nil
}

// openStore opens the prepared store and every case in it, after checking
// that it was made with this preprocessing, chunk and codec, from the
// dataset's files as they are now.
func (l *Loader) openStore() (*storeSource, error) {
	dir := l.cfg.StoreDir()
	if err := storable(l.ds); err != nil {
		return nil, err
	}
	st, err := store.Open(dir)
	if err != nil {
		return nil, err
	}
	ix := st.Index()
	switch {
	case ix.PrepHash != store.HashPrep(fingerprint(l.spec, l.channels)):
		err = fmt.Errorf("store %s was made with other preprocessing", dir)
	case ix.Chunk != l.cfg.StoreChunk || ix.Codec != l.cfg.StoreCodec:
		err = fmt.Errorf("store %s has %d³ %s chunks, the config asks for %d³ %s", dir, ix.Chunk, ix.Codec, l.cfg.StoreChunk, l.cfg.StoreCodec)
	}
	s := &storeSource{l: l, cases: make([]*store.Case, len(l.ds.Cases)), metas: make([]caseMeta, len(l.ds.Cases))}
	for i, c := range l.ds.Cases {
		if err != nil {
			break
		}
		ok, _, why, cerr := store.Current(ix.Cases[c.ID], c.Files())
		if cerr != nil || !ok {
			err = fmt.Errorf("store %s: case %s is not current (%s)", dir, c.ID, errors.Join(cerr, errors.New(why)))
			break
		}
		sc, cerr := st.Case(c.ID)
		switch {
		case cerr != nil:
			err = cerr
		case sc.Channels != l.channels:
			err = fmt.Errorf("store %s: case %s has %d channels, the dataset %d", dir, c.ID, sc.Channels, l.channels)
		default:
			m, merr := decodeMeta(sc.Extra, sc.Shape)
			if merr != nil {
				err = fmt.Errorf("store %s: case %s: %w", dir, c.ID, merr)
			}
			s.cases[i], s.metas[i] = sc, m
		}
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	l.st = st
	return s, nil
}

// read decodes and preprocesses case c (see readCase).
func (l *Loader) read(c int) (*Volume, error) {
	v, _, err := readCase(l.ds.Cases[c], l.channels, &l.spec, nil, nil)
	return v, err
}

// Dataset returns the dataset.
func (l *Loader) Dataset() *Dataset { return l.ds }

// TrainCases and ValCases return the fold's case indices.
func (l *Loader) TrainCases() []int { return l.train }

// ValCases returns the validation case indices of the fold.
func (l *Loader) ValCases() []int { return l.val }

// Channels returns the number of image channels.
func (l *Loader) Channels() int { return l.channels }

// Pool returns the worker pool (for its stage timings and worker count).
func (l *Loader) Pool() *Pool { return l.pool }

// CacheStats returns the memory cache's counters (zero without one).
func (l *Loader) CacheStats() CacheStats {
	if l.cache == nil {
		return CacheStats{}
	}
	return l.cache.stats()
}

// Quarantined returns the cases skipped after failures (on_error: skip),
// by ID, with their errors.
func (l *Loader) Quarantined() map[string]error {
	out := map[string]error{}
	for c, err := range l.quar.list() {
		out[l.ds.Cases[c].ID] = err
	}
	return out
}

// StreamOptions positions a stream in the run.
type StreamOptions struct {
	// StartEpoch and StartStep are where the first batch is (resume from
	// a checkpoint's data cursor).
	StartEpoch, StartStep int
	// Epochs is how many epochs the stream delivers before io.EOF (0: no
	// end).
	Epochs int
	// Iterations overrides the batches per epoch (training:
	// Options.Iterations; validation: 0 = one pass over the cases).
	Iterations int
}

// TrainBatchesPerEpoch returns the number of batches in a training
// epoch: Options.Iterations, or one pass over the training cases.
func (l *Loader) TrainBatchesPerEpoch() int {
	return l.trainSampler().Batches()
}

// trainSampler draws the training stream's samples.
func (l *Loader) trainSampler() *caseSampler {
	smp := &caseSampler{Cases: l.train, Seed: l.opt.Seed, Batch: l.opt.Batch, Iterations: l.opt.Iterations,
		Oversample: l.cfg.OversampleForeground, Ranks: l.opt.Ranks, Rank: l.opt.Rank}
	for _, c := range l.train {
		if l.ds.Cases[c].Weight != 1 {
			smp.Weights = make([]float64, len(l.train))
			for i, c := range l.train {
				smp.Weights[i] = l.ds.Cases[c].Weight
			}
			break
		}
	}
	return smp
}

// Train returns the training stream: cases of the fold's training split,
// shuffled per epoch from (seed, epoch), augmented, with the last
// round(batch × oversample_foreground) slots of each batch centred on
// foreground.
func (l *Loader) Train(o StreamOptions) (*BatchStream, error) {
	smp := l.trainSampler()
	if o.Iterations > 0 {
		smp.Iterations = o.Iterations
	}
	return l.stream("train", smp, &patchTask{l: l, aug: l.aug, src: l.src}, 0, o, l.cfg.Workers.Auto)
}

// Validation returns a stream of plain (unaugmented) patches from the
// validation cases, in a fixed order, with the same foreground
// oversampling; each epoch draws the same patches. It shares the pool
// (and the cache) with training.
func (l *Loader) Validation(o StreamOptions) (*BatchStream, error) {
	if len(l.val) == 0 {
		return nil, errors.New("data: no validation cases (fold -1 trains on all)")
	}
	smp := &caseSampler{Cases: l.val, Seed: l.opt.Seed, Batch: l.opt.Batch, Iterations: o.Iterations,
		Oversample: l.cfg.OversampleForeground, Sequential: true, Salt: 1, Ranks: l.opt.Ranks, Rank: l.opt.Rank}
	return l.stream("val", smp, &patchTask{l: l, aug: l.valAug, src: l.src}, 1, o, false)
}

func (l *Loader) stream(name string, smp *caseSampler, t task, salt uint64, o StreamOptions, auto bool) (*BatchStream, error) {
	return newStream(l.pool, streamOptions{name: name, sampler: smp, task: t, salt: salt,
		startEpoch: o.StartEpoch, startStep: o.StartStep, epochs: o.Epochs,
		depth: max(1, l.pool.Workers()) * l.cfg.PrefetchFactor, held: l.opt.Held,
		channels: l.channels, patch: l.opt.Patch, alloc: l.opt.Alloc,
		skip: l.cfg.OnError == "skip", quar: l.quar, auto: auto, sameEveryEpoch: name == "val",
		unknown: l.ds.unknownClasses()})
}

// LoadCase returns case c whole, decoded and preprocessed, read on a pool
// worker through the same source (and cache) as training, for
// sliding-window validation. A volume from the cache is shared: do not
// modify it.
func (l *Loader) LoadCase(ctx context.Context, c int) (*Volume, error) {
	if c < 0 || c >= len(l.ds.Cases) {
		return nil, fmt.Errorf("data: case %d out of range (%d cases)", c, len(l.ds.Cases))
	}
	var v *Volume
	err := l.pool.do(ctx, func(w *worker) error {
		var err error
		v, err = l.src.volume(w, c)
		return err
	})
	return v, err
}

// Close closes every stream, stops the workers and closes the store.
func (l *Loader) Close() error {
	err := l.pool.Close()
	if gz, ok := l.src.(*gzSource); ok && gz.files != nil {
		gz.files.close()
	}
	if l.st != nil {
		err = errors.Join(err, l.st.Close())
	}
	return err
}
