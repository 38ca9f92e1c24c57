// Package data turns a NIfTI dataset into a stream of training batches:
// cases and folds, sampling, a persistent worker pool, an in-place batch
// ring, and decode-once caches.
//
// # Use
//
//	l, err := data.Open(cfg, data.Options{Patch: [3]int{128, 128, 128}, Batch: 2,
//		Augment: augCfg, Alloc: device.HostAllocator()})
//	defer l.Close()
//	train, err := l.Train(data.StreamOptions{StartEpoch: e, StartStep: s})
//	for {
//		b, err := train.Next(ctx) // b.Image NCDHW, b.Label NDHW, b.Epoch, b.Step
//		...                       // upload; when the copy has completed:
//		b.Release()
//	}
//	val, err := l.Validation(data.StreamOptions{Epochs: 1}) // plain patches, same pool
//	vol, err := l.LoadCase(ctx, c)                          // whole case, for sliding windows
//
// # Dataset and folds
//
// A dataset is an MSD dataset.json (a training list; multi-channel cases as
// a list of files or one 4D file), the nnU-Net layout (imagesTr/CASE_XXXX,
// labelsTr/CASE) or an explicit case list. Folds are nnU-Net v2's: an
// existing splits file (nnU-Net's splits_final.json format: data.splits_file,
// else one in the store or dataset folder), else generated as nnU-Net
// generates them (scikit-learn's KFold with random_state 12345 over the
// sorted case IDs, reproduced bit for bit with internal/nprand) and written
// by Setup to the training's experiment folder, never into the dataset; so a
// fold is the same cases on every machine, in every run, and in nnU-Net.
// data.holdout_fraction makes one hold-out split instead.
//
// # Determinism
//
// A sample's randomness is a PCG generator seeded from hash(seed, epoch,
// sample index) — never from the worker that makes it — and samples are
// written in place into their batch slot and delivered in sequence order.
// The bytes of every batch are therefore the same for any worker count
// (0 included: samples made inside Next) and for every voxel source: gz,
// cache and store preprocess identically (the gz source even normalises
// only the region a sample reads, with the case's whole-volume statistics).
//
// # Workers and memory
//
// One Pool of goroutines lives for the whole run and serves every stream
// (training, validation) and whole-case reads. Each stream dispatches
// sample jobs for at most workers × prefetch_factor batches ahead of the
// consumer, across epoch boundaries, into buffers of a ring that an
// Allocator supplies (aligned Go memory on the CPU, page-locked memory from
// the CUDA device); a buffer returns to the ring only on Release. Once
// warm, delivering a batch allocates nothing.
//
// # Sources
//
// "cache" decodes each case once and keeps it in memory within a byte
// budget (LRU); "gz" decodes the files for every sample, inflating only up
// to the last plane the sample reads; "store" reads the prepared store of
// package data/store (see Prepare), decompressing only the chunks a sample
// overlaps (or, with store_codec raw, copying them out of a memory map).
// "auto" uses the store when one exists, after rebuilding the cases whose
// files or preprocessing changed.
//
// # Preprocessing
//
// Every source applies the same deterministic preprocessing, in nnU-Net's
// order: channel stacking, with crop_to_nonzero the crop to the nonzero
// region, normalisation (zscore per case, within the nonzero mask with
// use_mask_for_norm, or ct with a window, mean and std — given in the
// config or computed once from the dataset's foreground and cached, see
// Config.CTStd), then, with target_spacing, resampling (resample_order
// linear: images trilinear, labels nearest; nnunet: nnU-Net's orders) and
// the foreground index on the resampled grid. Resampling needs the cases
// in one spatial unit: Setup, Prepare and Open refuse a dataset whose
// files state different ones (SameUnit). Cropping, the mask and
// cubic splines need the whole case, so with any of them the gz source
// preprocesses the whole case for every sample (the cache and the store
// do it once). Predictions are mapped back onto the files' full grid as
// nnU-Net exports them: the network's outputs resampled to the crop box
// (Volume.ResampleToCropBox), labels taken there, both pasted into the
// whole grid (Volume.PasteLabels, Volume.PasteProbabilities); a label
// map alone by Volume.LabelsOnSourceGrid.
//
// # Faults
//
// Before the first step, Verify reads every case the run uses and refuses
// labels beyond model.num_classes, labels on another grid than their
// image, NaN or infinite voxels and an empty training fold, naming each
// file; it warns of single-slice images and cases smaller than the patch.
// on_error: fail stops the stream with an error naming the file; skip
// quarantines the case (logged once) and replaces its samples with
// deterministic draws. A watchdog logs samples that run longer than
// watchdog_timeout with the worker, the case's files and the elapsed time;
// hard_timeout makes Next fail instead. A sample that never ends (a read
// that never returns: a FIFO, a hung NFS or FUSE mount) is never waited
// for when the data closes: past the hard timeout at once, otherwise after
// a grace of 10 s, its worker is abandoned, reported and replaced, so the
// run can always stop (abandon.go).
package data
