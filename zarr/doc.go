// Package zarr reads chunked array stores as volumes: Zarr v2 (.zarray),
// Zarr v3 (zarr.json, with sharding), OME-NGFF 0.4 and 0.5 multiscale
// images on top of them, and N5 (attributes.json). A store is a directory
// (case.zarr, case.ome.zarr, case.n5), or an array inside one
// (case.ome.zarr/1 picks a multiscale level by its path).
//
// Axes: OME-NGFF's axes (t, c, z, y, x) or v3's dimension_names name
// them; an unnamed array is (y, x), (z, y, x), (c, z, y, x) or
// (t=1, c, z, y, x). A time axis must have one point. Spacing and the
// affine's translation come from OME-NGFF's scale and translation (the
// dataset's, then the multiscale's), an N5 array's COSEM transform (below)
// or else its pixelResolution/resolution, in the store's unit as written
// (not converted to millimetres); the affine is axis-aligned, as OME-NGFF
// has no orientation.
//
// COSEM (cosem.go): the N5 volumes OpenOrganelle publishes (Janelia's
// COSEM / CellMap, written by fibsem-tools, modelled by cellmap-schemas)
// state their geometry in a "transform" on each level array, {"axes":
// ["z", "y", "x"], "order": "C", "scale", "translate", "units"}, and a
// "multiscales" on the group above the levels, [{"datasets": [{"path":
// "s0", "transform": {…}}, …]}]. Such a group (jrc_hela-2.n5/em/
// fibsem-uint8) is a multiscale image as an OME-Zarr one is (Open,
// OpenWith's Level and TargetSpacing, ImageLevels), and an N5 array's
// own transform is read when it is opened alone. Spacing is scale,
// origin translate, unit units (normalised; z, y, x must agree), each
// axis by its name: "order" (or "ordering", as funlib writes it) "C",
// the default, lists the axes slowest first as numpy indexes the array
// (z, y, x), "F" fastest first as N5 lists its dimensions (x, y, z). A
// transform whose lists are not one per dimension, whose numbers are
// not numbers (scale > 0), whose axes are not x, y, z (or c, t) once
// each, or whose order is neither is an error naming its attributes.json
// and key; so is a level whose array's transform disagrees with the
// group's (both are written, equal, by the reference tools, and either
// could be the wrong one). Where an array has both a transform and
// Neuroglancer's pixelResolution, the transform is read, as fibsem-tools'
// and cellmap's xarray readers read it and pixelResolution is only its
// spacing copied for Neuroglancer; a Zarr array's "transform" is read
// only as a level of a COSEM group.
//
// Units: the header's Unit is the spatial axes' OME-NGFF "unit" (0.4 and
// 0.5), a COSEM transform's "units", or N5's pixelResolution "unit" or
// "units" list (n5-viewer,
// BigDataViewer: ["nm", "nm", "nm"]), spelt as volume.NormalizeUnit does
// ("nm" → "nanometer"); "" when the store says none. z, y and x must
// state the same unit (or all none, volume.AxesUnit): a store whose
// spatial axes disagree, or where one states none beside others that do,
// is an error naming its metadata file and the axes. A time axis's unit
// is not looked at. CreateImage writes ImageSpec.Unit on every spatial
// axis.
//
// Multiscale images (OME-NGFF, COSEM): Open reads level 0; OpenWith reads
// Options.Level, or the level ChooseLevel picks for Options.TargetSpacing
// (in Options.TargetUnit when given: the levels' spacings are converted
// into it first);
// naming the level's array (case.ome.zarr/1, case.n5/em/fibsem-uint8/s1)
// reads it through plain volume.Open; ImageLevels lists a group's levels
// (path, shape, spacing, origin, unit).
//
// Remote stores: a store given as an http:// or https:// URL
// (https://host/path/case.ome.zarr, …/case.ome.zarr/0) is read over HTTP
// (store.go; a local path through the same store interface, from files).
// Each object is a GET of the store's URL with its key appended (no
// query strings), parts of shards (the index, an inner chunk) Range GETs;
// a server that ignores Range and sends the whole object is read too.
// Options (or OpenContext's context) govern it: Timeout bounds each GET
// (DefaultTimeout, 30 s); a GET that fails in a way that may pass (a 5xx
// or 429, a timeout, a broken connection) is retried Retries times
// (DefaultRetries, 4) after 250 ms, doubling, with jitter; a 404 is a
// missing object (a chunk: fill), 401, 403 and other 4xx are errors naming
// the URL and status at once. At most MaxConcurrent GETs
// (DefaultMaxConcurrent, 16) of a file are in flight, and a region read
// fetches that many chunks at a time. Cancelling OpenContext's context
// ends the GETs in flight and fails the reads waiting on them. Nothing is
// written over HTTP: CreateImage refuses a URL.
//
// Size: an array may have any shape volume.CheckShape addresses (each
// axis below 2^31, at most 2^53 voxels times channels): OpenOrganelle's
// s0 levels of 10^11 voxels open, and their regions are read, with every
// chunk index, origin and offset computed in int. What a read decodes at
// once is bounded instead: a box of more than 2^31−1 values
// (volume.CheckInMemory, a whole read of such a volume) is an error naming
// the array and wrapping volume.ErrTooLarge.
//
// Reads are lazy: ReadRegion decodes only the chunks its box overlaps,
// concurrently, through a byte-bounded LRU cache of decoded chunks that
// the file's reads share. Nothing of a chunk is trusted: every length in a
// chunk or a compressed stream is checked against what the metadata says
// the chunk holds, so a corrupt store is an error naming the chunk's file,
// never a panic or an allocation larger than the metadata justifies.
//
// The codecs are Go: blosc's container and its blosclz codec are
// implemented here (blosc.go, blosclz.go); zlib, gzip and bzip2 come from
// the standard library and klauspost/compress, zstd from
// klauspost/compress, lz4 from pierrec/lz4 and xz from ulikunitz/xz.
// N5's lz4 is lz4-java's LZ4Block stream (n5lz4.go): frames of LZ4 blocks
// (through pierrec/lz4) or raw bytes, each with its XXH32 checksum
// (internal/xxh32) verified.
//
// Writing: CreateImage makes an OME-NGFF 0.4 image of one level (a Zarr
// v2 array, blosc-zstd with byte shuffle or zlib) whose chunks
// ImageWriter.WriteBlock writes, each atomically, concurrently for
// different chunks (what train predict writes a huge volume's labels
// with). ome-zarr-py and zarr-python read what it writes
// (cmd/train/testdata/check_ome_zarr.py).
package zarr
